//! Issue 23, "other calls' temp files" and "no tenant on disk" (RUNTIME §5.1, §5.2): through
//! the built `hcp`, as root and as `nobody`, a call's `HOME` is its tenant's home — one per
//! pack and principal in `personal` land, per pack and project in `brain` land — kept
//! across calls and shown to no other tenant; a call's `TMPDIR` is its own and gone when
//! it ends; a session's `--workdir` inside a tenant home is refused; a `read` verb's tenant
//! home is read-only (this project's choice beside §5.2), so a read grant never plants what
//! the next write call of that home runs.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;
mod view_common;

use confine_common::{FifoReader, SECRET, users};
use serde_json::json;
use std::io::Write;
use std::time::Duration;
use view_common::{PROJECT, Vw, assert_no_secret, outside, sqlite3_or_skip};

#[test]
fn a_principals_home_is_its_own_and_kept_across_calls() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let other = vw.cw.session("agent-o", &["--project", "pb"]);
        vw.cw
            .grant("agent-o", "sq", &["verb.exec.read", "verb.exec.write"]);
        let before = outside(&vw);
        // personal: per principal.
        let said = vw.sh(
            Some(&vw.writer),
            "personal.write",
            &format!("echo {SECRET} > $HOME/note.txt; echo home=$HOME"),
        );
        assert!(said.contains("home=/home/hcp"), "{user:?}: {said}");
        let again = vw.sh(Some(&vw.writer), "personal.read", "cat $HOME/note.txt");
        assert!(
            again.contains(SECRET),
            "{user:?}: the home is not kept: {again}"
        );
        for cmd in [
            "cat $HOME/note.txt 2>&1".to_owned(),
            "find / -name note.txt 2>/dev/null".to_owned(),
        ] {
            let (_, v) = vw.shell(Some(&other), "personal.read", &cmd);
            assert_no_secret(
                &v.to_string(),
                &format!("{user:?} another principal: {cmd}"),
            );
        }
        // brain: per project, whoever the principal.
        vw.sh(
            Some(&vw.writer),
            "brain.write",
            &format!("echo {SECRET} > $HOME/brain.txt"),
        );
        let same_project = vw.sh(Some(&vw.reader), "brain.read", "cat $HOME/brain.txt 2>&1");
        assert!(
            same_project.contains(SECRET),
            "{user:?}: project pa's notes are pa's members': {same_project}"
        );
        let (_, v) = vw.shell(
            Some(&other),
            "brain.read",
            "cat $HOME/brain.txt 2>&1; find / -name brain.txt 2>/dev/null",
        );
        assert_no_secret(
            &v.to_string(),
            &format!("{user:?}: project pb reads pa's notes"),
        );
        // Nowhere else: not the personal home of the same principal, not the store's path.
        let (_, v) = vw.shell(
            Some(&vw.writer),
            "personal.read",
            "cat $HOME/brain.txt 2>&1",
        );
        assert_no_secret(
            &v.to_string(),
            &format!("{user:?}: brain notes in a personal home"),
        );
        let homes = vw.w().hcp_home.join("homes").display().to_string();
        let (_, v) = vw.shell(
            Some(&other),
            "personal.read",
            &format!("ls -laR {homes} 2>&1"),
        );
        assert_no_secret(&v.to_string(), &format!("{user:?}: the store's homes"));
        assert_eq!(outside(&vw), before, "{user:?}");
    }
}

#[test]
fn a_read_verb_cannot_plant_in_a_tenant_home_and_a_write_verb_still_writes() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let home_of = |flag: &str, id: &str| {
            let out = vw.cw.run(&["home", "sq", flag, id]);
            assert_eq!(out.status.code(), Some(0), "{}", w.render(&out));
            std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
        };
        // A write verb writes its home, in both lands, for a principal and for the owner.
        for (token, land, flag, id) in [
            (
                Some(vw.writer.as_str()),
                "personal",
                "--principal",
                "agent-w",
            ),
            (Some(vw.writer.as_str()), "brain", "--project", PROJECT),
            (None, "personal", "--principal", "owner"),
        ] {
            let said = vw.sh(
                token,
                &format!("{land}.write"),
                "echo kept > $HOME/notes.txt; echo rc=$?",
            );
            assert!(said.contains("rc=0"), "{user:?} {land}.write: {said}");
            let host = home_of(flag, id).join("notes.txt");
            assert_eq!(
                std::fs::read_to_string(&host).unwrap_or_default(),
                "kept\n",
                "{user:?} {land}.write did not write its home"
            );
        }
        // A read verb plants nothing: not a `.sqliterc` the next write call of the home would
        // run, not a new file, not a change to a file there, not a removal — in the
        // principal's own home, the project's shared one and the owner's.
        let plant = "echo '.shell touch /tmp/planted' > $HOME/.sqliterc; echo rc=$?; \
                     echo x >> $HOME/notes.txt; echo rc=$?; mkdir $HOME/d; echo rc=$?; \
                     rm $HOME/notes.txt; echo rc=$?; echo scratch > /tmp/t && echo tmp=ok";
        for (token, land, flag, id) in [
            (
                Some(vw.reader.as_str()),
                "personal",
                "--principal",
                "agent-r",
            ),
            (Some(vw.reader.as_str()), "brain", "--project", PROJECT),
            (Some(vw.writer.as_str()), "brain", "--project", PROJECT),
            (None, "personal", "--principal", "owner"),
        ] {
            let home = home_of(flag, id);
            let before = view_common::tree(&[&home]);
            let said = vw.sh(token, &format!("{land}.read"), &format!("({plant}) 2>&1"));
            assert!(
                !said.contains("rc=0")
                    && said.matches("rc=").count() == 4
                    && said.contains("Read-only file system"),
                "{user:?} {land}.read wrote its tenant home: {said}"
            );
            assert!(
                said.contains("tmp=ok"),
                "{user:?} {land}.read: /tmp stays the scratch: {said}"
            );
            assert_eq!(
                view_common::tree(&[&home]),
                before,
                "{user:?} {land}.read changed its tenant home"
            );
            assert!(!home.join(".sqliterc").exists(), "{user:?} {land}");
        }
    }
}

