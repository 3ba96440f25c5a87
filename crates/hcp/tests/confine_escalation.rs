//! Issue 12, "an agent gave itself grants": the owner is never reachable from inside a
//! call (RUNTIME §4). Through the built `hcp`, as root and as `nobody`: sqlite3's `.shell`
//! running a nested `hcp grant` in every land, with and without `env -u HCP_SESSION`,
//! with `HCP_HOME` given and left to its default, creates no grant (the nested `hcp` is
//! refused `nested_call`, or cannot run, or finds no store); the bootstrap pack still
//! works; `HCP_PROJECT` is checked before anything runs.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;

use confine_common::{As, Cw, assert_denied, line, users};
use serde_json::{Value, json};
use std::os::unix::ffi::OsStrExt;

/// Puts the built `hcp` in every call's view (`sandbox.read`: its directory, at its own
/// path, so the child's `PATH` keeps it): the nested `hcp` then runs, and the nested-call
/// marker is what refuses it. Without this it is not in the view at all.
fn hcp_in_every_view(cw: &Cw) {
    let dir = std::path::Path::new(env!("CARGO_BIN_EXE_hcp"))
        .parent()
        .unwrap()
        .display()
        .to_string();
    cw.config(&json!({"sandbox": {"read": [dir]}}));
}

fn sqlite3_or_skip() -> bool {
    if std::path::Path::new("/usr/bin/sqlite3").exists() {
        return true;
    }
    common::skip::skip("no sqlite3 (`apt-get install -y sqlite3`)");
    false
}

#[test]
fn sqlite_shell_gives_an_agent_no_grant_in_any_land() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let cw = Cw::new(user, &["sqlprobe"]);
        hcp_in_every_view(&cw);
        let tok = cw.session("agent-8", &["--project", "p1"]);
        cw.grant("agent-8", "sqlprobe", &["verb.exec.read"]);
        let before = cw.grants();
        let store = cw.w.hcp_home.display().to_string();
        for verb in [
            "sqlprobe.query",
            "sqlprobe.brain.query",
            "sqlprobe.local.query",
        ] {
            for env_u in ["env -u HCP_SESSION ", ""] {
                for home in [format!("HCP_HOME={store} "), String::new()] {
                    let sql = format!(
                        ".shell {env_u}{home}hcp grant agent-8 sqlprobe verb.exec.write pack.connect"
                    );
                    let (out, v) = cw.exec(Some(&tok), &[verb, "--sql", &sql]);
                    let what = format!("{user:?} {verb} {sql:?}: {}", cw.w.render(&out));
                    assert!(v["ok"].is_boolean(), "{what}");
                    assert!(v["code"].is_null(), "the call itself ran: {what}");
                    let err = v["stderr"].as_str().unwrap_or_default();
                    assert!(err.contains("code: nested_call"), "{what}");
                    assert_eq!(cw.grants(), before, "{what}");
                }
            }
        }
        // Handing the nested hcp the agent's own session: it is the agent, who may not
        // grant; and the store is out of the child's sight anyway.
        let sql = format!(
            ".shell HCP_SESSION={tok} HCP_HOME={store} hcp grant agent-8 sqlprobe verb.exec.write"
        );
        let (out, v) = cw.exec(Some(&tok), &["sqlprobe.query", "--sql", &sql]);
        assert!(v["code"].is_null(), "{}", cw.w.render(&out));
        assert!(
            !v["stderr"].as_str().unwrap().is_empty(),
            "{}",
            cw.w.render(&out)
        );
        assert_eq!(cw.grants(), before);
        // Through the store's files directly: nothing to read, nothing to write.
        let sql = format!(
            ".shell cat {store}/state/grants/agent-8.json; echo x > {store}/state/grants/agent-8.json"
        );
        let (out, v) = cw.exec(Some(&tok), &["sqlprobe.query", "--sql", &sql]);
        assert!(
            !v["stdout"].as_str().unwrap().contains("agent-8"),
            "{}",
            cw.w.render(&out)
        );
        assert_eq!(cw.grants(), before);
    }
}

