//! A hostile review of the wall (issue 23; RUNTIME §5.1–§5.4): what an agent holding a grant
//! and a CLI's shell escape would try against its view, driven as `hcp exec` drives a call
//! (`hcp-confine-probe drive`), as the current user and, when that is root, as `nobody`.
//!
//! - the race between the parent's plan and the child's binds in trees an agent can write:
//!   a tenant home, a workdir, its `.git` and protected names, an operator's path swapped
//!   for a symlink or a FIFO after the plan (`drive --swap`);
//! - protected names reached through a symlink or a `gitdir:` file;
//! - a child with every capability gone: a user namespace of its own (and what it would
//!   open), `setns`, `open_by_handle_at`, `mount`, `ptrace`, writes under `/proc`;
//! - `/proc/self/mountinfo` and `/proc/*/root` naming the paths behind the view;
//! - a bin whose directory holds more than the bin; a socket named as a read-only path;
//! - the CPU limit of a child that is its PID namespace's init.
//!
//! No test sleeps to synchronise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod world;

use std::path::Path;
use world::*;

/// The call failed before its program ran, without a word of what the swap pointed at.
fn assert_failed(v: &serde_json::Value, what: &str) {
    assert_eq!(v["code"], "sandbox_failed", "{what}: {v}");
    assert!(!v.to_string().contains(SECRET), "{what}: {v}");
}

#[test]
fn a_tree_swapped_between_the_plan_and_the_binds_fails_the_call() {
    for user in users() {
        let w = World::new(user);
        // The tenant home, for another tenant's.
        let v = w.drive(
            "personal",
            &[
                "--agent",
                "--swap",
                &format!("{}={}", w.p("tenant"), w.p("tenant-b")),
            ],
            &["read", "/home/hcp/notes"],
        );
        assert_failed(&v, &format!("{user:?} tenant home"));
        let w = World::new(user);
        // The workdir, for the owner's home.
        let v = w.drive(
            "local",
            &[
                "--agent",
                "--swap",
                &format!("{}={}", w.p("work"), w.p("home")),
            ],
            &["read", &w.p("work/.npmrc")],
        );
        assert_failed(&v, &format!("{user:?} workdir"));
        // `.git` for the store, `.git/hooks` for the owner's home: a write verb's protected
        // names.
        for (name, target) in [(".git", "hcp"), (".git/hooks", "home")] {
            let w = World::new(user);
            let at = w.p(&format!("work/{name}"));
            let v = w.drive(
                "local",
                &[
                    "--agent",
                    "--write-verb",
                    "--swap",
                    &format!("{at}={}", w.p(target)),
                ],
                &["write", &format!("{at}/planted")],
            );
            assert_failed(&v, &format!("{user:?} {name}"));
            assert!(!w.r.join(target).join("planted").exists());
        }
        // An operator's read-only path, for the owner's keys.
        let w = World::new(user);
        let v = w.drive(
            "personal",
            &[
                "--agent",
                "--read",
                &w.p("granted-r"),
                "--swap",
                &format!("{}={}", w.p("granted-r"), w.p("home/.ssh")),
            ],
            &["read", &w.p("granted-r/id_ed25519")],
        );
        assert_failed(&v, &format!("{user:?} read path"));
        // `.git/config` for a FIFO: what the plan bound as a file is a file, or the call
        // fails (a FIFO would hang whoever opens it).
        let w = World::new(user);
        let config = w.p("work/.git/config");
        let v = w.drive(
            "local",
            &[
                "--agent",
                "--write-verb",
                "--swap-fifo",
                &config,
                "--timeout-ms",
                "5000",
            ],
            &["write", &config],
        );
        assert_failed(&v, &format!("{user:?} fifo"));
    }
}

