//! What the fleet tests share (RUNTIME §9): "machines" (one `$HCP_HOME` each, every one
//! pointing `config.json`'s `state` at one schema of one database), the server of
//! `.ci/pg-start` (`HCP_TEST_PG_URL`, and its pooler `HCP_TEST_PG_POOL_URL`), private
//! servers for the tests that stop or change one, `psql` for what only the operator's SQL
//! does (ageing a rate window, editing a record by hand), and parallel callers.
//!
//! Without a server a test says `skipped: TEST: REASON` (`common::skip`) and returns;
//! under `CI=true` that fails.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, World};
use crate::exec_common;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The shared test server's URL, or `None` (after a skip).
pub fn url() -> Option<String> {
    match std::env::var("HCP_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            common::skip::skip(
                "HCP_TEST_PG_URL is not set: start a server with `eval \"$(.ci/pg-start --pool)\"`",
            );
            None
        }
    }
}

/// The shared server's pooler (pgbouncer), when `.ci/pg-start --pool` made one.
pub fn pool_url() -> Option<String> {
    std::env::var("HCP_TEST_PG_POOL_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// A schema name no other test uses.
pub fn schema_name(tag: &str) -> String {
    let mut raw = [0u8; 6];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom").unwrap(), &mut raw).unwrap();
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    format!("f_{tag}_{hex}")
}

/// Runs SQL with `psql` against `url` and returns what it prints (unaligned, tuples only).
pub fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// One machine of the fleet: its own store, its `config.json` naming the fleet's state.
pub struct Machine {
    pub w: World,
    pub name: &'static str,
}

impl Machine {
    /// A new machine whose state is `schema` at `url`.
    pub fn new(name: &'static str, url: &str, schema: &str) -> Self {
        common::example_bins();
        let w = World::new();
        let m = Self { w, name };
        m.point_at(url, schema);
        // The machine's own store (RUNTIME §4): its chain key keys its chain of the fleet.
        m.w.init();
        m
    }

    /// Writes `config.json`'s `state` (the rest of the file is the defaults).
    pub fn point_at(&self, url: &str, schema: &str) {
        std::fs::create_dir_all(&self.w.hcp_home).unwrap();
        let cfg = serde_json::json!({"state": {"url": url, "schema": schema}});
        std::fs::write(self.w.hcp_home.join("config.json"), cfg.to_string()).unwrap();
    }

    /// `hcp ARGS` as the owner of this machine.
    pub fn run(&self, args: &[&str]) -> Output {
        self.w.run(args)
    }

    /// `hcp ARGS`, asserting success; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{}: hcp {args:?}:\n{}",
            self.name,
            self.w.render(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Installs and activates a fixture or gold pack.
    pub fn install(&self, id: &str) {
        exec_common::install(&self.w, &exec_common::source(id));
    }

    /// Writes the runtime policy (YAML).
    pub fn policy(&self, yaml: &str) {
        std::fs::write(self.w.hcp_home.join("policy.yaml"), yaml).unwrap();
    }

    /// `hcp exec --json ARGS` as the session `token` (the owner when `None`): exit status
    /// and result object.
    pub fn exec(&self, token: Option<&str>, args: &[&str]) -> (i32, Value) {
        let env: Vec<(&str, &str)> = token.map(|t| ("HCP_SESSION", t)).into_iter().collect();
        let (out, v) = exec_common::exec_json_env(&self.w, args, &env);
        (exec_common::status(&out), v)
    }

    /// `hcp audit verify --json` of the fleet, seen from this machine.
    pub fn verify(&self) -> (i32, Value) {
        let out = self.run(&["audit", "verify", "--json"]);
        let v = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("verify --json ({e}):\n{}", self.w.render(&out)));
        (exec_common::status(&out), v)
    }

    /// Asserts that `hcp audit verify` finds every chain of the fleet sound.
    pub fn assert_sound(&self) -> Value {
        let (status, v) = self.verify();
        assert_eq!((status, &v["ok"]), (0, &Value::Bool(true)), "{v}");
        v
    }

    /// This machine's id (`state/machine-id`, made on first use).
    pub fn id(&self) -> String {
        std::fs::read_to_string(self.w.hcp_home.join("state/machine-id"))
            .unwrap()
            .trim()
            .to_owned()
    }
}

/// A new fleet of `n` machines on one fresh, migrated schema of `url` (the first machine
/// migrates it), each with `packs` installed; `None` when no server (skipped).
pub fn fleet(tag: &str, urls: &[&str], packs: &[&str]) -> (String, Vec<Machine>) {
    let schema = schema_name(tag);
    let names = ["a", "b", "c", "d"];
    let machines: Vec<Machine> = urls
        .iter()
        .zip(names)
        .map(|(u, n)| Machine::new(n, u, &schema))
        .collect();
    let out = machines[0].ok(&["state", "migrate"]);
    assert!(out.contains("applied migration"), "{out}");
    for m in &machines {
        for p in packs {
            m.install(p);
        }
    }
    (schema, machines)
}

/// One call's answer in a parallel run: who made it, its exit status and result.
#[derive(Debug, Clone)]
pub struct Answer {
    pub machine: &'static str,
    pub status: i32,
    pub code: Option<String>,
    /// When the `hcp` process was started and when it ended, since `epoch`.
    pub started: std::time::Duration,
    pub ended: std::time::Duration,
}

/// Runs `calls` calls of `args(worker, i)` on each of `workers` threads per machine, in
/// parallel (each thread one `hcp` process after the other), as session `token`.
pub fn parallel(
    machines: &[&Machine],
    workers: usize,
    calls: usize,
    token: &str,
    args: &(dyn Fn(usize, usize) -> Vec<String> + Sync),
) -> Vec<Answer> {
    let epoch = std::time::Instant::now();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (mi, m) in machines.iter().enumerate() {
            for k in 0..workers {
                let worker = mi * workers + k;
                handles.push(s.spawn(move || {
                    (0..calls)
                        .map(|i| {
                            let a = args(worker, i);
                            let a: Vec<&str> = a.iter().map(String::as_str).collect();
                            let started = epoch.elapsed();
                            let (status, v) = m.exec(Some(token), &a);
                            Answer {
                                machine: m.name,
                                status,
                                code: v["code"].as_str().map(str::to_owned),
                                started,
                                ended: epoch.elapsed(),
                            }
                        })
                        .collect::<Vec<_>>()
                }));
            }
        }
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// How many answers have each (status, code).
pub fn tally(answers: &[Answer]) -> BTreeMap<(i32, Option<String>), usize> {
    let mut t = BTreeMap::new();
    for a in answers {
        *t.entry((a.status, a.code.clone())).or_insert(0) += 1;
    }
    t
}

/// The records of `schema`'s chains of one kind.
pub fn count_kind(url: &str, schema: &str, kind: &str) -> usize {
    psql(
        url,
        &format!(
            "SELECT count(*) FROM {schema}.audit_record WHERE body::jsonb->>'kind' = '{kind}'"
        ),
    )
    .parse()
    .unwrap()
}

/// A private server of `.ci/pg-start` (for the tests that stop, restart or reconfigure
/// it); stopped and removed on drop.
pub struct Server {
    pub dir: PathBuf,
    /// The trusted superuser's URL over the socket.
    pub url: String,
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../.ci")
        .join(name)
}

impl Server {
    /// Starts one, or `None` (skipped) when there is no server to test against.
    pub fn start() -> Option<Self> {
        url()?;
        let out = Command::new(script("pg-start"))
            .arg("--quiet")
            .output()
            .unwrap();
        if !out.status.success() {
            common::skip::skip(&format!(
                "a private server did not start: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return None;
        }
        let vars = parse_exports(&String::from_utf8(out.stdout).unwrap());
        Some(Self {
            dir: vars["HCP_TEST_PG_DIR"].clone().into(),
            url: vars["HCP_TEST_PG_URL"].clone(),
        })
    }

    /// `ctl stop|start|crash`.
    pub fn ctl(&self, what: &str) {
        let st = Command::new(self.dir.join("ctl"))
            .arg(what)
            .status()
            .unwrap();
        assert!(st.success(), "ctl {what}");
    }

    /// Runs SQL as the trusted superuser.
    pub fn psql(&self, sql: &str) -> String {
        psql(&self.url, sql)
    }

    /// The URL of `role` with `password` over the same socket.
    pub fn role_url(&self, role: &str, password: &str) -> String {
        let base: Vec<&str> = self
            .url
            .split_whitespace()
            .filter(|kv| !kv.starts_with("user="))
            .collect();
        format!("{} user={role} password={password}", base.join(" "))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(script("pg-stop")).arg(&self.dir).status();
    }
}

/// `export NAME=VALUE` lines as printed by `printf %q` (backslash escapes only).
fn parse_exports(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((k, v)) = line.strip_prefix("export ").and_then(|r| r.split_once('=')) else {
            continue;
        };
        let mut value = String::new();
        let mut chars = v.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                value.extend(chars.next());
            } else {
                value.push(c);
            }
        }
        out.insert(k.to_owned(), value);
    }
    out
}

/// The schema version of the fleet's database this hcp reads and writes
/// (`hcp_state_pg::SCHEMA_VERSION`).
pub const SCHEMA_VERSION: i32 = 6;