#[test]
fn the_nested_call_marker_is_the_agents_and_not_the_owners() {
    for user in users() {
        let cw = Cw::new(user, &["hostile"]);
        let tok = cw.session("agent-1", &["--project", "p1"]);
        cw.grant("agent-1", "hostile", &["verb.exec.read"]);
        for verb in [
            "hostile.personal.try",
            "hostile.brain.try",
            "hostile.local.try",
        ] {
            let (out, v) = cw.exec(Some(&tok), &[verb, "marker"]);
            assert_eq!(line(&v), "inside", "{user:?} {verb}: {}", cw.w.render(&out));
        }
        let (out, v) = cw.exec(None, &["hostile.personal.try", "marker"]);
        assert_eq!(line(&v), "outside", "{}", cw.w.render(&out));
    }
}

#[test]
fn a_nested_hcp_without_a_session_is_refused_before_it_reads_anything() {
    // Outside any call: the owner, as ever.
    let cw = Cw::new(As::Me, &[]);
    let out = cw.run(&["grant", "--list"]);
    assert!(out.status.success(), "{}", cw.w.render(&out));
    // The refusal's words, as the sqlite3 test sees them through a child's stderr, are
    // pinned by that test; here: every command is refused alike, `--version` included.
    if !sqlite3_or_skip() {
        return;
    }
    let cw = Cw::new(As::Me, &["sqlprobe"]);
    hcp_in_every_view(&cw);
    let tok = cw.session("agent-8", &[]);
    cw.grant("agent-8", "sqlprobe", &["verb.exec.read"]);
    for cmd in ["hcp --version", "hcp lint /", "hcp session list", "hcp mcp"] {
        let (_, v) = cw.exec(
            Some(&tok),
            &["sqlprobe.query", "--sql", &format!(".shell {cmd}")],
        );
        let err = v["stderr"].as_str().unwrap();
        assert!(
            err.contains("error: `hcp` was run without a session from inside an agent's call")
                && err.contains("code: nested_call"),
            "{cmd}: {v}"
        );
        assert!(
            !v["stdout"].as_str().unwrap().contains("hcp 0."),
            "{cmd}: {v}"
        );
    }
}

