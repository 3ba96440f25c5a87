//! Principals, sessions and grants through the built `hcp` (RUNTIME §4).
//!
//! The session a command starts is then resolved with the store API the gate uses
//! (`hcp_store::session::resolve`), with an explicit `now`: expiry is tested by asking
//! about a later instant, never by sleeping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::World;
use hcp_model::{Capability, PackId};
use hcp_store::Home;
use hcp_store::grant::{GrantStatus, Grants, status};
use hcp_store::session::{self, BadSession, PrincipalId, SessionError, SignedDuration, Timestamp};
use pretty_assertions::assert_eq;
use std::process::Output;

/// Filters for what changes from run to run: tokens, times, short ids, digests.
macro_rules! snapshot {
    ($name:expr, $text:expr) => {
        insta::with_settings!({filters => vec![
            (r"hcps_[0-9a-f]{64}", "[TOKEN]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", "[TS]"),
            (r"sha256:[0-9a-f]{64}", "[SHA256]"),
            (r"\b[0-9a-f]{12}\b", "[ID]"),
        ]}, {
            insta::assert_snapshot!($name, $text);
        });
    };
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// Starts a session with `args` after `--principal ID` and returns its token.
fn start(w: &World, principal: &str, args: &[&str]) -> String {
    let mut all = vec!["session", "start", "--principal", principal];
    all.extend_from_slice(args);
    let o = w.run(&all);
    assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));
    let out = stdout(&o);
    out.strip_suffix('\n').unwrap().to_owned()
}

fn home(w: &World) -> Home {
    Home::open(&w.hcp_home).unwrap()
}

#[test]
fn session_start_prints_the_token_alone_and_stores_only_its_digest() {
    let w = World::with_store();
    let o = w.run(&[
        "session",
        "start",
        "--principal",
        "alice",
        "--role",
        "analyst",
        "--project",
        "p1",
        "--project",
        "p2",
        "--attr",
        "team=blue",
        "--can-view",
        "pii",
        "--workdir",
        ".",
        "--ttl",
        "15m",
    ]);
    snapshot!("session_start", w.render(&o));
    let token = stdout(&o).trim_end().to_owned();
    assert!(session::is_token_shape(&token), "{token}");

    // The store holds the digest, never the token.
    let dir = session::sessions_dir(&home(&w));
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1);
    let file = files[0].as_ref().unwrap().path();
    assert_eq!(
        file.file_stem().unwrap().to_str().unwrap(),
        session::token_digest(&token)
    );
    assert!(!std::fs::read_to_string(&file).unwrap().contains(&token));

    // What the gate sees.
    let s = session::resolve(&home(&w), &token, Timestamp::now()).unwrap();
    assert_eq!(s.principal.as_str(), "alice");
    assert_eq!(s.role.as_deref(), Some("analyst"));
    assert_eq!(s.projects, vec!["p1", "p2"]);
    assert_eq!(s.attributes.get("team").map(String::as_str), Some("blue"));
    assert_eq!(s.can_view, vec!["pii"]);
    assert_eq!(s.workdir, Some(w.work.clone()));
    assert_eq!(
        s.expires_at.duration_since(s.created_at),
        SignedDuration::from_mins(15)
    );
}

