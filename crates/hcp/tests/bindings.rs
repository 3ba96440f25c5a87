//! Bindings through the built `hcp` (RUNTIME §5 step 8, §8): `hcp connect` and `hcp
//! disconnect`, binding mint at exec, `binding.degraded`, the control plane, and the
//! full flow of the `mail` gold pack with `hcp sense`.
//!
//! Never sleeps to synchronise: the sense child is read with bounded waits on lines it
//! prints (the mail watcher says `watching the inbox of P` once it has listed the inbox).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a bounded wait may take before the test fails (never a synchronisation).
const BOUND: Duration = Duration::from_secs(60);

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn json_out(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("not JSON: {}", text(o)))
}

/// Filters for what changes from run to run.
macro_rules! snapshot {
    ($w:expr, $name:expr, $out:expr) => {
        insta::with_settings!({filters => vec![
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TS]"),
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[UUID]"),
            (r#""duration_ms":\d+"#, r#""duration_ms":[MS]"#),
        ]}, {
            insta::assert_snapshot!($name, $w.render($out));
        });
    };
}

/// A world with the `mail` gold pack installed and active.
fn mail_world() -> World {
    common::example_bins();
    let w = World::new();
    let o = w.run(&[
        "install",
        common::gold_pack("mail").to_str().unwrap(),
        "--activate",
    ]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    w.grant_mail_root();
    w
}

fn session(w: &World, principal: &str) -> String {
    let o = w.run(&["session", "start", "--principal", principal]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    String::from_utf8(o.stdout).unwrap().trim().to_owned()
}

fn grant(w: &World, principal: &str, pack: &str, caps: &[&str]) {
    let mut args = vec!["grant", principal, pack];
    args.extend_from_slice(caps);
    let o = w.run(&args);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

/// `hcp ARGS` as the principal of `token` (the owner when `None`).
fn run_as(w: &World, token: Option<&str>, args: &[&str]) -> Output {
    let mut c = w.hcp();
    if let Some(t) = token {
        c.env("HCP_SESSION", t);
    }
    c.args(args).output().unwrap()
}

fn binding_file(w: &World, principal: &str, family: &str) -> PathBuf {
    w.hcp_home
        .join("state/bindings")
        .join(principal)
        .join(format!("{family}.json"))
}

/// The token the mail CLI mints for `principal`, straight from the example bin.
fn mail_token(principal: &str) -> String {
    let o = Command::new(common::bin_dir().join("hcp-example-mail"))
        .args(["connect", "--principal", principal])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["token"].as_str().unwrap().to_owned()
}

/// Where the owner's `personal` call of pack `pack` reads a file it is given by name: its
/// tenant home, `/home/hcp` in its view (RUNTIME §5.2). Returns the host path (to write)
/// and the path in the view (to pass).
fn in_owners_home(w: &World, pack: &str, name: &str) -> (PathBuf, String) {
    let home = w.hcp_home.join("homes").join(pack).join("principal/owner");
    std::fs::create_dir_all(&home).unwrap();
    (home.join(name), format!("/home/hcp/{name}"))
}

fn audit_text(w: &World) -> String {
    std::fs::read_to_string(w.hcp_home.join("audit/audit.jsonl")).unwrap_or_default()
}

fn audit_records(w: &World) -> Vec<Value> {
    audit_text(w)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A running `hcp sense …` with its lines on channels.
struct Sensing {
    child: Child,
    out: mpsc::Receiver<String>,
    err: mpsc::Receiver<String>,
}

fn lines_of(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn sense(w: &World, token: Option<&str>, args: &[&str]) -> Sensing {
    let mut c = Command::new(common::hcp_bin());
    c.env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(&w.work)
        .arg("sense")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(t) = token {
        c.env("HCP_SESSION", t);
    }
    let mut child = c.spawn().unwrap();
    let out = lines_of(child.stdout.take().unwrap());
    let err = lines_of(child.stderr.take().unwrap());
    Sensing { child, out, err }
}

impl Sensing {
    /// Waits (bounded) for a stderr line containing `what`.
    fn wait_err(&self, what: &str) {
        loop {
            let l = self
                .err
                .recv_timeout(BOUND)
                .unwrap_or_else(|_| panic!("no stderr line with `{what}`"));
            if l.contains(what) {
                return;
            }
        }
    }

    fn next_event(&self) -> Value {
        let l = self.out.recv_timeout(BOUND).expect("no event line");
        serde_json::from_str(&l).unwrap()
    }

    /// SIGTERM, then the exit status.
    fn stop(mut self) -> i32 {
        let pid = self.child.id().to_string();
        let k = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(k.success());
        self.child.wait().unwrap().code().unwrap_or(-1)
    }
}

/// Processes whose environment has `HCP_PRINCIPAL_ID=<principal>` and whose argv holds
/// `word`.
fn live_with(principal: &str, word: &str) -> Vec<u32> {
    let want = format!("HCP_PRINCIPAL_ID={principal}");
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let (Ok(env), Ok(cmd)) = (
            std::fs::read(e.path().join("environ")),
            std::fs::read(e.path().join("cmdline")),
        ) else {
            continue;
        };
        let has_home = env.split(|b| *b == 0).any(|v| v == want.as_bytes());
        let has_word = cmd.split(|b| *b == 0).any(|v| v == word.as_bytes());
        let state = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = state
            .rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
        if has_home && has_word && !zombie {
            out.push(pid);
        }
    }
    out
}

#[test]
fn the_full_mail_flow() {
    let w = mail_world();
    let mut outputs: Vec<Output> = Vec::new();
    let alice = session(&w, "alice");
    grant(
        &w,
        "alice",
        "mail",
        &[
            "verb.exec.read",
            "verb.exec.write",
            "pack.connect",
            "sense.enable",
        ],
    );
    let a = Some(alice.as_str());

    // connect: the credential is stored 0600 for alice and family `mail`, never shown
    let o = run_as(&w, a, &["connect", "mail"]);
    snapshot!(w, "flow_connect", &o);
    let file = binding_file(&w, "alice", "mail");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    outputs.push(o);
    let o = run_as(&w, a, &["connect", "mail", "--json"]);
    let v = json_out(&o);
    assert_eq!(v["ok"], true);
    assert_eq!(v["binding"]["family"], "mail");
    assert_eq!(v["binding"]["principal"], "alice");
    assert!(v.get("stdout").is_none() && v["data"].is_null(), "{v}");
    outputs.push(o);

    // the connect verb is not an ordinary verb for a session: its stdout is the credential
    let o = run_as(&w, a, &["exec", "mail.connect", "--json"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert_eq!(json_out(&o)["code"], "connect_only");
    outputs.push(o);

    // list: alice's inbox is empty
    let o = run_as(&w, a, &["exec", "mail.list", "--json"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(json_out(&o)["data"]["messages"], json!([]));
    outputs.push(o);

    // send without confirm: refused before binding mint
    let o = run_as(
        &w,
        a,
        &[
            "exec",
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "hi",
            "--body",
            "hello",
        ],
    );
    snapshot!(w, "flow_send_unconfirmed", &o);
    outputs.push(o);

    // send with confirm: the CLI accepts alice's token (HCP_BINDING_TOKEN)
    let o = run_as(
        &w,
        a,
        &[
            "exec",
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "hi",
            "--body",
            "hello",
            "--confirm",
            "--json",
        ],
    );
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let v = json_out(&o);
    assert_eq!(
        (v["ok"].clone(), v["data"]["to"].clone()),
        (json!(true), json!("bob"))
    );
    outputs.push(o);

    // a message delivered to alice arrives through `hcp sense` as a `new_item` event; her
    // mail lives in her tenant home (RUNTIME §5.2), where the delivery puts it
    let s = sense(&w, a, &["mail", "new_item"]);
    s.wait_err("watching the inbox of alice");
    let o = Command::new(common::bin_dir().join("hcp-example-mail"))
        .env("HOME", w.hcp_home.join("homes/mail/principal/alice"))
        .args([
            "deliver",
            "--to",
            "alice",
            "--from",
            "carol",
            "--subject",
            "lunch?",
            "--body",
            "at noon",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let ev = s.next_event();
    assert_eq!(
        (
            &ev["pack_id"],
            &ev["ref"],
            &ev["event"]["from"],
            &ev["event"]["subject"]
        ),
        (
            &json!("mail"),
            &json!("new_item"),
            &json!("carol"),
            &json!("lunch?")
        )
    );
    assert_eq!(ev["event"]["principal"], "alice");
    assert_eq!(s.stop(), 0);
    // the watcher went with it
    assert_eq!(live_with("alice", "watch"), Vec::<u32>::new());

    // disconnect, then send: binding_required, and `binding.degraded` is recorded
    let o = run_as(&w, a, &["disconnect", "mail"]);
    snapshot!(w, "flow_disconnect", &o);
    assert!(!file.exists());
    outputs.push(o);
    let o = run_as(
        &w,
        a,
        &[
            "exec",
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "hi",
            "--body",
            "again",
            "--confirm",
        ],
    );
    snapshot!(w, "flow_send_unbound", &o);
    outputs.push(o);
    let o = run_as(
        &w,
        a,
        &["sense", "mail", "binding.degraded", "--count", "1"],
    );
    snapshot!(w, "flow_degraded_event", &o);
    outputs.push(o);

    // the credential is nowhere: audit, any file of the store, any output
    let token = mail_token("alice");
    for o in &outputs {
        assert!(!text(o).contains(&token), "{}", text(o));
    }
    for f in files_under(&w.hcp_home) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&token),
            "the credential is in `{}`",
            f.display()
        );
    }
    assert!(!audit_text(&w).contains(&token));
    let o = w.run(&["audit", "verify"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

#[test]
fn connect_and_exec_in_text_mode_never_show_the_credential() {
    let w = mail_world();
    let token = mail_token("owner");
    let mut all = String::new();
    for args in [
        &["connect", "mail"][..],
        &["connect", "mail", "--json"],
        &[
            "exec",
            "mail.send",
            "--to",
            "bob",
            "--subject",
            "s",
            "--body",
            "b",
            "--confirm",
            "--json",
        ],
        &["exec", "mail.list", "--json"],
        &["audit", "tail", "-n", "20", "--json"],
        &["disconnect", "mail", "--json"],
    ] {
        let o = w.run(args);
        assert_eq!(code(&o), 0, "{args:?}: {}", w.render(&o));
        all.push_str(&text(&o));
    }
    assert!(!all.contains(&token), "{all}");
    assert!(!audit_text(&w).contains(&token));
}

#[test]
fn connect_needs_pack_connect() {
    let w = mail_world();
    let t = session(&w, "agent");
    grant(&w, "agent", "mail", &["verb.exec.read", "verb.exec.write"]);
    let o = run_as(&w, Some(&t), &["connect", "mail"]);
    snapshot!(w, "connect_without_pack_connect", &o);
    assert!(!binding_file(&w, "agent", "mail").exists());
    let o = run_as(&w, Some(&t), &["disconnect", "mail"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("`pack.connect`"));
    // a bad session is refused, never the owner
    let o = run_as(&w, Some("hcps_nope"), &["connect", "mail"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("bad_session"));
    assert!(!binding_file(&w, "owner", "mail").exists());
}

#[test]
fn connect_refuses_packs_without_user_binding() {
    common::example_bins();
    let w = World::new();
    let o = w.run(&[
        "install",
        common::gold_pack("transit").to_str().unwrap(),
        "--activate",
    ]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["connect", "transit"]);
    snapshot!(w, "connect_public_pack", &o);
    let o = w.run(&["connect", "nosuch"]);
    assert_eq!(code(&o), 66, "{}", w.render(&o));
}

/// A `user` pack whose connect verb prints the file it is given (`probe read PATH`), so a
/// test controls exactly what the "credential" is. `confirm` sets the connect verb's
/// confirm; `family` its binding family.
fn probe_pack(w: &World, id: &str, confirm: bool, family: Option<&str>) -> PathBuf {
    let dir = w.root().join("src").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let binding = match family {
        Some(f) => json!({"mode": "user", "family": f}),
        None => json!({"mode": "user"}),
    };
    let surface = json!({
        "id": id, "name": "Probe binding", "kind": "wrap", "cliBin": "probe",
        "binding": binding,
        "wrap": {"bin": "hcp-example-probe"},
        "verbs": {
            "connect": {"description": "Print a file as the credential.", "cli": ["probe", "read", "{{path}}"]},
            "env": {"description": "Show the environment.", "cli": ["probe", "env"]},
        }
    });
    let mut connect = json!({"operation": "write", "privacy": {"land": "personal"}});
    if confirm {
        connect["confirm"] = json!(true);
    }
    let policy = json!({
        "surface_id": id, "version": 1,
        "verbs": {
            "connect": connect,
            "env": {"operation": "read", "privacy": {"land": "personal"}},
        },
        "stimuli": {}
    });
    std::fs::write(dir.join("surface.json"), surface.to_string()).unwrap();
    std::fs::write(dir.join("policy.json"), policy.to_string()).unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# Probe binding\n\nA test pack.\n\n## Hot path\n\n| Command | CLI |\n|---|---|\n| `env` | `probe env` |\n\n## Anti-patterns\n\n- None\n",
    )
    .unwrap();
    let o = w.run(&["install", dir.to_str().unwrap(), "--activate"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    dir
}

#[test]
fn connect_refuses_bad_output_and_stores_nothing() {
    common::example_bins();
    let w = World::new();
    probe_pack(&w, "probe-bind", false, None);
    let secretish = "s3cr3t-value-never-echoed";
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("not_json", format!("token={secretish}\n").into_bytes()),
        ("empty", Vec::new()),
        ("array", format!("[\"{secretish}\"]").into_bytes()),
        (
            "two_objects",
            format!("{{\"token\":\"{secretish}\"}}{{}}").into_bytes(),
        ),
        ("no_strings", b"{\"n\": 1}".to_vec()),
        ("huge", {
            let mut v = b"{\"token\":\"".to_vec();
            v.extend(std::iter::repeat_n(b'x', 70 * 1024));
            v.extend(b"\"}");
            v
        }),
        (
            "expired",
            format!("{{\"token\":\"{secretish}\",\"expires_at\":\"2020-01-01T00:00:00Z\"}}")
                .into_bytes(),
        ),
        (
            "bad_expiry",
            format!("{{\"token\":\"{secretish}\",\"expires_at\":\"soon\"}}").into_bytes(),
        ),
    ];
    for (name, bytes) in cases {
        let (host, path) = in_owners_home(&w, "probe-bind", &format!("{name}.out"));
        std::fs::write(&host, &bytes).unwrap();
        let o = w.run(&["connect", "probe-bind", "--path", &path]);
        assert_eq!(code(&o), 65, "{name}: {}", w.render(&o));
        assert!(text(&o).contains("connect_output_invalid"), "{name}");
        assert!(!text(&o).contains(secretish), "{name}: {}", text(&o));
        assert!(!binding_file(&w, "owner", "probe-bind").exists(), "{name}");
        let o = w.run(&["connect", "probe-bind", "--path", &path, "--json"]);
        let v = json_out(&o);
        assert_eq!(v["code"], "connect_output_invalid", "{name}");
        assert!(v.get("stdout").is_none() && v["data"].is_null());
        assert!(!text(&o).contains(secretish), "{name}");
    }
    let (_, path) = in_owners_home(&w, "probe-bind", "not_json.out");
    let o = w.run(&["connect", "probe-bind", "--path", &path]);
    snapshot!(w, "connect_not_json", &o);
    // the connect verb failing is not a credential either
    let o = w.run(&["connect", "probe-bind", "--path", "missing-file"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(text(&o).contains("connect_failed"));
    assert!(!binding_file(&w, "owner", "probe-bind").exists());
    // audited as refused, with the digest of the arguments only
    let refused: Vec<Value> = audit_records(&w)
        .into_iter()
        .filter(|r| r["code"] == "connect_output_invalid")
        .collect();
    assert_eq!(refused.len(), 17);
    assert!(
        refused
            .iter()
            .all(|r| r["binding"] == "refused" && r["decision"] == "deny")
    );
    assert!(!audit_text(&w).contains(secretish));
    assert!(!audit_text(&w).contains("not_json.out"));
}

#[test]
fn a_good_credential_reaches_the_child_as_variables_only() {
    common::example_bins();
    let w = World::new();
    probe_pack(&w, "probe-bind", true, None);
    let (host, path) = in_owners_home(&w, "probe-bind", "cred.json");
    std::fs::write(
        &host,
        r#"{"token": "tok-123456", "user-name": "me", "n": 3}"#,
    )
    .unwrap();
    let path = std::path::PathBuf::from(path);
    // the connect verb's policy asks for confirm
    let o = w.run(&["connect", "probe-bind", "--path", path.to_str().unwrap()]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("confirm_required"));
    assert!(!binding_file(&w, "owner", "probe-bind").exists());
    let o = w.run(&[
        "connect",
        "probe-bind",
        "--path",
        path.to_str().unwrap(),
        "--confirm",
    ]);
    snapshot!(w, "connect_confirmed", &o);
    let (o, v) = {
        let o = w.run(&["exec", "probe-bind.env", "--json"]);
        let v = json_out(&o);
        (o, v)
    };
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let env = &v["data"];
    // The child had the token (the variable is set, and to exactly the credential's
    // value: that is what is redacted), and the caller's result does not carry it.
    assert_eq!(env["HCP_BINDING_TOKEN"], "[redacted]");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("tok-123456"));
    // Values shorter than 4 bytes are not redacted (they would mangle ordinary output).
    assert_eq!(env["HCP_BINDING_USER_NAME"], "me");
    assert!(env.get("HCP_BINDING_N").is_none());
}

#[test]
fn insecure_expired_and_foreign_bindings_are_refused() {
    let w = mail_world();
    // wider than 0600: refused at exec, and recorded as degraded
    let o = w.run(&["connect", "mail"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let file = binding_file(&w, "owner", "mail");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let send = [
        "exec",
        "mail.send",
        "--to",
        "bob",
        "--subject",
        "s",
        "--body",
        "b",
        "--confirm",
    ];
    let o = w.run(&send);
    snapshot!(w, "exec_binding_insecure", &o);

    // expired: a stored credential whose `expires_at` passed
    let home = hcp_store::Home::open(&w.hcp_home).unwrap();
    let secret = json!({"token": mail_token("owner"), "expires_at": "2020-01-01T00:00:00Z"});
    hcp_store::binding::save(
        &home,
        &hcp_store::StoreLock::acquire(&home).unwrap(),
        "owner",
        "mail",
        secret.as_object().unwrap().clone(),
        jiff::Timestamp::now(),
    )
    .unwrap();
    let o = w.run(&send);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("binding_required") && text(&o).contains("expired"));

    // principal B never gets principal A's credential
    hcp_store::binding::remove(
        &home,
        &hcp_store::StoreLock::acquire(&home).unwrap(),
        "owner",
        "mail",
    )
    .unwrap();
    let ta = session(&w, "alice");
    let tb = session(&w, "bob");
    for p in ["alice", "bob"] {
        grant(
            &w,
            p,
            "mail",
            &["verb.exec.write", "pack.connect", "sense.enable"],
        );
    }
    let o = run_as(&w, Some(&ta), &["connect", "mail"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = run_as(&w, Some(&tb), &send);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("principal `bob` has no binding for `mail`"));
    let o = run_as(&w, Some(&tb), &["sense", "mail", "new_item"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("binding_required"));
    let o = run_as(&w, Some(&ta), &send);
    assert_eq!(code(&o), 0, "{}", w.render(&o));

    // what was recorded: owner insecure then expired; bob missing
    let o = w.run(&["sense", "mail", "binding.degraded", "--count", "2"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let events: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["event"]["reason"].clone())
        .collect();
    assert_eq!(events, vec![json!("insecure"), json!("expired")]);
    let o = run_as(
        &w,
        Some(&tb),
        &["sense", "mail", "binding.degraded", "--count", "1"],
    );
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["event"]["reason"], "missing");
}

#[test]
fn packs_of_one_family_share_one_login() {
    let w = mail_world();
    // a second pack of family `mail`
    let dir = w.copy_pack("mail");
    let other = w.root().join("src").join("mail-work");
    std::fs::rename(&dir, &other).unwrap();
    let s = std::fs::read_to_string(other.join("surface.json"))
        .unwrap()
        .replace(r#""id": "mail""#, r#""id": "mail-work""#)
        .replace(
            r#""binding": { "mode": "user" }"#,
            r#""binding": { "mode": "user", "family": "mail" }"#,
        );
    std::fs::write(other.join("surface.json"), s).unwrap();
    let p = std::fs::read_to_string(other.join("policy.json"))
        .unwrap()
        .replace(r#""surface_id": "mail""#, r#""surface_id": "mail-work""#);
    std::fs::write(other.join("policy.json"), p).unwrap();
    // Joining the family of the installed `mail` is the owner's decision (RUNTIME §8).
    let o = w.run(&["install", other.to_str().unwrap(), "--activate"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("family_claimed"));
    let o = w.run(&[
        "install",
        other.to_str().unwrap(),
        "--activate",
        "--join-family",
        "mail",
    ]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["connect", "mail-work"]);
    snapshot!(w, "connect_family", &o);
    let o = w.run(&[
        "exec",
        "mail.mail.send",
        "--to",
        "bob",
        "--subject",
        "s",
        "--body",
        "b",
        "--confirm",
    ]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["disconnect", "mail"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&[
        "exec",
        "mail-work.mail.send",
        "--to",
        "bob",
        "--subject",
        "s",
        "--body",
        "b",
        "--confirm",
    ]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
}

/// A control-plane pack (binding `mothership`).
fn control_pack(w: &World) -> PathBuf {
    let dir = w.root().join("src").join("fleet");
    std::fs::create_dir_all(&dir).unwrap();
    let surface = json!({
        "id": "fleet", "name": "Fleet admin", "kind": "wrap", "cliBin": "probe",
        "plane": "control", "binding": {"mode": "mothership"},
        "wrap": {"bin": "hcp-example-probe"},
        "verbs": {"status": {"description": "Where it runs.", "cli": ["probe", "cwd"]}}
    });
    let policy = json!({
        "surface_id": "fleet", "version": 1,
        "verbs": {"status": {"operation": "read", "privacy": {"land": "personal"}}},
        "stimuli": {}
    });
    std::fs::write(dir.join("surface.json"), surface.to_string()).unwrap();
    std::fs::write(dir.join("policy.json"), policy.to_string()).unwrap();
    std::fs::write(
        dir.join("HARNESS.md"),
        "# Fleet\n\nAdmin.\n\n## Hot path\n\n| Command | CLI |\n|---|---|\n| `status` | `probe cwd` |\n\n## Anti-patterns\n\n- None\n",
    )
    .unwrap();
    dir
}

#[test]
fn control_plane_packs_are_the_owners() {
    common::example_bins();
    let w = World::with_store();
    let dir = control_pack(&w);
    let t = session(&w, "agent");
    // a session may not install, activate or uninstall
    let o = run_as(
        &w,
        Some(&t),
        &["install", dir.to_str().unwrap(), "--activate"],
    );
    snapshot!(w, "control_install_from_session", &o);
    assert!(!w.hcp_home.join("packs/fleet").exists());
    let o = w.run(&["install", dir.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = run_as(&w, Some(&t), &["activate", "fleet"]);
    snapshot!(w, "control_activate_from_session", &o);
    assert!(!w.hcp_home.join("skills/fleet").exists());
    let o = run_as(&w, Some(&t), &["uninstall", "fleet"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    // the owner activates; a session is still refused, even with grants
    let o = w.run(&["activate", "fleet"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = run_as(&w, Some(&t), &["deactivate", "fleet"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    grant(&w, "agent", "fleet", &["verb.exec.read"]);
    let o = run_as(&w, Some(&t), &["exec", "fleet.status"]);
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(text(&o).contains("control_plane"));
    let o = w.run(&["exec", "fleet.status"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    // `mothership` outside the control plane does not install
    let s = std::fs::read_to_string(dir.join("surface.json"))
        .unwrap()
        .replace(r#""plane":"control","#, "");
    std::fs::write(dir.join("surface.json"), s).unwrap();
    let o = w.run(&["install", dir.to_str().unwrap(), "--force"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(text(&o).contains("bad_binding"));
}

#[test]
fn doctor_reports_a_credential_file_wider_than_0600() {
    use std::os::unix::fs::PermissionsExt;
    let w = mail_world();
    let o = w.run(&["connect", "mail"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let o = w.run(&["doctor", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["bindings"][0]["secure"], true, "{v}");
    let f = binding_file(&w, "owner", "mail");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = w.run(&["doctor"]);
    assert_ne!(code(&o), 0, "{}", w.render(&o));
    let t = text(&o);
    assert!(
        t.contains("has mode 644") && t.contains("binding_insecure"),
        "{t}"
    );
    // never the value
    assert!(!t.contains("mailtok-"), "{t}");
}
