//! Issue 23, "credentials outside the list", "every other store", "a second mount of the same
//! files" (RUNTIME §5.1): through the built `hcp`, as root and as `nobody`, in `personal`,
//! `brain` and `local` land, a session holding only `verb.exec.read` escapes through
//! sqlite3's `.shell` and looks for everything the owner has: every credential file no
//! list named, the default store and another store, a secret at a path no list names,
//! `find / -name '*.key'`, `/proc/self/mountinfo`, `ls /home /root /var /run /mnt`, a bind
//! mount of a secret elsewhere. None of it exists for the call, and nothing outside the
//! call changes.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;
mod view_common;

use confine_common::{SECRET, users};
use view_common::{LANDS, OWNER_SECRETS, Vw, assert_no_secret, outside, sqlite3_or_skip, verb};

#[test]
fn no_credential_of_the_owner_exists_for_a_call() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let before = outside(&vw);
        let mut paths: Vec<String> = OWNER_SECRETS
            .iter()
            .map(|f| w.home.join(f).display().to_string())
            .collect();
        paths.push(w.root().join("srv/x/secret").display().to_string());
        for land in LANDS {
            for p in &paths {
                let (out, v) = vw.shell(
                    Some(&vw.reader),
                    &verb(land, "read"),
                    &format!("cat {p} 2>&1"),
                );
                let what = format!("{user:?} {land}: cat {p}");
                assert_no_secret(&v.to_string(), &what);
                let said = v["stdout"].as_str().unwrap_or_default();
                assert!(
                    said.contains("No such file or directory"),
                    "{what}: the path must not exist in the view: {}",
                    w.render(&out)
                );
            }
            // The owner's home itself is not there, nor any other home.
            let home = w.home.display().to_string();
            let said = vw.sh(
                Some(&vw.reader),
                &verb(land, "read"),
                &format!("ls -a {home} 2>&1"),
            );
            assert!(
                said.contains("No such file or directory"),
                "{user:?} {land}: the owner's home is listed: {said}"
            );
        }
        assert_eq!(
            outside(&vw),
            before,
            "{user:?}: something outside the calls changed"
        );
    }
}

#[test]
fn no_other_store_exists_for_a_call() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let before = outside(&vw);
        for store in [w.hcp_home.clone(), vw.default_store(), vw.other_store()] {
            let s = store.display().to_string();
            for land in LANDS {
                for cmd in [
                    format!("ls -laR {s} 2>&1"),
                    format!(
                        "cat {s}/state/bindings/agent-9/mail.json {s}/audit/digest.secret {s}/audit/checkpoint.key 2>&1"
                    ),
                    format!("cat {s}/homes/mail/principal/agent-9/Maildir/new/1 2>&1"),
                ] {
                    let (out, v) = vw.shell(Some(&vw.reader), &verb(land, "read"), &cmd);
                    let what = format!("{user:?} {land}: {cmd}");
                    assert_no_secret(&v.to_string(), &what);
                    assert!(
                        v["stdout"]
                            .as_str()
                            .unwrap_or_default()
                            .contains("No such file or directory"),
                        "{what}: {}",
                        w.render(&out)
                    );
                }
            }
        }
        assert_eq!(outside(&vw), before, "{user:?}");
    }
}

