//! Helpers of the `view_*` integration tests (issue 23, RUNTIME §5.1–§5.4: a call sees only
//! what it was given). Built on `confine_common`'s world (as the current user and, as
//! root, as `nobody` through `setpriv`): the owner's machine as a hostile agent found it —
//! credentials outside any list, other stores, sockets — and the issue's own pack, `sq`:
//! `sqlite3 :memory: {{query}}`, whose `.shell` is the escape, with a `read` and a `write`
//! verb in each land.
//!
//! Each test file declares `mod common;`, `mod confine_common;` and `mod view_common;`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, World};
use crate::confine_common::{As, Cw, SECRET};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The lands every probe runs in.
pub const LANDS: [&str; 3] = ["personal", "brain", "local"];

/// The project of the sessions (a `brain` call needs one).
pub const PROJECT: &str = "pa";

/// The owner's credentials no list named (the issue's "Why"), relative to the owner's
/// home, each holding [`SECRET`].
pub const OWNER_SECRETS: [&str; 9] = [
    ".npmrc",
    ".cargo/credentials.toml",
    ".config/gh/hosts.yml",
    ".pgpass",
    ".pypirc",
    ".vault-token",
    ".bash_history",
    ".zz-unknown/secret",
    ".ssh/id_ed25519",
];

/// Whether `sqlite3` is here (the `sq` pack wraps it); says `skipped:` when not.
pub fn sqlite3_or_skip() -> bool {
    if Path::new("/usr/bin/sqlite3").exists() {
        return true;
    }
    common::skip::skip("no sqlite3 (`apt-get install -y sqlite3`)");
    false
}

/// The `sq` pack of the issue: `sqlite3 :memory: {{query}}`; for each land `L` a verb
/// `L.read` (`read`) and `L.write` (`write`).
pub fn sq_pack(w: &World) -> PathBuf {
    let dir = w.root().join("src/sq");
    std::fs::create_dir_all(&dir).unwrap();
    let cli = r#"["sqlite3", ":memory:", "{{query}}"]"#;
    let mut verbs = Vec::new();
    let mut rows = Vec::new();
    for land in LANDS {
        for op in ["read", "write"] {
            verbs.push(format!(
                r#""{land}.{op}": {{"description": "Run SQL ({op}, {land} land).", "cli": {cli}}}"#
            ));
            rows.push(format!(
                r#""{land}.{op}": {{"operation": "{op}", "privacy": {{"land": "{land}"}}}}"#
            ));
        }
    }
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "sq", "name": "SQL", "kind": "wrap", "cliBin": "sqlite3",
  "transports": ["cli", "json_exec"], "binding": {{"mode": "public"}},
  "wrap": {{"bin": "sqlite3"}}, "verbs": {{ {} }} }}"#,
            verbs.join(",\n")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        format!(
            r#"{{"surface_id": "sq", "version": 1, "stimuli": {{}}, "verbs": {{ {} }} }}"#,
            rows.join(",\n")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# HCP — SQL\n\nsqlite3 on an in-memory database.\n\n## Hot path\n\n\
         | Command | CLI |\n|---------|-----|\n| `personal.read` | `sqlite3 :memory: SQL` |\n\n\
         ## Anti-patterns\n\n- Dot commands\n",
    )
    .unwrap();
    dir
}

/// A view world: the confinement world of `user` with the `sq` and `hostile` packs, the
/// owner's credentials planted, other stores beside, a `reader` session holding only
/// `verb.exec.read` and a `writer` session holding `verb.exec.write` too, both members
/// of [`PROJECT`].
pub struct Vw {
    pub cw: Cw,
    pub reader: String,
    pub writer: String,
}

impl Vw {
    pub fn new(user: As) -> Self {
        let cw = Cw::new(user, &["hostile"]);
        let sq = sq_pack(&cw.w);
        cw.own(&cw.w.root());
        let out = cw.run(&["install", "--activate", &sq.display().to_string()]);
        assert!(out.status.success(), "install sq:\n{}", cw.w.render(&out));
        plant_owner_secrets(&cw);
        let reader = cw.session("agent-r", &["--project", PROJECT]);
        let writer = cw.session("agent-w", &["--project", PROJECT]);
        for p in ["sq", "hostile"] {
            cw.grant("agent-r", p, &["verb.exec.read"]);
            cw.grant("agent-w", p, &["verb.exec.read", "verb.exec.write"]);
        }
        Self { cw, reader, writer }
    }

    pub fn w(&self) -> &World {
        &self.cw.w
    }

    /// `sq.VERB` with `.shell CMD` (run by `/bin/sh -c`), as `token`'s principal.
    pub fn shell(&self, token: Option<&str>, verb: &str, cmd: &str) -> (Output, Value) {
        let sql = format!(".shell {cmd}");
        self.cw
            .exec(token, &[&format!("sq.{verb}"), "--query", &sql])
    }