#[test]
fn protected_names_reached_through_a_symlink_or_a_gitdir_file_stay_read_only() {
    for user in users() {
        // `.git/hooks` a symlink to a directory of the workdir (a shared hooks directory).
        let w = World::new(user);
        std::fs::create_dir(w.r.join("work/githooks")).unwrap();
        std::fs::remove_dir(w.r.join("work/.git/hooks")).unwrap();
        std::os::unix::fs::symlink("../githooks", w.r.join("work/.git/hooks")).unwrap();
        if user == User::Nobody {
            chown_nobody(&w.r.join("work"));
        }
        let wv = ["--agent", "--write-verb"];
        for (cmd, args) in [
            ("write", vec![w.p("work/.git/hooks/pre-commit")]),
            ("write", vec![w.p("work/githooks/pre-commit")]),
            ("remove", vec![w.p("work/.git/hooks")]),
            ("rename", vec![w.p("work/.git/hooks"), w.p("work/moved")]),
            ("remove", vec![w.p("work/githooks")]),
        ] {
            let v = w.drive("local", &wv, &argv(cmd, &args));
            assert_denied(&v, &format!("{user:?} hooks symlink: {cmd} {args:?}"));
        }
        assert!(!w.r.join("work/githooks/pre-commit").exists());
        // `.git` itself a symlink to the repository's directory in the workdir.
        let w = World::new(user);
        std::fs::rename(w.r.join("work/.git"), w.r.join("work/repo.git")).unwrap();
        std::os::unix::fs::symlink("repo.git", w.r.join("work/.git")).unwrap();
        if user == User::Nobody {
            chown_nobody(&w.r.join("work"));
        }
        for (cmd, args) in [
            ("write", vec![w.p("work/.git/hooks/pre-commit")]),
            ("write", vec![w.p("work/repo.git/hooks/pre-commit")]),
            ("write", vec![w.p("work/repo.git/config")]),
            ("remove", vec![w.p("work/.git")]),
            ("rename", vec![w.p("work/repo.git"), w.p("work/moved")]),
        ] {
            let v = w.drive("local", &wv, &argv(cmd, &args));
            assert_denied(&v, &format!("{user:?} .git symlink: {cmd} {args:?}"));
        }
        let v = w.drive("local", &wv, &["write", &w.p("work/repo.git/objects-x")]);
        assert_ok(&v, "the rest of a symlinked .git stays writable");
        assert_eq!(
            std::fs::read_to_string(w.r.join("work/repo.git/config")).unwrap(),
            "[core]\n"
        );
        // `.git` a `gitdir:` file (a linked worktree, a submodule): it names where the
        // owner's git finds its config and hooks.
        let w = World::new(user);
        std::fs::remove_dir_all(w.r.join("work/.git")).unwrap();
        std::fs::write(w.r.join("work/.git"), "gitdir: /elsewhere\n").unwrap();
        if user == User::Nobody {
            chown_nobody(&w.r.join("work"));
        }
        for (cmd, args) in [
            ("write", vec![w.p("work/.git")]),
            ("remove", vec![w.p("work/.git")]),
            ("rename", vec![w.p("work/.git"), w.p("work/moved")]),
        ] {
            let v = w.drive("local", &wv, &argv(cmd, &args));
            assert_denied(&v, &format!("{user:?} gitdir file: {cmd} {args:?}"));
        }
        assert_eq!(
            std::fs::read_to_string(w.r.join("work/.git")).unwrap(),
            "gitdir: /elsewhere\n"
        );
    }
}

fn argv<'a>(cmd: &'a str, args: &'a [String]) -> Vec<&'a str> {
    std::iter::once(cmd)
        .chain(args.iter().map(String::as_str))
        .collect()
}