#[test]
fn session_list_shows_state_but_never_tokens() {
    let w = World::with_store();
    let a = start(&w, "alice", &["--role", "analyst", "--project", "p1"]);
    let b = start(&w, "bob", &["--ttl", "1d"]);
    let o = w.run(&["session", "end", &b]);
    snapshot!("session_end", w.render(&o));
    let o = w.run(&["session", "end", &b]);
    snapshot!("session_end_again", w.render(&o));

    let o = w.run(&["session", "list"]);
    snapshot!("session_list", w.render(&o));
    assert!(!stdout(&o).contains(&a) && !stdout(&o).contains(&b));

    let o = w.run(&["session", "list", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let text = stdout(&o);
    assert!(!text.contains(&a) && !text.contains(&b));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let summary: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["principal"].as_str().unwrap().to_owned(),
                s["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut summary = summary;
    summary.sort();
    assert_eq!(
        summary,
        vec![
            ("alice".to_owned(), "active".to_owned()),
            ("bob".to_owned(), "ended".to_owned())
        ]
    );
}

#[test]
fn session_end_by_principal_and_from_stdin() {
    let w = World::with_store();
    let a1 = start(&w, "alice", &[]);
    let a2 = start(&w, "alice", &[]);
    let b = start(&w, "bob", &[]);
    let o = w.run(&["session", "end", "--principal", "alice"]);
    snapshot!("session_end_principal", w.render(&o));
    let now = Timestamp::now();
    for t in [&a1, &a2] {
        assert!(matches!(
            session::resolve(&home(&w), t, now),
            Err(SessionError::Bad(BadSession::Ended { .. }))
        ));
    }
    let o = w
        .hcp()
        .args(["session", "end", "-"])
        .write_stdin(format!("{b}\n"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));
    assert!(session::resolve(&home(&w), &b, now).is_err());
    let o = w.run(&["session", "end", "--principal", "alice"]);
    assert_eq!(stdout(&o), "no session of `alice` to end\n");
    let unknown = format!("hcps_{}", "0".repeat(64));
    for (token, message) in [
        ("garbage", "the session token is malformed"),
        (unknown.as_str(), "the session token is unknown"),
    ] {
        let o = w.run(&["session", "end", token]);
        assert_eq!(o.status.code(), Some(1), "{}", w.render(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!(
                "error: {message}\n  code: bad_session\n  hint: {}\n",
                hcp_model::Code::BadSession.next_step()
            )
        );
    }
}

#[test]
fn bad_tokens_resolve_to_bad_session_never_to_the_owner() {
    let w = World::with_store();
    let live = start(&w, "alice", &["--ttl", "1s"]);
    let ended = start(&w, "alice", &[]);
    assert_eq!(w.run(&["session", "end", &ended]).status.code(), Some(0));
    let now = Timestamp::now();
    let h = home(&w);
    let reason = |token: &str, at: Timestamp| match session::resolve(&h, token, at) {
        Err(e @ SessionError::Bad(_)) => {
            assert_eq!(e.code(), "bad_session");
            let SessionError::Bad(b) = e else {
                unreachable!()
            };
            b.reason()
        }
        other => panic!("{token}: {other:?}"),
    };
    assert_eq!(reason("garbage", now), "malformed");
    assert_eq!(reason("", now), "malformed");
    assert_eq!(reason(&format!("{live} "), now), "malformed");
    assert_eq!(reason(&format!("hcps_{}", "a".repeat(64)), now), "unknown");
    assert_eq!(reason(&ended, now), "ended");
    // `--ttl 1s`: asked about two seconds later, without waiting for them.
    let later = now.checked_add(SignedDuration::from_secs(2)).unwrap();
    assert_eq!(reason(&live, later), "expired");
}

#[test]
fn an_expired_session_file_is_refused() {
    // Test technique: backdate `expires_at` in the session file.
    let w = World::with_store();
    let token = start(&w, "alice", &[]);
    let file =
        session::sessions_dir(&home(&w)).join(format!("{}.json", session::token_digest(&token)));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    v["expires_at"] = "2000-01-01T00:00:00.000Z".into();
    // hcp would refuse a file edited by hand: the test writes it with its MAC, as hcp does.
    hcp_store::stamp::write(
        &home(&w),
        &hcp_store::StoreLock::acquire(&home(&w)).unwrap(),
        &file,
        &v,
    )
    .unwrap();
    let e = session::resolve(&home(&w), &token, Timestamp::now()).unwrap_err();
    assert_eq!(e.code(), "bad_session");
    assert_eq!(
        e.to_string(),
        "the session expired at `2000-01-01T00:00:00.000Z`"
    );
    let o = w.run(&["session", "list"]);
    assert!(stdout(&o).contains("expired"), "{}", w.render(&o));
}

#[test]
fn owner_only_commands_refuse_any_session_even_a_valid_one() {
    let w = World::with_store();
    let token = start(&w, "alice", &[]);
    let cases: [&[&str]; 7] = [
        &["session", "start", "--principal", "mallory"],
        &["session", "list"],
        &["session", "end", "--principal", "alice"],
        &["grant", "alice", "*", "verb.exec.write"],
        &["grant", "--list"],
        &["revoke", "alice", "*"],
        &["audit", "verify"],
    ];
    for session in [token.as_str(), "garbage", ""] {
        for args in cases {
            let o = w
                .hcp()
                .env("HCP_SESSION", session)
                .args(args)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(77), "{args:?}: {}", w.render(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("owner_only"), "{err}");
            assert!(o.stdout.is_empty());
        }
    }
    let o = w
        .hcp()
        .env("HCP_SESSION", &token)
        .args(["grant", "alice", "*", "verb.exec.write"])
        .output()
        .unwrap();
    snapshot!("owner_only", w.render(&o));
    // Nothing was granted, and the session is still the only one.
    assert!(Grants::load(&home(&w)).unwrap().is_empty());
    assert_eq!(session::list(&home(&w)).unwrap().len(), 1);
}

#[test]
fn session_start_refuses_bad_input() {
    let w = World::with_store();
    let cases: [(&str, &[&str]); 6] = [
        ("bad_principal_owner", &["--principal", "owner"]),
        ("bad_principal_charset", &["--principal", "al ice"]),
        ("bad_ttl", &["--principal", "alice", "--ttl", "8"]),
        (
            "bad_workdir",
            &["--principal", "alice", "--workdir", "nope"],
        ),
        ("bad_attr", &["--principal", "alice", "--attr", "team"]),
        (
            "bad_project",
            &["--principal", "alice", "--project", "../p"],
        ),
    ];
    for (name, args) in cases {
        let mut all = vec!["session", "start"];
        all.extend_from_slice(args);
        let o = w.run(&all);
        snapshot!(name, w.render(&o));
    }
    assert_eq!(session::list(&home(&w)).unwrap(), vec![]);
}

#[test]
fn grant_revoke_and_list() {
    common::example_bins();
    let w = World::with_store();
    // A grant names an installed pack (or `*`).
    for id in ["mail", "echo"] {
        let pack = common::gold_pack(id);
        let o = w.run(&["install", pack.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));
    }
    let o = w.run(&[
        "grant",
        "alice",
        "mail",
        "verb.exec.read",
        "verb.exec.write",
    ]);
    snapshot!("grant", w.render(&o));
    let o = w.run(&["grant", "alice", "*", "sense.enable"]);
    assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));
    let o = w.run(&["grant", "bob", "echo", "pack.connect"]);
    assert_eq!(o.status.code(), Some(0), "{}", w.render(&o));

    let o = w.run(&["grant", "--list"]);
    snapshot!("grant_list", w.render(&o));

    // The gate's view: the union of `mail` and `*`.
    let g = Grants::load(&home(&w)).unwrap();
    let alice = PrincipalId::parse("alice").unwrap();
    let mail = PackId::parse("mail").unwrap();
    let held = g.held(&alice, &mail);
    let mut caps: Vec<Capability> = held.iter().map(|h| h.capability).collect();
    caps.sort();
    assert_eq!(
        caps,
        vec![
            Capability::VerbExecRead,
            Capability::VerbExecWrite,
            Capability::SenseEnable
        ]
    );
    assert!(matches!(
        status(&held, Capability::VerbExecWrite, None),
        GrantStatus::Held { .. }
    ));
    assert_eq!(
        status(&held, Capability::PackConnect, None),
        GrantStatus::Missing
    );

    let o = w.run(&["revoke", "alice", "mail", "verb.exec.write"]);
    snapshot!("revoke", w.render(&o));
    let o = w.run(&["revoke", "alice", "mail", "verb.exec.write"]);
    snapshot!("revoke_nothing", w.render(&o));
    let o = w.run(&["revoke", "alice", "*"]);
    assert_eq!(stdout(&o), "revoked `sense.enable` from `alice` on `*`\n");

    let o = w.run(&["grant", "--list", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|g| format!("{} {} {}", g["principal"], g["pack"], g["capability"]))
        .collect();
    assert_eq!(
        rows,
        vec![
            r#""alice" "mail" "verb.exec.read""#,
            r#""bob" "echo" "pack.connect""#
        ]
    );
}

#[test]
fn grant_refuses_bad_input() {
    let w = World::with_store();
    let cases: [(&str, &[&str]); 5] = [
        ("grant_bad_capability", &["grant", "alice", "mail", "exec"]),
        (
            "grant_bad_pack",
            &["grant", "alice", "Mail", "verb.exec.read"],
        ),
        ("grant_owner", &["grant", "owner", "mail", "verb.exec.read"]),
        ("grant_no_caps", &["grant", "alice", "mail"]),
        (
            "revoke_bad_capability",
            &["revoke", "alice", "mail", "root"],
        ),
    ];
    for (name, args) in cases {
        let o = w.run(args);
        snapshot!(name, w.render(&o));
    }
    assert!(Grants::load(&home(&w)).unwrap().is_empty());
}

#[test]
fn grant_list_is_empty_at_first() {
    let w = World::with_store();
    let o = w.run(&["grant", "--list"]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (Some(0), "no grants\n".into())
    );
    let o = w.run(&["grant", "--list", "--json"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), "[]\n".into()));
    let o = w.run(&["session", "list"]);
    assert_eq!(
        (o.status.code(), stdout(&o)),
        (Some(0), "no sessions\n".into())
    );
}
