//! A fleet of machines on one PostgreSQL (RUNTIME §9), end to end through the built `hcp`:
//! two machines (two `$HCP_HOME`s whose `config.json` name one database) share sessions,
//! grants, approvals, exact counters and the audit (one chain per machine); a database
//! that goes away, refuses the credentials or lags a schema version answers
//! `state_unavailable` (74) and leaves every chain sound; a record edited by hand is
//! named by `hcp audit verify`.
//!
//! Against the server of `.ci/pg-start` (`HCP_TEST_PG_URL`; machine B goes through its
//! pooler when `HCP_TEST_PG_POOL_URL` is set) and private servers for the tests that stop
//! or reconfigure one. Without a server every test says `skipped:`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod confine_common;
mod exec_common;
mod fleet_support;
mod mcp_common;

use fleet_support::{Machine, Server, count_kind, fleet, parallel, pool_url, psql, tally, url};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const LIMITS: &str = "schema_version: histos.policy/0.1
tools:
  polprobe.count:
    args:
      value: {type: string}
    rate_limit: 50
    budget: 80
roles:
  agent:
    allow: [polprobe.count]
";

const CONFIRM: &str = "schema_version: histos.policy/0.1
tools:
  polprobe.wire:
    access: write
    args:
      to: {type: string}
      amount: {type: string}
    confirmation:
      required: true
      expires_in: 300
roles:
  clerk:
    allow: [polprobe.wire]
";

/// Machine A's URL (direct) and machine B's (through the pooler when there is one).
fn urls() -> Option<(String, String)> {
    let direct = url()?;
    let b = pool_url().unwrap_or_else(|| direct.clone());
    Some((direct, b))
}

fn session(m: &Machine, principal: &str, role: &str) -> String {
    let out = m.ok(&["session", "start", "--principal", principal, "--role", role]);
    out.trim().to_owned()
}

fn key(status: i32, code: Option<&str>) -> (i32, Option<String>) {
    (status, code.map(str::to_owned))
}