fn chown_nobody(p: &Path) {
    let st = std::process::Command::new("chown")
        .args(["-hR", "65534:65534"])
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn a_child_without_capabilities_cannot_leave_or_undo_its_view() {
    for user in users() {
        let w = World::new(user);
        for land in LANDS {
            let a = ["--agent"];
            for cmd in [
                vec!["unshare-user"],
                vec!["clone-user"],
                vec!["userns-undo", "/etc/shadow"],
                vec!["setns-mnt"],
                vec!["mount-tmpfs", "/tmp"],
                vec!["handle", "/etc/hostname"],
                vec!["ptrace-attach", "1"],
            ] {
                let v = w.drive(land, &a, &cmd);
                assert_denied(&v, &format!("{user:?} {land} {cmd:?}"));
            }
            // clone3's flags are out of a seccomp filter's reach: the filter answers ENOSYS,
            // and libc falls back to clone(2), whose flags it can read.
            let v = w.drive(land, &a, &["clone3"]);
            assert_eq!(stdout(&v).trim(), "denied ENOSYS", "{user:?} {land}: {v}");
            // Nothing under /proc is written, by whatever path it is reached.
            for path in [
                "/proc/self/comm",
                "/proc/self/coredump_filter",
                "/proc/sys/kernel/hostname",
                "/proc/self/root/proc/sys/kernel/hostname",
                "/proc/1/root/proc/sys/kernel/hostname",
                "/proc/thread-self/root/proc/sys/vm/drop_caches",
                "/proc/sysrq-trigger",
            ] {
                let v = w.drive(land, &a, &["write", path]);
                assert_denied(&v, &format!("{user:?} {land} write {path}"));
            }
            // A program writes through /dev/stdout all the same (the pipe's mount counts).
            let out = w
                .driver_program(land, &a, "/bin/sh")
                .args(["-c", "echo through > /dev/stdout"])
                .output()
                .unwrap();
            let v = parse(&out);
            assert_eq!(stdout(&v), "through\n", "{user:?} {land}: {v}");
        }
    }
}

#[test]
fn mountinfo_names_the_paths_behind_the_view_and_none_is_reachable() {
    for user in users() {
        let w = World::new(user);
        for land in ["personal", "local"] {
            let v = w.drive(land, &["--agent"], &["read", "/proc/self/mountinfo"]);
            let info = stdout(&v);
            // The kernel prints a bind's source within its filesystem: allowed.
            let behind = if land == "local" { "work" } else { "tenant" };
            let source = w.p(behind);
            assert!(info.contains(&source), "{user:?} {land}: {info}");
            for via in [
                "",
                "/proc/self/root",
                "/proc/1/root",
                "/proc/thread-self/root",
            ] {
                let secret = format!("{via}{}", w.p("tenant-b/notes"));
                let v = w.drive(land, &["--agent"], &["read", &secret]);
                assert_absent(&v, &format!("{user:?} {land} {secret}"));
                let store = format!("{via}{}", w.p("hcp/audit/secret"));
                let v = w.drive(land, &["--agent"], &["read", &store]);
                assert_absent(&v, &format!("{user:?} {land} {store}"));
            }
            if land == "personal" {
                // The tenant home at its host path is not in the view either: only at
                // /home/hcp.
                let v = w.drive(land, &["--agent"], &["read", &w.p("tenant/own")]);
                assert_absent(&v, &format!("{user:?} the tenant home at its host path"));
            }
        }
    }
}

#[test]
fn a_bins_directory_in_a_home_shows_the_bin_alone() {
    for user in users() {
        let w = World::new(user);
        for dir in ["home/.local/bin", "home/bin"] {
            let bin = w.r.join(dir);
            std::fs::create_dir_all(&bin).unwrap();
            std::fs::copy(PROBE, bin.join("tool")).unwrap();
            std::fs::write(bin.join("deploy"), format!("#!/bin/sh\nTOKEN={SECRET}\n")).unwrap();
            std::os::unix::fs::symlink("../../.ssh/id_ed25519", bin.join("key")).ok();
            if user == User::Nobody {
                chown_nobody(&w.r.join("home"));
            }
            let tool = bin.join("tool").display().to_string();
            for sibling in ["deploy", "key"] {
                let out = w
                    .driver_program("personal", &["--agent"], &tool)
                    .args(["read", &bin.join(sibling).display().to_string()])
                    .output()
                    .unwrap();
                let v = parse(&out);
                assert_absent(&v, &format!("{user:?} {dir}/{sibling}"));
            }
            let out = w
                .driver_program("personal", &["--agent"], &tool)
                .args(["read", &tool])
                .output()
                .unwrap();
            assert_ok(&parse(&out), &format!("{user:?} {dir}: the bin itself"));
        }
    }
}

#[test]
fn a_socket_is_never_a_read_only_path() {
    for user in users() {
        let w = World::new(user);
        let sock = w.r.join("granted-r/agent.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        if user == User::Nobody {
            chown_nobody(&sock);
        }
        let s = sock.display().to_string();
        // Named read-only, a socket would still take `connect` (a read-only mount does not
        // stop it) once the pack is given any socket: it is refused, with the key to use.
        let v = w.drive(
            "personal",
            &["--agent", "--read", &s],
            &["unix-connect", &s],
        );
        assert_eq!(v["code"], "sandbox_unavailable", "{user:?}: {v}");
        assert!(v["error"].as_str().unwrap().contains("socket"), "{v}");
        // Listed read-write, it is reachable; a socket beside it is not in the view.
        let other = w.r.join("granted-w/other.sock");
        let _o = std::os::unix::net::UnixListener::bind(&other).unwrap();
        let v = w.drive(
            "personal",
            &["--agent", "--write", &s],
            &["unix-connect", &s],
        );
        if user == User::Me {
            assert_ok(&v, "a listed socket");
        }
        let o = other.display().to_string();
        let v = w.drive(
            "personal",
            &["--agent", "--write", &s],
            &["unix-connect", &o],
        );
        assert_absent(&v, &format!("{user:?} a socket beside the listed one"));
    }
}

#[test]
fn the_cpu_limit_ends_a_child_that_is_its_namespaces_init() {
    // As init of its PID namespace the child is spared SIGXCPU (it does not handle it); the
    // hard limit, a second later, is SIGKILL, which the kernel always delivers.
    for user in users() {
        let w = World::new(user);
        let v = w.drive("personal", &["--agent", "--cpu", "1"], &["spin"]);
        assert_eq!(v["pid_namespace"], true, "{v}");
        assert_eq!(v["signal"], libc::SIGKILL, "{user:?}: {v}");
        assert_eq!(v["exit_code"], 128 + libc::SIGKILL, "{user:?}: {v}");
        assert_eq!(v["timed_out"], false, "{user:?}: {v}");
    }
}