#[test]
fn hcp_project_is_checked_like_a_session_project() {
    let cw = Cw::new(As::Me, &["hostile"]);
    let tok = cw.session("agent-1", &["--project", "p1"]);
    cw.grant("agent-1", "hostile", &["verb.exec.read"]);
    let audit = cw.w.hcp_home.join("audit/audit.jsonl");
    let before = std::fs::read(&audit).unwrap_or_default();
    let bad: [&std::ffi::OsStr; 4] = [
        "-rf".as_ref(),
        "p1;rm".as_ref(),
        "../p1".as_ref(),
        std::ffi::OsStr::from_bytes(b"p\xff1"),
    ];
    // The agent's, and the owner's (whose `HCP_PROJECT` no session checks).
    for who in [Some(tok.as_str()), None] {
        for p in bad {
            let mut c = cw.hcp();
            if let Some(t) = who {
                c.env("HCP_SESSION", t);
            }
            let out = c
                .env("HCP_PROJECT", p)
                .args(["exec", "hostile.brain.try", "marker"])
                .output()
                .unwrap();
            let text = cw.w.render(&out);
            assert_eq!(out.status.code(), Some(64), "{who:?} {p:?}: {text}");
            assert!(
                text.contains("code: bad_value") && text.contains("`HCP_PROJECT`"),
                "{who:?} {p:?}: {text}"
            );
            assert!(out.stdout.is_empty(), "nothing ran: {text}");
        }
    }
    assert_eq!(std::fs::read(&audit).unwrap_or_default(), before);
    // A project of the session passes and reaches the child.
    let out = cw
        .hcp()
        .env("HCP_SESSION", &tok)
        .env("HCP_PROJECT", "p1")
        .args(["exec", "--json", "hostile.brain.try", "marker"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", cw.w.render(&out));
}

#[test]
fn the_bootstrap_pack_works_as_the_owner_and_as_an_agent_and_hides_the_secrets() {
    for user in users() {
        let cw = Cw::new(user, &["hcp-cli", "hostile"]);
        let tok = cw.session("agent-1", &[]);
        cw.grant("agent-1", "hcp-cli", &["verb.exec.read"]);
        // What the bootstrap child may not read (covered in its view: the runtime's
        // `tests::bootstrap` reads each for real) does not keep hcp from working.
        for f in ["state/bindings/agent-9/mail.json", "cache/policy.compiled"] {
            let path = cw.w.hcp_home.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, confine_common::SECRET).unwrap();
        }
        cw.own(&cw.w.hcp_home);
        // The owner: the store as hcp sees it, the owner-only audit too.
        for verb in ["hcp-cli.list", "hcp-cli.audit.tail", "hcp-cli.audit.verify"] {
            let (out, v) = cw.exec(None, &[verb]);
            assert_eq!(
                v["exit_code"],
                0,
                "{user:?} owner {verb}: {}",
                cw.w.render(&out)
            );
            assert_eq!(v["sandbox"]["filesystem"], "enforced", "{v}");
        }
        let (_, v) = cw.exec(None, &["hcp-cli.list"]);
        let ids: Vec<&str> = v["data"]["packs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["hcp-cli", "hostile"], "{v}");
        // An agent: what it may read; never the owner.
        let (out, v) = cw.exec(Some(&tok), &["hcp-cli.list"]);
        assert_eq!(
            v["exit_code"],
            0,
            "{user:?} agent list: {}",
            cw.w.render(&out)
        );
        let (out, v) = cw.exec(Some(&tok), &["hcp-cli.audit.tail"]);
        assert_ne!(
            v["exit_code"],
            0,
            "{user:?} agent audit: {}",
            cw.w.render(&out)
        );
        assert!(
            !v["stdout"].as_str().unwrap().contains("\"decision\""),
            "{v}"
        );
        for verb in ["hcp-cli.list", "hcp-cli.audit.tail", "hcp-cli.audit.verify"] {
            let (_, v) = cw.exec(None, &[verb]);
            assert!(
                !v.to_string().contains(confine_common::SECRET),
                "{verb}: {v}"
            );
        }
    }
}

#[test]
fn other_principals_sandboxes_are_hidden_but_the_owner_works_in_them() {
    for user in users() {
        let cw = Cw::new(user, &["hostile"]);
        let theirs = cw.w.root().join("theirs");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(theirs.join("notes"), confine_common::SECRET).unwrap();
        cw.own(&theirs);
        let _other = cw.session("agent-2", &["--workdir", &theirs.display().to_string()]);
        let tok = cw.session("agent-1", &[]);
        cw.grant("agent-1", "hostile", &["verb.exec.read"]);
        let notes = theirs.join("notes").display().to_string();
        for verb in ["hostile.personal.try", "hostile.local.try"] {
            let (_, v) = cw.exec(Some(&tok), &[verb, "read", &notes]);
            assert_denied(&v, &format!("{user:?} {verb} reads agent-2's sandbox"));
        }
        // The owner's `local` call from inside that directory runs there.
        let out = cw
            .hcp()
            .current_dir(&theirs)
            .args(["exec", "--json", "hostile.local.try", "read", "notes"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["exit_code"], json!(0), "{}", cw.w.render(&out));
    }
}

#[test]
fn the_tenant_guard_refuses_principal_and_project_placeholders_at_install() {
    // Issue 12: `{{principal_id}}` and `{{project}}` (without `@`) passed lint, so the
    // agent chose the principal or project the CLI saw.
    let cw = Cw::new(As::Me, &[]);
    let dir = confine_common::hostile_pack(&cw.w);
    let surface = std::fs::read_to_string(dir.join("surface.json")).unwrap();
    for placeholder in ["{{principal_id}}", "--project={{project}}", "{{project?}}"] {
        std::fs::write(
            dir.join("surface.json"),
            surface.replace("\"{{a4?}}\"", &format!("\"{placeholder}\"")),
        )
        .unwrap();
        let out = cw.run(&["install", "--activate", &dir.display().to_string()]);
        let text = cw.w.render(&out);
        assert_eq!(out.status.code(), Some(1), "{placeholder}: {text}");
        assert!(
            text.contains("error[reserved_placeholder]") && text.contains("nothing was installed"),
            "{placeholder}: {text}"
        );
        let list = cw.run(&["list", "--json"]);
        assert!(
            !String::from_utf8_lossy(&list.stdout).contains("hostile"),
            "{placeholder}: installed"
        );
    }
    // The session's values, with `@`, are the way.
    std::fs::write(
        dir.join("surface.json"),
        surface.replace("\"{{a4?}}\"", "\"--who={{@principal_id}}\""),
    )
    .unwrap();
    let out = cw.run(&["install", "--activate", &dir.display().to_string()]);
    assert!(out.status.success(), "{}", cw.w.render(&out));
}