    /// The stdout of [`shell`](Self::shell), which must be a run (not a refusal).
    pub fn sh(&self, token: Option<&str>, verb: &str, cmd: &str) -> String {
        let (out, v) = self.shell(token, verb, cmd);
        assert!(
            v["code"].is_null() || v["exit_code"].is_number(),
            "`{cmd}` in sq.{verb} did not run: {}",
            self.cw.w.render(&out)
        );
        v["stdout"].as_str().unwrap_or_default().to_owned()
    }

    /// The hostile probe `try WHAT ARGS…` in `land`, as `token`'s principal.
    pub fn probe(&self, token: Option<&str>, land: &str, what: &[&str]) -> Value {
        let verb = format!("hostile.{land}.try");
        let mut args = vec![verb.as_str()];
        args.extend_from_slice(what);
        self.cw.exec(token, &args).1
    }

    /// Where the owner's default store is for this world (`HOME`'s platform directory).
    pub fn default_store(&self) -> PathBuf {
        self.cw.w.home.join(".local/share/hcp")
    }

    /// Another store on the machine.
    pub fn other_store(&self) -> PathBuf {
        self.cw.w.root().join("other-store")
    }
}

/// Plants [`OWNER_SECRETS`] in the owner's home, the default store's and another store's
/// credentials and keys, and a secret at a path no list names (`srv/x/secret`), all owned
/// by the world's user.
pub fn plant_owner_secrets(cw: &Cw) {
    let w = &cw.w;
    let mut files: Vec<PathBuf> = OWNER_SECRETS.iter().map(|f| w.home.join(f)).collect();
    for store in [
        w.home.join(".local/share/hcp"),
        w.root().join("other-store"),
    ] {
        for f in [
            "state/bindings/agent-9/mail.json",
            "audit/digest.secret",
            "audit/checkpoint.key",
            "homes/mail/principal/agent-9/Maildir/new/1",
        ] {
            files.push(store.join(f));
        }
    }
    files.push(w.root().join("srv/x/secret"));
    files.push(w.root().join("srv/x/server.key"));
    for f in &files {
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, SECRET).unwrap();
    }
    cw.own(&w.root());
}

/// Every file and directory under `roots` with its content (files) or its kind: compared
/// before and after a probe to show that nothing outside the call changed.
pub fn tree(roots: &[&Path]) -> BTreeMap<PathBuf, String> {
    fn walk(p: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return;
        };
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            out.insert(p.to_owned(), format!("dir {mode:o}"));
            if let Ok(rd) = std::fs::read_dir(p) {
                for e in rd.flatten() {
                    walk(&e.path(), out);
                }
            }
        } else if meta.is_file() {
            let bytes = std::fs::read(p).unwrap_or_default();
            out.insert(
                p.to_owned(),
                format!("file {mode:o} {}", String::from_utf8_lossy(&bytes)),
            );
        } else {
            out.insert(p.to_owned(), format!("other {mode:o}"));
        }
    }
    let mut out = BTreeMap::new();
    for r in roots {
        walk(r, &mut out);
    }
    out
}

/// What lies outside every call of `vw`: the owner's home, the other stores, the
/// secrets beside them, the grants and the sessions.
pub fn outside(vw: &Vw) -> (BTreeMap<PathBuf, String>, String, String) {
    let w = vw.w();
    let srv = w.root().join("srv");
    let other = vw.other_store();
    let t = tree(&[&w.home, &other, &srv]);
    let sessions = vw.cw.run(&["session", "list", "--json"]);
    (
        t,
        vw.cw.grants(),
        String::from_utf8_lossy(&sessions.stdout).into_owned(),
    )
}

/// Asserts that `text` (a child's output, a result) holds no planted secret.
pub fn assert_no_secret(text: &str, what: &str) {
    assert!(
        !text.contains(SECRET),
        "{what}: a secret came through:\n{text}"
    );
}

/// The verb of `land` and `op` (`read`/`write`) of the `sq` pack.
pub fn verb(land: &str, op: &str) -> String {
    format!("{land}.{op}")
}

/// The mount points of a `/proc/self/mountinfo` text (its fifth field).
pub fn mount_points(mountinfo: &str) -> Vec<String> {
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| p.replace("\\040", " "))
        .collect()
}

/// `HCP_TEST_CGROUP` (set by `.ci/view-setup`): a cgroup delegated to `nobody` for the
/// memory bound, put in `limits.cgroup` for the ordinary user's calls.
pub fn delegated_cgroup() -> Option<PathBuf> {
    std::env::var_os("HCP_TEST_CGROUP")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