#[test]
fn two_machines_by_four_processes_admit_exactly_50_in_the_window_and_80_over_the_budget() {
    let Some((ua, ub)) = urls() else { return };
    let (schema, ms) = fleet("limits", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    for m in &ms {
        m.policy(LIMITS);
    }
    // A session and a grant made on A hold on B.
    let token = session(a, "agent", "agent");
    a.ok(&["grant", "agent", "polprobe", "verb.exec.read"]);
    let call = |w: usize, i: usize| {
        ["polprobe.count", "--value", &format!("w{w}c{i}")]
            .map(str::to_owned)
            .to_vec()
    };
    // 2 machines × 4 processes × 10 calls inside one window: exactly 50.
    let first = parallel(&[a, b], 4, 10, &token, &call);
    let t = tally(&first);
    assert_eq!(
        t,
        BTreeMap::from([(key(0, None), 50), (key(77, Some("rate_limit")), 30)]),
        "{first:?}"
    );
    // The window rolls (the slots' times aged by the operator's SQL, as a minute would):
    // the budget's 30 left, then `budget`, across both machines.
    psql(
        &ua,
        &format!(
            "UPDATE {schema}.counters SET recent = \
             (SELECT coalesce(array_agg(x - 61000), '{{}}') FROM unnest(recent) x)"
        ),
    );
    let second = parallel(&[a, b], 4, 10, &token, &call);
    let t = tally(&second);
    assert_eq!(
        t,
        BTreeMap::from([(key(0, None), 30), (key(77, Some("budget")), 50)]),
        "{second:?}"
    );
    let by_machine = |m: &str| {
        first
            .iter()
            .chain(&second)
            .filter(|x| x.machine == m && x.status == 0)
            .count()
    };
    eprintln!(
        "admitted: a (direct) {}, b ({}) {}",
        by_machine("a"),
        if pool_url().is_some() {
            "pooler"
        } else {
            "direct"
        },
        by_machine("b")
    );
    // Every admitted call has its intent (and outcome); every refusal its record.
    assert_eq!(count_kind(&ua, &schema, "intent"), 80);
    assert_eq!(count_kind(&ua, &schema, "outcome"), 80);
    assert_eq!(count_kind(&ua, &schema, "refusal"), 80);
    let v = b.assert_sound();
    // The calls' 240 records, and the acts of authority (installs, grant, session,
    // the policy and config each machine recorded).
    let acts = count_kind(&ua, &schema, "authority");
    assert_eq!(v["records"], json!(240 + acts), "{v}");
}

#[test]
fn an_approval_given_once_and_the_call_made_from_both_machines_at_once_runs_once() {
    let Some((ua, ub)) = urls() else { return };
    let (_schema, ms) = fleet("approve", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    for m in &ms {
        m.policy(CONFIRM);
    }
    let token = session(a, "agent", "clerk");
    a.ok(&["grant", "agent", "polprobe", "verb.exec.write"]);
    let wire = ["polprobe.wire", "--to", "bob", "--amount", "5", "--confirm"];
    // Paused on A, the same call pauses on B with the same request.
    let (s, v) = a.exec(Some(&token), &wire);
    assert_eq!(
        (s, v["code"].as_str()),
        (77, Some("requires_confirmation")),
        "{v}"
    );
    let id = v["approval_id"].as_str().unwrap().to_owned();
    let (_, v) = b.exec(Some(&token), &wire);
    assert_eq!(v["approval_id"], json!(id), "{v}");
    // The owner approves on B; A's listing shows it approved.
    b.ok(&["approve", &id]);
    let listed: Vec<Value> =
        serde_json::from_str(&a.ok(&["approvals", "--all", "--json"])).unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["state"], json!("approved"), "{listed:?}");
    // Two processes on each machine make the call at once: exactly one runs.
    let call = |_: usize, _: usize| wire.map(str::to_owned).to_vec();
    let answers = parallel(&[a, b], 2, 1, &token, &call);
    let t = tally(&answers);
    assert_eq!(
        t,
        BTreeMap::from([
            (key(0, None), 1),
            (key(77, Some("requires_confirmation")), 3)
        ]),
        "{answers:?}"
    );
    let listed: Vec<Value> =
        serde_json::from_str(&b.ok(&["approvals", "--all", "--json"])).unwrap();
    let used: Vec<&Value> = listed.iter().filter(|x| x["id"] == json!(id)).collect();
    assert_eq!(used[0]["state"], json!("used"), "{listed:?}");
    a.assert_sound();
}

const ESCALATE: &str = "schema_version: histos.policy/0.1
tools:
  polprobe.argv:
    args:
      value: {type: string}
    escalate:
      required: true
roles:
  r:
    allow: [polprobe.argv]
";

#[test]
fn an_escalation_denied_on_one_machine_is_refused_on_every_machine_and_answered_once() {
    let Some((ua, ub)) = urls() else { return };
    let (schema, ms) = fleet("escalate", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    for (m, u) in [(a, &ua), (b, &ub)] {
        m.policy(ESCALATE);
        let cfg = json!({"state": {"url": u, "schema": schema}, "escalation": "approvals"});
        std::fs::write(m.w.hcp_home.join("config.json"), cfg.to_string()).unwrap();
    }
    let token = session(a, "agent", "r");
    a.ok(&["grant", "agent", "polprobe", "verb.exec.read"]);
    let call = |v: &'static str| ["polprobe.argv", "--value", v];
    // Paused on A as an escalation; the same call on B is the same request.
    let (s, v) = a.exec(Some(&token), &call("x"));
    assert_eq!(
        (s, v["code"].as_str()),
        (77, Some("requires_confirmation")),
        "{v}"
    );
    let id = v["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(b.exec(Some(&token), &call("x")).1["approval_id"], json!(id));
    let listed: Vec<Value> = serde_json::from_str(&a.ok(&["approvals", "--json"])).unwrap();
    assert_eq!(
        (listed.len(), &listed[0]["kind"]),
        (1, &json!("escalation")),
        "{listed:?}"
    );
    // Denied on B: A's call is refused; the answer is given once, on either machine.
    assert!(b.ok(&["deny", &id]).starts_with(&format!("denied `{id}`")));
    let (s, v) = a.exec(Some(&token), &call("x"));
    assert_eq!(
        (s, v["code"].as_str()),
        (77, Some("escalation_denied")),
        "{v}"
    );
    for (m, verb) in [(a, "approve"), (b, "approve"), (a, "deny")] {
        let out = m.run(&[verb, &id]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{verb}: {said}");
        assert!(said.contains("approval_decided"), "{verb}: {said}");
    }
    // Another call: approved on A, it runs once on B.
    let (_, v) = b.exec(Some(&token), &call("y"));
    let other = v["approval_id"].as_str().unwrap().to_owned();
    a.ok(&["approve", &other]);
    assert_eq!(b.exec(Some(&token), &call("y")).0, 0);
    let (s, v) = a.exec(Some(&token), &call("y"));
    assert_eq!(
        (s, v["code"].as_str()),
        (77, Some("requires_confirmation")),
        "{v}"
    );
    assert_ne!(v["approval_id"], json!(other), "{v}");
    a.assert_sound();
}

#[test]
fn a_revoke_on_machine_a_while_machine_b_loops_stops_every_call_started_after_it() {
    let Some((ua, ub)) = urls() else { return };
    let (_schema, ms) = fleet("revoke", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    let token = session(a, "agent", "r");
    a.ok(&["grant", "agent", "polprobe", "verb.exec.read"]);
    let epoch = std::time::Instant::now();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let revoked = std::sync::Mutex::new(None::<std::time::Duration>);
    let answers = std::thread::scope(|s| {
        let looping = s.spawn(|| {
            let mut out = Vec::new();
            let mut after = 0;
            let mut told = false;
            // Loop until 5 calls have started after the revoke committed.
            while after < 5 {
                let started = epoch.elapsed();
                let (status, v) = b.exec(Some(&token), &["polprobe.argv", "--value", "x"]);
                out.push((started, status, v["code"].as_str().map(str::to_owned)));
                if status == 0 && !told {
                    tx.send(()).unwrap();
                    told = true;
                }
                if revoked.lock().unwrap().is_some_and(|t| started > t) {
                    after += 1;
                }
                assert!(
                    out.len() < 500,
                    "the loop on B never saw the revoke: {out:?}"
                );
            }
            out
        });
        // Revoke on A once B has run a call; the revoke has committed when `hcp revoke`
        // exits.
        rx.recv().unwrap();
        a.ok(&["revoke", "agent", "polprobe", "verb.exec.read"]);
        *revoked.lock().unwrap() = Some(epoch.elapsed());
        looping.join().unwrap()
    });
    let t = revoked.lock().unwrap().unwrap();
    let late: Vec<_> = answers.iter().filter(|(s, _, _)| *s > t).collect();
    assert!(late.len() >= 5, "{answers:?}");
    for (_, status, code) in &late {
        assert_eq!(
            (*status, code.as_deref()),
            (77, Some("missing_grant")),
            "a call on B started after the revoke committed: {answers:?}"
        );
    }
    assert!(answers.iter().any(|(_, s, _)| *s == 0), "{answers:?}");
    b.assert_sound();
}

#[test]
fn a_session_ended_on_one_machine_is_refused_on_the_other_and_a_content_change_suspends_grants_everywhere()
 {
    let Some((ua, ub)) = urls() else { return };
    let (_schema, ms) = fleet("session", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    let token = session(a, "agent", "r");
    a.ok(&["grant", "agent", "*", "verb.exec.read"]);
    let argv = ["polprobe.argv", "--value", "x"];
    assert_eq!(b.exec(Some(&token), &argv).0, 0);
    // The list on B shows A's session; ending it on B refuses it on A.
    let listed = b.ok(&["session", "list", "--json"]);
    assert!(listed.contains("\"principal\":\"agent\""), "{listed}");
    let mut end = b.w.hcp();
    end.args(["session", "end", "-"])
        .write_stdin(format!("{token}\n"));
    assert!(end.output().unwrap().status.success());
    let (s, v) = a.exec(Some(&token), &argv);
    assert_eq!((s, v["code"].as_str()), (77, Some("bad_session")), "{v}");
    // A reinstall on A with other content suspends the grant on B too.
    let token = session(a, "agent", "r");
    assert_eq!(b.exec(Some(&token), &argv).0, 0);
    let src = a.w.root().join("polprobe-v2");
    std::fs::create_dir_all(&src).unwrap();
    let from = exec_common::source("polprobe");
    for f in ["surface.json", "policy.json", "HARNESS.md"] {
        std::fs::copy(from.join(f), src.join(f)).unwrap();
    }
    let surface = std::fs::read_to_string(src.join("surface.json")).unwrap();
    std::fs::write(
        src.join("surface.json"),
        surface.replace("Policy probe", "Policy probe, changed"),
    )
    .unwrap();
    a.ok(&[
        "install",
        "--force",
        "--activate",
        &src.display().to_string(),
    ]);
    let (s, v) = b.exec(Some(&token), &argv);
    assert_eq!((s, v["code"].as_str()), (77, Some("missing_grant")), "{v}");
    assert!(v["error"].as_str().unwrap().contains("suspended"), "{v}");
    // Granted again (on B), it runs on both.
    b.ok(&["grant", "agent", "*", "verb.exec.read"]);
    assert_eq!(b.exec(Some(&token), &argv).0, 0);
    assert_eq!(a.exec(Some(&token), &argv).0, 0);
    // An uninstall on B suspends rather than deletes the fleet's grants.
    b.ok(&["uninstall", "polprobe"]);
    let grants = a.ok(&["grant", "--list", "--json"]);
    assert!(grants.contains("\"principal\":\"agent\""), "{grants}");
    let (s, v) = a.exec(Some(&token), &argv);
    assert_eq!((s, v["code"].as_str()), (77, Some("missing_grant")), "{v}");
    a.assert_sound();
}

#[test]
fn a_record_edited_in_the_database_by_hand_is_named_by_verify() {
    let Some((ua, ub)) = urls() else { return };
    let (schema, ms) = fleet("edit", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    for m in &ms {
        for v in ["one", "two", "three"] {
            assert_eq!(m.exec(None, &["polprobe.argv", "--value", v]).0, 0);
        }
    }
    a.assert_sound();
    // Each machine's chain is keyed by that machine's own chain key (RUNTIME §6, §9):
    // each checks its own chain's hashes, and another's structure only.
    let (_, v) = a.verify();
    let chain_of = |v: &Value, m: &str| -> Value {
        v["chains"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["machine"] == json!(m))
            .unwrap()["chain"]
            .clone()
    };
    assert_eq!(chain_of(&v, &a.id()), json!("checked"), "{v}");
    assert_eq!(chain_of(&v, &b.id()), json!("not_checked"), "{v}");
    // The text face says which chain is this machine's, and where another's key is.
    let out = a.run(&["audit", "verify"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&format!("machine `{}` (this machine):", a.id()))
            && said.contains(&format!(
                "not keyed here: its chain key is on machine `{}`; run `hcp audit verify` there",
                b.id()
            ))
            && !said.contains("read-only view"),
        "{said}"
    );
    // B's first call record: its verb key changed, its hash left as it was.
    let id = psql(
        &ua,
        &format!(
            "UPDATE {schema}.audit_record SET body = replace(body, '\"verb_key\":\"argv\"', '\"verb_key\":\"wire\"') \
             WHERE machine = '{0}' AND seq = (SELECT min(seq) FROM {schema}.audit_record \
             WHERE machine = '{0}' AND body LIKE '%\"verb_key\":\"argv\"%') \
             RETURNING (body::jsonb->>'id') || ' ' || seq",
            b.id()
        ),
    );
    let (id, seq) = id.trim().split_once(' ').unwrap();
    let (id, seq) = (id.to_owned(), seq.to_owned());
    assert!(!id.is_empty());
    let (status, v) = b.verify();
    assert_eq!((status, &v["ok"]), (1, &json!(false)), "{v}");
    let text = v.to_string();
    assert!(text.contains("hash_mismatch"), "{v}");
    assert!(text.contains(&b.id()), "names the machine: {v}");
    assert!(text.contains(&id), "names the record: {v}");
    // The text face says the same.
    let out = b.run(&["audit", "verify"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(&b.id()) && said.contains(&format!("record {seq}")),
        "{said}"
    );
    // A record whose hash was recomputed with the server's plain formula, as before keyed
    // chains, fails on every machine: a plain hash after the keyed part.
    psql(
        &ua,
        &format!(
            "UPDATE {schema}.audit_record SET hash = 'sha256:' || encode(sha256(convert_to(prev || E'\\n' || seq::text || E'\\n' || body, 'UTF8')), 'hex') \
             WHERE machine = '{}' AND seq = 3",
            b.id()
        ),
    );
    for m in [a, b] {
        let (status, v) = m.verify();
        assert_eq!((status, &v["ok"]), (1, &json!(false)), "{v}");
        assert!(v.to_string().contains("hash_mismatch"), "{v}");
    }
}

#[test]
fn a_bad_state_key_or_a_config_that_may_hide_one_refuses_before_any_state_is_touched() {
    let Some(u) = url() else { return };
    let m = Machine::new("a", &u, "unused");
    let trail = std::fs::read(m.w.hcp_home.join("audit/audit.jsonl")).unwrap();
    for (text, at) in [
        (
            r#"{"state": {"url": "host=/s", "sslmode": "x"}}"#,
            "line 1, column",
        ),
        (
            r#"{"state": {"url": "postgresql://h/x?sslmode=sometimes"}}"#,
            "line 1, column 12",
        ),
        (
            r#"{"state": {"url": "host=/s"}, "sandbox": {"requir": true}}"#,
            "line 1, column",
        ),
        (r#"{"state": {"url": "host=/s"}"#, "line 1, column"),
    ] {
        std::fs::write(m.w.hcp_home.join("config.json"), text).unwrap();
        for args in [
            &["session", "list"][..],
            &["grant", "--list"][..],
            &["approvals"][..],
            &["exec", "polprobe.argv", "--value", "x"][..],
        ] {
            let out = m.run(args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(78), "{text} {args:?}: {err}");
            assert!(
                err.contains("code: bad_config") && err.contains(at),
                "{text}: {err}"
            );
        }
        // Nothing was written to the local state.
        assert!(!m.w.hcp_home.join("state/sessions").exists(), "{text}");
        assert_eq!(
            std::fs::read(m.w.hcp_home.join("audit/audit.jsonl")).unwrap(),
            trail,
            "{text}"
        );
    }
}

#[test]
fn the_database_stopped_restarted_repassworded_and_a_schema_behind_give_the_right_code() {
    let Some(server) = Server::start() else {
        return;
    };
    server
        .psql("CREATE ROLE hcpm LOGIN PASSWORD 'first'; GRANT CREATE ON DATABASE postgres TO hcpm");
    let first = server.role_url("hcpm", "first");
    let schema = fleet_support::schema_name("down");
    let (a, b) = (
        Machine::new("a", &first, &schema),
        Machine::new("b", &first, &schema),
    );
    a.ok(&["state", "migrate"]);
    for m in [&a, &b] {
        m.install("polprobe");
        m.install("probe");
    }
    let token = session(&a, "agent", "r");
    a.ok(&["grant", "agent", "*", "verb.exec.read"]);
    let argv = ["polprobe.argv", "--value", "x"];
    let assert_code = |m: &Machine, code: &str, hint: &str| {
        let (s, v) = m.exec(Some(&token), &argv);
        assert_eq!((s, v["code"].as_str()), (74, Some(code)), "{}: {v}", m.name);
        assert!(
            v["hint"].as_str().unwrap_or("").contains(hint),
            "{}: {v}",
            m.name
        );
        let out = m.run(&["session", "list"]);
        assert_eq!(out.status.code(), Some(74), "{}", m.w.render(&out));
    };
    assert_eq!(b.exec(Some(&token), &argv).0, 0);

    // Stopped while a call runs on A: its intent is in, its outcome cannot be; the calls
    // after it are refused, and nothing falls back to the files.
    let sleeper = {
        let mut c = std::process::Command::new(common::hcp_bin());
        c.env_clear()
            .env("HOME", &a.w.home)
            .env("HCP_HOME", &a.w.hcp_home)
            .env("PATH", a.w.path_var())
            .current_dir(&a.w.work)
            .args(["exec", "--json", "probe.sleep", "--secs", "2"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        c.spawn().unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while count_kind(&server.url, &schema, "intent") < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the sleeping call never got its intent"
        );
        std::thread::yield_now();
    }
    server.ctl("stop");
    let out = sleeper.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The verb ran: the call answers with its result, marked (RUNTIME §6
    // `outcome_deferred`), so a harness does not run it again.
    assert_eq!(
        (out.status.code(), v["ok"].as_bool()),
        (Some(0), Some(true)),
        "{v}"
    );
    assert_eq!(
        v["outcome_deferred"]["code"].as_str(),
        Some("state_unavailable"),
        "{v}"
    );
    assert_code(&a, "state_unavailable", "is the server running");
    assert_code(&b, "state_unavailable", "is the server running");
    // The hint names the way back to this store's files as well as the repair.
    assert_code(
        &b,
        "state_unavailable",
        "`hcp config unset state` makes the state",
    );
    assert!(!b.w.hcp_home.join("state/sessions").exists());
    // The machine's local trail holds its `init` only: no fall-back to local state.
    let local = std::fs::read_to_string(b.w.hcp_home.join("audit/audit.jsonl")).unwrap();
    assert_eq!(local.lines().count(), 1, "{local}");

    // Restarted: both machines go on; the interrupted call is listed, not damage.
    server.ctl("start");
    assert_eq!(a.exec(Some(&token), &argv).0, 0);
    assert_eq!(b.exec(Some(&token), &argv).0, 0);
    let v = a.assert_sound();
    assert_eq!(v["interrupted"], json!(1), "{v}");

    // The password changed: refused credentials; the new one in config.json works.
    server.psql("ALTER ROLE hcpm PASSWORD 'second'");
    assert_code(&a, "state_unavailable", "password");
    let out = a.run(&["doctor"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("reachable             no"), "{text}");
    let second = server.role_url("hcpm", "second");
    for m in [&a, &b] {
        m.point_at(&second, &schema);
    }
    assert_eq!(a.exec(Some(&token), &argv).0, 0);

    // One schema version behind (as an hcp one release older left it): refused with the
    // hint to migrate; `hcp state migrate` brings it back.
    let v = fleet_support::SCHEMA_VERSION;
    server.psql(&format!(
        "DELETE FROM {schema}.schema_version WHERE version = {v}"
    ));
    assert_code(&b, "state_unavailable", "hcp state migrate");
    let said = b.ok(&["state", "migrate"]);
    assert!(said.contains(&format!("applied migration {v}")), "{said}");
    assert_eq!(b.exec(Some(&token), &argv).0, 0);
    assert_eq!(a.exec(Some(&token), &argv).0, 0);
    let v = b.assert_sound();
    assert_eq!(v["interrupted"], json!(1), "{v}");
}

#[test]
fn tail_follow_on_one_machine_streams_the_records_of_every_machine() {
    use std::io::BufRead;
    let Some((ua, ub)) = urls() else { return };
    let (_schema, ms) = fleet("follow", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    assert_eq!(a.exec(None, &["polprobe.argv", "--value", "before"]).0, 0);
    let mut follower = std::process::Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &a.w.home)
        .env("HCP_HOME", &a.w.hcp_home)
        .env("PATH", a.w.path_var())
        .args(["audit", "tail", "--follow", "-n", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(follower.stdout.take().unwrap()).lines();
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    // The last record so far: A's outcome.
    let first = next();
    assert_eq!(
        (first["kind"].as_str(), first["machine"].as_str()),
        (Some("outcome"), Some(a.id().as_str())),
        "{first}"
    );
    // A call on B: its intent and outcome arrive, named by B's chain.
    assert_eq!(b.exec(None, &["polprobe.argv", "--value", "after"]).0, 0);
    // (B's first call records the `config.json` it finds first: an act of authority.)
    let mut call_record = || loop {
        let r = next();
        if r["kind"] != "authority" {
            break r;
        }
    };
    let (i, o) = (call_record(), call_record());
    for r in [&i, &o] {
        assert_eq!(r["machine"], json!(b.id()), "{r}");
        assert!(
            r["hash"].as_str().unwrap().starts_with("hmac-sha256:"),
            "{r}"
        );
    }
    assert_eq!(i["kind"].as_str(), Some("intent"), "{i}");
    assert_eq!(o["intent"], i["id"], "{o}");
    // SIGTERM ends it (exit 0).
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(follower.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(follower.wait().unwrap().code(), Some(0));
}

#[test]
fn migrate_says_what_it_did_once_and_doctor_names_the_backend_and_its_versions() {
    let Some((ua, ub)) = urls() else { return };
    let (schema, ms) = fleet("doctor", &[&ua, &ub], &[]);
    // A second migrate, from either machine, has nothing to do and says so.
    let again = ms[1].ok(&["state", "migrate"]);
    assert_eq!(
        again.trim(),
        format!(
            "schema `{schema}` is current (version {})",
            fleet_support::SCHEMA_VERSION
        ),
        "{again}"
    );
    let v: Value = serde_json::from_str(&ms[0].ok(&["state", "migrate", "--json"])).unwrap();
    assert_eq!(
        (&v["backend"], &v["from"], &v["to"], &v["applied"]),
        (
            &json!("postgresql"),
            &json!(fleet_support::SCHEMA_VERSION),
            &json!(fleet_support::SCHEMA_VERSION),
            &json!([])
        ),
        "{v}"
    );
    // Doctor names the backend, this machine, the server's and the schema's versions.
    let d: Value = serde_json::from_str(&ms[0].ok(&["doctor", "--json"])).unwrap();
    let st = &d["state"];
    assert_eq!(
        (
            &st["backend"],
            &st["schema"],
            &st["schema_version"],
            &st["expected_schema_version"],
            &st["reachable"],
            &st["machine"]
        ),
        (
            &json!("postgresql"),
            &json!(schema),
            &json!(fleet_support::SCHEMA_VERSION),
            &json!(fleet_support::SCHEMA_VERSION),
            &json!(true),
            &json!(ms[0].id())
        ),
        "{st}"
    );
    assert!(
        st["server_version"].as_str().is_some_and(|s| !s.is_empty()),
        "{st}"
    );
    assert!(st.get("error").is_none(), "{st}");
    let text = ms[1].ok(&["doctor"]);
    assert!(
        text.contains("  backend               postgresql"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "  schema version        {0} (this hcp: {0})",
            fleet_support::SCHEMA_VERSION
        )),
        "{text}"
    );
    assert!(text.contains("  reachable             yes"), "{text}");
}

#[test]
fn an_agents_mcp_server_lists_and_calls_its_tools_on_the_fleet_and_refuses_a_schema_behind() {
    let Some((ua, ub)) = urls() else { return };
    let (schema, ms) = fleet("mcp", &[&ua, &ub], &["polprobe"]);
    let token = session(&ms[0], "agent", "r");
    ms[0].ok(&["grant", "agent", "polprobe", "verb.exec.read"]);
    // RUNTIME §10 on both machines (direct and through the pooler): the session's tools,
    // a call of one, its record in the machine's chain. The server's async runtime and
    // the database client's blocking calls do not meet on one thread.
    for m in &ms {
        let mut s = mcp_common::Raw::start(&m.w, Some(&token));
        let names = s.tool_names();
        assert!(names.contains(&"polprobe.argv".to_owned()), "{names:?}");
        let r = s.call("polprobe.argv", json!({ "value": "x" }));
        assert_eq!(r["result"]["isError"], false, "{}: {r}", m.name);
        assert!(s.finish().success());
    }
    assert_eq!(count_kind(&ua, &schema, "intent"), 2);
    for m in &ms {
        m.assert_sound();
    }
    // The schema moves one version behind while a server runs: its next call, and a new
    // server's, answer `state_unavailable`; so do `connect` and `disconnect` of a pack
    // that is not there (every call that needs state, RUNTIME §9).
    let mut running = mcp_common::Raw::start(&ms[1].w, Some(&token));
    let r = running.call("polprobe.argv", json!({ "value": "x" }));
    assert_eq!(r["result"]["isError"], false, "{r}");
    psql(
        &ua,
        &format!(
            "DELETE FROM {schema}.schema_version WHERE version = {}",
            fleet_support::SCHEMA_VERSION
        ),
    );
    let r = running.call("polprobe.argv", json!({ "value": "x" }));
    assert_eq!(mcp_common::refusal_code(&r), "state_unavailable", "{r}");
    assert!(running.finish().success());
    let mut s = mcp_common::Raw::start(&ms[1].w, Some(&token));
    let r = s.call("polprobe.argv", json!({ "value": "x" }));
    assert_eq!(mcp_common::refusal_code(&r), "state_unavailable", "{r}");
    assert!(s.finish().success());
    for args in [["connect", "nopack"], ["disconnect", "nopack"]] {
        let out = ms[1].run(&args);
        assert_eq!(out.status.code(), Some(74), "{}", ms[1].w.render(&out));
    }
    assert_eq!(count_kind(&ua, &schema, "intent"), 3);
}

/// The Unix socket a `host=DIR port=PORT …` URL names.
fn socket_of(url: &str) -> std::path::PathBuf {
    let word = |k: &str| {
        url.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .map(str::to_owned)
    };
    let dir = word("host=").expect("a host=DIR url");
    let port = word("port=").unwrap_or_else(|| "5432".into());
    std::path::Path::new(&dir).join(format!(".s.PGSQL.{port}"))
}

#[test]
fn a_calls_child_never_reaches_the_state_databases_socket() {
    let Some((ua, ub)) = urls() else { return };
    let (_, ms) = fleet("socket", &[&ua, &ub], &[]);
    for m in &ms {
        exec_common::install(&m.w, &confine_common::hostile_pack(&m.w));
    }
    let token = session(&ms[0], "agent", "r");
    ms[0].ok(&["grant", "agent", "hostile", "verb.exec.read"]);
    // A call reaches a Unix socket the operator gives its pack (`packs.ID.write`), and then
    // every pathname socket of its view; the database's (direct on A, the pooler's on B)
    // is not in the view: the fleet's state is the store, its role the owner's (RUNTIME
    // §5.1, §9).
    for (m, url) in ms.iter().zip([&ua, &ub]) {
        let other = m.w.root().join("other.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&other).unwrap();
        let config = m.w.hcp_home.join("config.json");
        let mut c: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
        c["packs"] = serde_json::json!({"hostile": {"write": [other]}});
        std::fs::write(&config, c.to_string()).unwrap();
        let (_, v) = m.exec(
            Some(&token),
            &[
                "hostile.personal.try",
                "unix-connect",
                &other.display().to_string(),
            ],
        );
        confine_common::assert_ok(&v, &format!("{}: a socket of the caller's", m.name));
        let db = socket_of(url);
        assert!(db.exists(), "{}", db.display());
        let (_, v) = m.exec(
            Some(&token),
            &[
                "hostile.personal.try",
                "unix-connect",
                &db.display().to_string(),
            ],
        );
        confine_common::assert_denied(&v, &format!("{}: the database's socket", m.name));
    }
}

/// Issue 27, fleet-wide: a session whose stored workdir is `/` (as an earlier version took
/// it), live, ended or expired, refuses no other principal's call on any machine and no
/// other session's start: calls read their own session only (RUNTIME §4).
#[test]
fn one_sessions_workdir_refuses_nobody_else_across_the_fleet() {
    let Some((ua, ub)) = urls() else { return };
    let (schema, ms) = fleet("workdirs", &[&ua, &ub], &["echo"]);
    let (a, b) = (&ms[0], &ms[1]);
    for p in ["careless-live", "careless-ended", "careless-expired"] {
        let dir = a.w.work.join(p);
        std::fs::create_dir_all(&dir).unwrap();
        a.ok(&[
            "session",
            "start",
            "--principal",
            p,
            "--workdir",
            &dir.display().to_string(),
        ]);
    }
    psql(
        &ua,
        &format!(
            "UPDATE {schema}.sessions SET workdir = convert_to('/', 'UTF8') WHERE principal LIKE 'careless-%'"
        ),
    );
    a.ok(&["session", "end", "--principal", "careless-ended"]);
    psql(
        &ua,
        &format!(
            "UPDATE {schema}.sessions SET expires_at = now() - interval '1 hour' WHERE principal = 'careless-expired'"
        ),
    );
    // Another principal's session with a workdir of its own starts, and its calls run on
    // both machines; so do the owner's.
    let mine = b.w.work.join("mine");
    std::fs::create_dir_all(&mine).unwrap();
    let out = b.ok(&[
        "session",
        "start",
        "--principal",
        "agent-2",
        "--workdir",
        &mine.display().to_string(),
    ]);
    let token = out.trim().to_owned();
    a.ok(&["grant", "agent-2", "echo", "verb.exec.read"]);
    for m in [a, b] {
        let (status, v) = m.exec(Some(&token), &["echo.say", "hi"]);
        assert_eq!(status, 0, "{}: {v}", m.name);
        let (status, v) = m.exec(None, &["echo.say", "hi"]);
        assert_eq!(status, 0, "{}: the owner: {v}", m.name);
    }
}

/// The acts of authority of `schema`'s chains, oldest first, by act name.
fn fleet_acts(url: &str, schema: &str) -> Vec<String> {
    psql(
        url,
        &format!(
            "SELECT body::jsonb->>'act' FROM {schema}.audit_record
             WHERE body::jsonb->>'kind' = 'authority' ORDER BY body::jsonb->>'ts', body::jsonb->>'id'"
        ),
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

#[test]
fn acts_of_authority_go_to_the_fleets_trail_and_approvals_are_bound_to_session_and_project() {
    let Some((ua, ub)) = urls() else { return };
    let (schema, ms) = fleet("authority", &[&ua, &ub], &["polprobe"]);
    let (a, b) = (&ms[0], &ms[1]);
    let acts = fleet_acts(&ua, &schema);
    assert!(
        acts.iter().any(|x| x == "state migrate")
            && acts.iter().filter(|x| *x == "install").count() == 2,
        "{acts:?}"
    );
    for m in &ms {
        m.policy(CONFIRM);
    }
    a.ok(&["grant", "agent", "polprobe", "verb.exec.write"]);
    let start = |m: &Machine, project: &str| {
        m.ok(&[
            "session",
            "start",
            "--principal",
            "agent",
            "--role",
            "clerk",
            "--project",
            project,
        ])
        .trim()
        .to_owned()
    };
    let in_pa = start(a, "pa");
    let in_pb = start(b, "pb");
    let wire = ["polprobe.wire", "--to", "bob", "--amount", "5", "--confirm"];
    let (s, v) = a.exec(Some(&in_pa), &wire);
    assert_eq!(
        (s, v["code"].as_str()),
        (77, Some("requires_confirmation")),
        "{v}"
    );
    let id = v["approval_id"].as_str().unwrap().to_owned();
    let listed: Vec<Value> = serde_json::from_str(&b.ok(&["approvals", "--json"])).unwrap();
    assert_eq!(listed[0]["project"], json!("pa"), "{listed:?}");
    assert!(
        listed[0]["session"].as_str().is_some_and(|s| s.len() == 12),
        "{listed:?}"
    );
    b.ok(&["approve", &id]);
    // Another session (and project) of the same principal asks anew; its own session
    // passes once.
    let (s, v) = b.exec(Some(&in_pb), &wire);
    assert_eq!(
        (s, v["code"].as_str()),
        (77, Some("requires_confirmation")),
        "{v}"
    );
    assert_ne!(v["approval_id"], json!(id));
    let (s, v) = b.exec(Some(&in_pa), &wire);
    assert_eq!(s, 0, "{v}");
    let acts = fleet_acts(&ua, &schema);
    for want in ["grant", "session start", "approve", "policy changed"] {
        assert!(acts.iter().any(|x| x == want), "`{want}` not in {acts:?}");
    }
    a.assert_sound();
}

#[test]
fn an_act_killed_between_its_record_and_its_change_is_interrupted_on_the_fleet_too() {
    use std::os::unix::process::ExitStatusExt;
    let Some((ua, _)) = urls() else { return };
    let (_schema, ms) = fleet("killedact", &[&ua], &["polprobe"]);
    let a = &ms[0];
    // The debug build's seam SIGKILLs hcp after the act's intent, before its change.
    let o =
        a.w.hcp()
            .env("HCP_TEST_ABORT_AT", "act_recorded")
            .args(["grant", "carol", "polprobe", "verb.exec.read"])
            .output()
            .unwrap();
    assert_eq!(o.status.signal(), Some(9), "{}", a.w.render(&o));
    // Not damage: the chain is sound, and the act is listed as interrupted.
    let v = a.assert_sound();
    let chain = v["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["machine"] == json!(a.id()))
        .unwrap()
        .clone();
    let acts = chain["interrupted_acts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(acts.len(), 1, "{v}");
    assert_eq!(
        (&acts[0]["act"], &acts[0]["actor"]),
        (&json!("grant"), &json!("owner")),
        "{v}"
    );
    // The same act made whole afterwards closes nothing of the killed one.
    a.ok(&["grant", "carol", "polprobe", "verb.exec.read"]);
    let v = a.assert_sound();
    assert!(v.to_string().contains("interrupted_acts"), "{v}");
}

/// A pgbouncer of its own in `dir`, in front of the test server, whose login to the server
/// is refused (its `[databases]` entry gives `role` a wrong password), stopped on drop.
struct BadPooler {
    dir: tempfile::TempDir,
}

impl BadPooler {
    /// Starts it, or `None` (skipped) without pgbouncer.
    fn start(server_url: &str, role: &str) -> Option<Self> {
        let found = std::process::Command::new("pgbouncer")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            common::skip::skip("pgbouncer is not installed (`.ci/pg-start --pool` needs it too)");
            return None;
        }
        let host = server_url
            .split_whitespace()
            .find_map(|w| w.strip_prefix("host="))
            .unwrap()
            .to_owned();
        let port = server_url
            .split_whitespace()
            .find_map(|w| w.strip_prefix("port="))
            .unwrap_or("5432")
            .to_owned();
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        std::fs::write(
            dir.path().join("pgbouncer.ini"),
            format!(
                "[databases]\nhcp = host={host} port={port} dbname=postgres user={role} password=wrong\n\
                 [pgbouncer]\nlisten_addr =\nunix_socket_dir = {d}\nlisten_port = 6439\n\
                 auth_type = trust\nauth_file = {d}/userlist.txt\npool_mode = transaction\n\
                 ignore_startup_parameters = options, extra_float_digits\n\
                 query_wait_timeout = 2\nserver_login_retry = 1\n\
                 logfile = {d}/pgbouncer.log\npidfile = {d}/pgbouncer.pid\n"
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("userlist.txt"),
            format!("\"{role}\" \"\"\n"),
        )
        .unwrap();
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() == 0 };
        let mut c = if root {
            // pgbouncer does not run as root: as the server's user, as `.ci/pg-start` does.
            let id = std::process::Command::new("id")
                .args(["-u", "postgres"])
                .output()
                .unwrap();
            let uid: u32 = String::from_utf8_lossy(&id.stdout).trim().parse().unwrap();
            for f in ["", "pgbouncer.ini", "userlist.txt"] {
                std::os::unix::fs::chown(dir.path().join(f), Some(uid), None).unwrap();
            }
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--", "pgbouncer"]);
            c
        } else {
            std::process::Command::new("pgbouncer")
        };
        let out = c
            .arg("-d")
            .arg(dir.path().join("pgbouncer.ini"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pgbouncer: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Self { dir })
    }

    fn url(&self) -> String {
        format!("host={} port=6439 dbname=hcp", self.dir.path().display())
    }
}

impl Drop for BadPooler {
    fn drop(&mut self) {
        let pid = self.dir.path().join("pgbouncer.pid");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !pid.exists() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        if let Some(p) = std::fs::read_to_string(&pid)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
}

/// A pooler whose own login to the server is refused (pgbouncer's `server_login_retry`,
/// or the server's refusal it relays, or its `query_wait_timeout` after it) answers
/// `state_unavailable` with a hint that names the pooler's login to the server, not only
/// `state.url`; `hcp config` still repairs it.
#[test]
fn a_pooler_that_cannot_log_in_to_the_server_says_what_to_check() {
    let Some(u) = url() else { return };
    let role = fleet_support::schema_name("pl");
    psql(&u, &format!("CREATE ROLE {role} LOGIN PASSWORD 'right'"));
    let Some(pool) = BadPooler::start(&u, &role) else {
        psql(&u, &format!("DROP ROLE {role}"));
        return;
    };
    let m = Machine::new("a", &pool.url(), "hcp");
    std::fs::write(
        m.w.hcp_home.join("config.json"),
        json!({"state": {"url": format!("{} user={role}", pool.url())}}).to_string(),
    )
    .unwrap();
    for _ in 0..2 {
        let out = m.run(&["session", "list"]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(74), "{err}");
        assert!(
            err.contains("code: state_unavailable")
                && err.contains("pooler")
                && err.contains("`[databases]` entry"),
            "{err}"
        );
    }
    m.ok(&["config", "unset", "state"]);
    m.ok(&["session", "list"]);
    drop(pool);
    psql(&u, &format!("DROP ROLE {role}"));
}

/// `hcp config` works while the fleet's state cannot be used (here a schema never
/// migrated): each act is recorded in the machine's own trail, naming why, and nothing
/// reaches the database; once `state` points at a migrated schema, acts go to the fleet's
/// trail again.
#[test]
fn hcp_config_is_recorded_in_the_machines_own_trail_while_the_fleet_state_is_unavailable() {
    let Some(u) = url() else { return };
    let m = Machine::new("a", &u, &fleet_support::schema_name("nomig"));
    let out = m.run(&["session", "list"]);
    assert_eq!(out.status.code(), Some(74), "{}", m.w.render(&out));
    let out = m.run(&["config", "set", "limits.cpu_seconds", "5"]);
    let text = m.w.render(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("own trail"), "{text}");
    let local = std::fs::read_to_string(m.w.hcp_home.join("audit/audit.jsonl")).unwrap();
    let act: Value = local
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .rfind(|r| r["act"] == "config set")
        .unwrap();
    assert_eq!(
        (&act["changed"]["key"], &act["changed"]["fleet_state"]),
        (&json!("limits.cpu_seconds"), &json!("state_unavailable")),
        "{act}"
    );
    // A schema that is there: the fleet's trail records the act, as before.
    let (schema, _) = fleet("cfg", &[&u], &[]);
    m.ok(&["config", "set", "state.schema", &schema]);
    let out = m.run(&["config", "set", "limits.cpu_seconds", "6"]);
    assert_eq!(out.status.code(), Some(0), "{}", m.w.render(&out));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("own trail"));
    // The machine's own trail gained the `state.schema` act alone; the fleet's has this one.
    let local_after = std::fs::read_to_string(m.w.hcp_home.join("audit/audit.jsonl")).unwrap();
    let sets = |t: &str| t.matches("\"config set\"").count();
    assert_eq!(sets(&local_after), sets(&local) + 2, "{local_after}");
    let tail = m.ok(&["audit", "tail", "-n", "4", "--json"]);
    assert!(tail.contains("limits.cpu_seconds"), "{tail}");
}