#[test]
fn the_owner_has_a_tenant_home_too_never_the_real_one() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let said = vw.sh(None, "personal.read", "echo home=$HOME; ls -a $HOME");
        assert!(said.contains("home=/home/hcp"), "{user:?}: {said}");
        assert!(
            !said.contains(".npmrc") && !said.contains(".ssh"),
            "{user:?}: {said}"
        );
        let out = vw.cw.run(&["home", "sq", "--principal", "owner"]);
        assert_eq!(out.status.code(), Some(0), "{}", vw.w().render(&out));
    }
}

#[test]
fn another_calls_tmpdir_does_not_exist() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        // Two FIFOs in a directory the operator gives the pack: the first call says when
        // its draft is written, and waits for the second to be done.
        let fifos = w.root().join("fifos");
        std::fs::create_dir_all(&fifos).unwrap();
        vw.cw.own(&fifos);
        vw.cw.config(&json!({"packs": {"sq": {"write": [fifos]}}}));
        let (ready, done) = (fifos.join("ready"), fifos.join("done"));
        vw.cw.fifo(&ready);
        vw.cw.fifo(&done);
        for land in ["personal", "local"] {
            let cmd = format!(
                ".shell echo {SECRET} > $TMPDIR/draft.txt; echo ready > {}; cat {} >/dev/null",
                ready.display(),
                done.display()
            );
            let mut first = vw.cw.hcp();
            first
                .env("HCP_SESSION", &vw.writer)
                .args([
                    "exec",
                    "--json",
                    &format!("sq.{land}.write"),
                    "--query",
                    &cmd,
                ])
                .stdout(std::process::Stdio::piped());
            let first = first.spawn().unwrap();
            let r = FifoReader::open(&ready);
            assert_eq!(r.line(Duration::from_secs(60)).as_deref(), Some("ready"));
            let (_, v) = vw.shell(
                Some(&vw.reader),
                &format!("{land}.read"),
                "cat $TMPDIR/draft.txt /tmp/draft.txt 2>&1; find / -name draft.txt 2>/dev/null",
            );
            assert_no_secret(
                &v.to_string(),
                &format!("{user:?} {land}: another call's TMPDIR"),
            );
            // Nor is it on the host, where another user's call could look.
            for host in ["/tmp", "/dev/shm", "/var/tmp"] {
                let found = std::process::Command::new("find")
                    .args([host, "-name", "draft.txt"])
                    .output()
                    .unwrap();
                assert!(
                    found.stdout.is_empty(),
                    "{user:?} {land}: a call's TMPDIR is on the host: {}",
                    String::from_utf8_lossy(&found.stdout)
                );
            }
            std::fs::OpenOptions::new()
                .write(true)
                .open(&done)
                .unwrap()
                .write_all(b"done\n")
                .unwrap();
            let out = first.wait_with_output().unwrap();
            assert!(out.status.success(), "{}", w.render(&out));
        }
    }
}

#[test]
fn a_workdir_inside_a_tenant_home_is_refused() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let apart = w.root().join("tenant-homes");
        std::fs::create_dir_all(&apart).unwrap();
        vw.cw.own(&apart);
        for config in [json!({}), json!({"sandbox": {"homes": apart}})] {
            vw.cw.config(&config);
            vw.sh(Some(&vw.writer), "personal.write", "mkdir -p $HOME/project");
            let out = vw.cw.run(&["home", "sq", "--principal", "agent-w"]);
            assert_eq!(out.status.code(), Some(0), "{config}: {}", w.render(&out));
            let home = String::from_utf8(out.stdout).unwrap().trim().to_owned();
            for dir in [home.clone(), format!("{home}/project")] {
                let out = vw.cw.run(&[
                    "session",
                    "start",
                    "--principal",
                    "agent-x",
                    "--workdir",
                    &dir,
                ]);
                let refused_at_start = !out.status.success();
                let text = w.render(&out);
                if refused_at_start {
                    assert!(text.contains("bad_workdir"), "{config} {dir}: {text}");
                    continue;
                }
                let tok = String::from_utf8(out.stdout).unwrap().trim().to_owned();
                vw.cw
                    .grant("agent-x", "sq", &["verb.exec.read", "verb.exec.write"]);
                let (out, v) = vw.shell(Some(&tok), "local.write", "echo planted > planted.txt");
                assert!(
                    v["code"] == "bad_workdir" || v["code"] == "sandbox_unavailable",
                    "{user:?} {config} {dir}: a local call ran in a tenant home: {}",
                    w.render(&out)
                );
                assert!(!std::path::Path::new(&dir).join("planted.txt").exists());
            }
        }
    }
}