#[test]
fn find_mountinfo_and_ls_show_only_the_view() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let before = outside(&vw);
        let root = w.root().display().to_string();
        for land in LANDS {
            let v = verb(land, "read");
            // Every `*.key` the call can find: none of the owner's, none of `/etc/ssl/private`.
            let found = vw.sh(Some(&vw.reader), &v, "find / -name '*.key' 2>/dev/null");
            for line in found.lines() {
                assert!(
                    !line.starts_with(&root) && !line.starts_with("/etc/ssl/private/"),
                    "{user:?} {land}: find found `{line}`"
                );
            }
            // The mount table: the view's mounts only, none at a host path outside it.
            let mi = vw.sh(Some(&vw.reader), &v, "cat /proc/self/mountinfo");
            let points = view_common::mount_points(&mi);
            assert!(!points.is_empty(), "{user:?} {land}: no mountinfo: {mi}");
            // The targets of `/etc`'s symlinks are in the view at their own path (RUNTIME
            // §5.1), wherever they are.
            let targets = etc_link_targets();
            for p in points
                .iter()
                .filter(|p| !targets.contains(&std::path::PathBuf::from(p)))
            {
                for outside_view in [
                    "/root", "/var", "/run", "/mnt", "/srv", "/media", "/opt", "/sys",
                ] {
                    assert!(
                        p != outside_view && !p.starts_with(&format!("{outside_view}/")),
                        "{user:?} {land}: mount point `{p}` is outside the view:\n{mi}"
                    );
                }
                assert!(
                    !p.starts_with(&w.home.display().to_string())
                        && !p.starts_with(&w.hcp_home.display().to_string()),
                    "{user:?} {land}: mount point `{p}`:\n{mi}"
                );
            }
            // The host's directories: absent, or holding only the way to a target of
            // `/etc`'s symlinks; `/home` only the call's home.
            let found = vw.sh(
                Some(&vw.reader),
                &v,
                "for d in /root /var /run /mnt; do find $d 2>/dev/null; done",
            );
            for line in found.lines() {
                let p = std::path::Path::new(line);
                assert!(
                    targets.iter().any(|t| t.starts_with(p) || p.starts_with(t)),
                    "{user:?} {land}: `{line}` is in the view"
                );
            }
            let home = vw.sh(Some(&vw.reader), &v, "ls -a /home 2>&1");
            let names: Vec<&str> = home
                .split_whitespace()
                .filter(|n| *n != "." && *n != "..")
                .collect();
            let want: Vec<&str> = if land == "local" { vec![] } else { vec!["hcp"] };
            assert!(
                names == want || (land == "local" && home.contains("No such file or directory")),
                "{user:?} {land}: /home holds {names:?}"
            );
        }
        assert_eq!(outside(&vw), before, "{user:?}");
    }
}

#[test]
fn a_bind_mount_of_a_secret_elsewhere_is_not_reachable() {
    if !sqlite3_or_skip() {
        return;
    }
    // Only root makes a mount; hcp then runs in a private mount namespace that holds it, so
    // the host's table is never touched.
    if !confine_common::root() {
        common::skip::skip("a bind mount needs root");
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let src = w.home.join(".ssh");
        let dst = w.root().join("srv/backup");
        std::fs::create_dir_all(&dst).unwrap();
        for land in LANDS {
            let cmd = format!("cat {}/id_ed25519 2>&1", dst.display());
            let sql = format!(".shell {cmd}");
            let mut c = std::process::Command::new("/usr/bin/unshare");
            c.args(["--mount", "--propagation", "private", "/bin/sh", "-c"])
                .arg(r#"mount --bind "$0" "$1" && shift && exec "$@""#)
                .arg(&src)
                .arg(&dst);
            // The rest as the world's user (setpriv drops root after the mount).
            let inner = vw.cw.command(&common::hcp_bin());
            c.arg(inner.get_program());
            c.args(inner.get_args());
            c.args([
                "exec",
                "--json",
                &format!("sq.{land}.read"),
                "--query",
                &sql,
            ]);
            c.env_clear();
            for (k, v) in inner.get_envs() {
                if let Some(v) = v {
                    c.env(k, v);
                }
            }
            c.env("HCP_SESSION", &vw.reader).current_dir(&w.work);
            let out = c.output().unwrap();
            let text = w.render(&out);
            assert!(out.stdout.starts_with(b"{"), "{user:?} {land}: {text}");
            assert!(
                !text.contains(SECRET),
                "{user:?} {land}: the bind mount read through: {text}"
            );
        }
    }
}

/// Where the symlinks under `/etc` lead (resolved), on the host.
fn etc_link_targets() -> Vec<std::path::PathBuf> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>, depth: usize) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.file_type().is_symlink() {
                if let Ok(t) = std::fs::canonicalize(&p) {
                    out.push(t);
                }
            } else if m.is_dir() && depth < 8 {
                walk(&p, out, depth + 1);
            }
        }
    }
    let mut out = Vec::new();
    walk(std::path::Path::new("/etc"), &mut out, 0);
    out
}
