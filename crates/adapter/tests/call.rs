//! The view of every call ([`hcp_adapter::Confinement::for_call`], RUNTIME §4, §5.1–§5.4),
//! driven as `hcp exec` drives it: a driver process (`hcp-confine-probe drive`) confines a
//! hostile child (`hcp-confine-probe …`) and prints the outcome. Each test runs as the
//! current user and, when that is root, again as `nobody` (`setpriv`), with a world (fake
//! home, store, tenant homes, workdir) that user owns.
//!
//! Every row of §5.1's table and every "not in the view" item is asserted from inside a
//! child, in each land. Where the kernel lacks a mechanism the test prints
//! `skipped: <reason>` and passes, except under `CI=true`, where it fails. No test sleeps to
//! synchronise: readiness comes through a FIFO, the end of a process through `/proc` with a
//! deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod world;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use world::*;

#[test]
fn the_root_holds_only_what_the_call_was_given() {
    for user in users() {
        let w = World::new(user);
        for land in LANDS {
            let v = w.drive(land, &["--agent"], &["list", "/"]);
            let names = listed(&v);
            assert_eq!(v["sandbox"]["filesystem"], "enforced", "{v}");
            let linked = link_parts("/");
            // The pinned bin's prefix is given to the call when it lies outside the system
            // directories: a checkout under /srv or /opt brings that name into the root.
            let given = checkout_top();
            for absent in ["root", "mnt", "media", "srv", "opt", "sys", "boot", "snap"] {
                if linked.iter().any(|l| l == absent) || given.as_deref() == Some(absent) {
                    continue;
                }
                assert!(
                    !names.iter().any(|n| n == absent),
                    "{user:?} {land}: /{absent} in {names:?}"
                );
                let v = w.drive(land, &["--agent"], &["list", &format!("/{absent}")]);
                assert_absent(&v, &format!("{user:?} {land} /{absent}"));
            }
            // /var and /run hold only what /etc's symlinks point at.
            for dir in ["/var", "/run"] {
                let v = w.drive(land, &["--agent"], &["list", dir]);
                let mut want = link_parts(&format!("{dir}/"));
                want.sort();
                want.dedup();
                if want.is_empty() {
                    assert_absent(&v, &format!("{user:?} {land} {dir}"));
                } else {
                    assert_eq!(listed(&v), want, "{user:?} {land} {dir}: {v}");
                }
            }
            // /home holds the tenant home alone (personal, brain), or the way to the
            // workdir (local).
            let v = w.drive(land, &["--agent"], &["list", "/home"]);
            if land == "local" {
                assert_absent(&v, "local /home");
            } else {
                assert_eq!(listed(&v), ["hcp"], "{user:?} {land}: {v}");
            }
            // The system directories are there, read-only.
            let v = w.drive(land, &["--agent"], &["read", "/etc/hostname"]);
            assert_ok(&v, "/etc/hostname");
            let v = w.drive(land, &["--agent"], &["write", "/usr/hcp-evil"]);
            assert_denied(&v, "write /usr");
            let v = w.drive(land, &["--agent"], &["write", "/hcp-evil"]);
            assert_denied(&v, "write /");
            assert!(!Path::new("/usr/hcp-evil").exists() && !Path::new("/hcp-evil").exists());
        }
    }
}

#[test]
fn secrets_at_paths_no_list_names_are_not_in_the_view() {
    let srv = root().then(|| {
        let d = PathBuf::from(format!("/srv/hcp-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("secret"), SECRET).unwrap();
        d
    });
    for user in users() {
        let w = World::new(user);
        for land in LANDS {
            let mut paths: Vec<String> = [
                "home/.ssh/id_ed25519",
                "home/.zz-unknown/secret",
                "home/.config/gh/hosts.yml",
                "home/.npmrc",
                "home/.bashrc",
                "hcp/state/bindings/agent/mail.json",
                "hcp/state/sessions/s.json",
                "hcp/audit/secret",
                "hcp/homes/p/principal/other/notes",
                "tenant-b/notes",
            ]
            .iter()
            .map(|p| w.p(p))
            .collect();
            if let Some(d) = &srv {
                paths.push(d.join("secret").display().to_string());
            }
            for path in &paths {
                let v = w.drive(land, &["--agent"], &["read", path]);
                assert_absent(&v, &format!("{user:?} {land} read {path}"));
            }
            // /etc's entries that are not world-readable are covered.
            let v = w.drive(land, &["--agent"], &["read", "/etc/shadow"]);
            assert!(!stdout(&v).contains("root:"), "{user:?} {land}: {v}");
            if Path::new("/etc/ssl/private").is_dir() {
                let v = w.drive(land, &["--agent"], &["list", "/etc/ssl/private"]);
                assert!(listed(&v).is_empty(), "{user:?} {land}: {v}");
            }
        }
    }
    if let Some(d) = srv {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn mountinfo_lists_only_the_view() {
    for user in users() {
        let w = World::new(user);
        for land in LANDS {
            let v = w.drive(land, &["--agent"], &["read", "/proc/self/mountinfo"]);
            assert_ok(&v, "mountinfo");
            let points: Vec<String> = stdout(&v)
                .trim_start_matches("ok ")
                .lines()
                .filter_map(|l| l.split_whitespace().nth(4).map(str::to_owned))
                .collect();
            let view: Vec<String> = v["view"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["path"].as_str().unwrap().to_owned())
                .collect();
            for p in &points {
                assert!(
                    p == "/" || view.contains(p),
                    "{user:?} {land}: mount point {p} is not an entry of the view {view:?}"
                );
            }
            assert!(
                !points
                    .iter()
                    .any(|p| p.starts_with("/oldroot") || p.starts_with("/.hcp")),
                "{points:?}"
            );
        }
    }
}

#[test]
fn the_tenant_home_is_home_and_no_other_tenants_is_there() {
    for user in users() {
        let w = World::new(user);
        for land in ["personal", "brain"] {
            let v = w.drive(land, &["--agent"], &["read", "/home/hcp/own"]);
            assert_eq!(stdout(&v).trim(), "ok mine", "{v}");
            assert_eq!(v["home"], "/home/hcp");
            // A read verb's home is read-only; a write verb's is read-write.
            let v = w.drive(land, &["--agent"], &["write", "/home/hcp/note"]);
            assert_eq!(stdout(&v).trim(), "denied EROFS", "{land} read verb: {v}");
            assert!(!w.r.join("tenant/note").exists());
            let v = w.drive(
                land,
                &["--agent", "--write-verb"],
                &["write", "/home/hcp/note"],
            );
            assert_ok(&v, "write the tenant home");
            assert!(w.r.join("tenant/note").exists());
            std::fs::remove_file(w.r.join("tenant/note")).unwrap();
            // The view's passwd names that home for the child's uid.
            let v = w.drive(land, &["--agent"], &["read", "/etc/passwd"]);
            let uid = if user == User::Nobody {
                65534
            } else {
                // SAFETY: getuid cannot fail.
                unsafe { libc::getuid() }
            };
            let line = stdout(&v)
                .trim_start_matches("ok ")
                .lines()
                .find(|l| l.split(':').nth(2) == Some(&uid.to_string()))
                .map(str::to_owned)
                .unwrap_or_default();
            assert_eq!(line.split(':').nth(5), Some("/home/hcp"), "{v}");
        }
    }
}

#[test]
fn the_tmpdir_is_the_calls_own_and_bounded() {
    for user in users() {
        let w = World::new(user);
        // A concurrent call's temporary file is not in another call's view.
        let (fifo_in_view, fifo_host) = w.fifo("personal");
        let mut holder = w
            .driver(
                "personal",
                &["--agent", "--timeout-ms", "20000"],
                &["tmp-hold", "/tmp/draft.txt", &fifo_in_view],
            )
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let ready = World::await_fifo(&fifo_host, Duration::from_secs(10));
        assert_eq!(ready.as_deref(), Some("ready\n"), "{user:?}");
        for land in LANDS {
            let v = w.drive(land, &["--agent"], &["read", "/tmp/draft.txt"]);
            assert_absent(&v, &format!("{user:?} {land} another call's /tmp"));
            let v = w.drive(land, &["--agent"], &["list", "/tmp"]);
            assert!(!listed(&v).contains(&"draft.txt".to_owned()), "{v}");
        }
        let _ = holder.kill();
        let _ = holder.wait();
        // Filling /tmp stops at `tmp_bytes`; so does /dev/shm, which shares the bound.
        for path in ["/tmp/fill", "/dev/shm/fill"] {
            let v = w.drive(
                "personal",
                &["--agent", "--tmp-bytes", "8388608"],
                &["fill", path, "67108864"],
            );
            let out = stdout(&v);
            let wrote: u64 = out
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(u64::MAX);
            assert!(out.contains("ENOSPC"), "{user:?} {path}: {v}");
            assert!(wrote <= 9 << 20, "{user:?} {path}: {v}");
        }
    }
}

#[test]
fn a_read_verb_cannot_write_its_workdir_and_a_write_verb_cannot_plant() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive("local", &["--agent"], &["write", &w.p("work/x")]);
        assert_denied(&v, "a read verb writes its workdir");
        assert!(!w.r.join("work/x").exists());
        assert_eq!(v["home"], w.p("work"));
        let v = w.drive("local", &["--agent"], &["read", &w.p("work/README")]);
        assert_ok(&v, "a read verb reads its workdir");
        let wv = ["--agent", "--write-verb"];
        let v = w.drive("local", &wv, &["write", &w.p("work/x")]);
        assert_ok(&v, "a write verb writes its workdir");
        // The protected names that exist are read-only and stay where they are.
        for (cmd, args) in [
            ("write", vec![w.p("work/.git/hooks/pre-commit")]),
            ("write", vec![w.p("work/.git/config")]),
            ("rename", vec![w.p("work/.git"), w.p("work/git-moved")]),
            (
                "rename",
                vec![w.p("work/.git/hooks"), w.p("work/hooks-moved")],
            ),
            ("remove", vec![w.p("work/.git/hooks")]),
        ] {
            let mut a = vec![cmd.to_owned()];
            a.extend(args);
            let refs: Vec<&str> = a.iter().map(String::as_str).collect();
            let v = w.drive("local", &wv, &refs);
            assert_denied(&v, &format!("{user:?} {a:?}"));
        }
        assert!(!w.r.join("work/.git/hooks/pre-commit").exists());
        assert_eq!(
            std::fs::read_to_string(w.r.join("work/.git/config")).unwrap(),
            "[core]\n"
        );
        // What did not exist is the quarantine's (viewwire); the view says what was there.
        let v = w.drive("local", &wv, &["mkdir", &w.p("work/.claude")]);
        assert_ok(&v, "a write verb makes a protected name that was absent");
        let before: Vec<(String, String)> = v["protected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["before"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert!(
            before.contains(&(".git/hooks".into(), "dir".into())),
            "{before:?}"
        );
        assert!(
            before.contains(&(".git/config".into(), "file".into())),
            "{before:?}"
        );
        assert!(
            before.contains(&(".claude".into(), "absent".into())),
            "{before:?}"
        );
    }
}

#[test]
fn a_symlink_planted_where_the_view_binds_fails_the_call() {
    for user in users() {
        let w = World::new(user);
        std::fs::remove_dir(w.r.join("work/.git/hooks")).unwrap();
        std::os::unix::fs::symlink("../../../../../../../../etc", w.r.join("work/.git/hooks"))
            .unwrap();
        let v = w.drive(
            "local",
            &["--agent", "--write-verb"],
            &["read", &w.p("work/.git/hooks/shadow")],
        );
        // A symlinked protected name is left alone, and it leads out of the view only to
        // what the view shows.
        assert!(!stdout(&v).contains("root:"), "{v}");
        let p = v["protected"].as_array().unwrap();
        assert!(
            p.iter()
                .any(|e| e["name"] == ".git/hooks" && e["before"] == "symlink")
        );
    }
}

#[test]
fn operator_paths_are_at_their_own_path_with_their_mode() {
    for user in users() {
        let w = World::new(user);
        let opts = [
            "--agent",
            "--read",
            &w.p("granted-r"),
            "--write",
            &w.p("granted-w"),
        ];
        for land in LANDS {
            let v = w.drive(land, &opts, &["read", &w.p("granted-r/data")]);
            assert_eq!(stdout(&v).trim(), "ok granted", "{v}");
            let v = w.drive(land, &opts, &["write", &w.p("granted-r/x")]);
            assert_denied(&v, "write a read-only path");
            let v = w.drive(land, &opts, &["write", &w.p(&format!("granted-w/{land}"))]);
            assert_ok(&v, "write a read-write path");
            // Siblings of a granted path are not in the view.
            let v = w.drive(land, &opts, &["read", &w.p("home/.bashrc")]);
            assert_absent(&v, "a sibling of a granted path");
        }
        // A path that holds the store is refused for every call.
        let v = w.drive("personal", &["--agent", "--read", &w.p("")], &["pid1"]);
        assert_eq!(v["code"], "sandbox_unavailable", "{v}");
    }
}

#[test]
fn the_bootstrap_pack_reads_the_store_but_not_its_credentials() {
    for user in users() {
        let w = World::new(user);
        let hide = [
            "--agent",
            "--bootstrap-hide",
            "state/bindings",
            "--bootstrap-hide",
            "audit/secret",
            "--bootstrap-hide",
            "homes",
        ];
        let v = w.drive(
            "personal",
            &hide,
            &["read", &w.p("hcp/packs/p/surface.json")],
        );
        assert_ok(&v, "bootstrap reads the store");
        for path in [
            "hcp/state/bindings/agent/mail.json",
            "hcp/audit/secret",
            "hcp/homes/p/principal/other/notes",
        ] {
            let v = w.drive("personal", &hide, &["read", &w.p(path)]);
            assert!(!stdout(&v).contains(SECRET), "{path}: {v}");
            assert_ne!(v["exit_code"], 0, "{path}: {v}");
        }
        let v = w.drive(
            "personal",
            &hide,
            &["write", &w.p("hcp/packs/p/surface.json")],
        );
        assert_denied(&v, "bootstrap writes the store");
    }
}

#[test]
fn no_capability_and_no_privilege_reaches_outside_the_call() {
    let setuid = root().then(|| {
        let d = tempfile::Builder::new()
            .prefix("hcp-setuid-")
            .tempdir_in("/tmp")
            .unwrap();
        let p = d.path().join("euid");
        std::fs::copy(PROBE, &p).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
        d
    });
    for user in users() {
        let w = World::new(user);
        for land in LANDS {
            let v = w.drive(land, &["--agent"], &["read", "/proc/self/status"]);
            let sets = hcp_adapter::capability_sets(stdout(&v).trim_start_matches("ok "));
            for (name, value) in &sets {
                // In an ordinary user's user namespace the bounding set is left as it is:
                // with no uid 0 mapped and `no_new_privs`, `execve` gives nothing from it.
                if user == User::Nobody && name == "CapBnd" {
                    continue;
                }
                assert_eq!(*value, 0, "{user:?} {land}: {name} {v}");
            }
            assert_eq!(v["sandbox"]["privileges"], "enforced");
            for cmd in ["sched-fifo", "nice-down"] {
                let v = w.drive(land, &["--agent"], &[cmd]);
                assert_denied(&v, &format!("{user:?} {land} {cmd}"));
            }
            let v = w.drive(land, &["--agent", "--host"], &["packet"]);
            assert_denied(
                &v,
                &format!("{user:?} {land} AF_PACKET with the host's network"),
            );
            let v = w.drive(land, &["--agent", "--host"], &["raw"]);
            assert_denied(&v, &format!("{user:?} {land} a raw socket"));
            if let Some(d) = &setuid {
                let prog = d.path().join("euid").display().to_string();
                let out = w
                    .driver_program(
                        land,
                        &["--agent", "--read", &d.path().display().to_string()],
                        &prog,
                    )
                    .arg("euid")
                    .output()
                    .unwrap();
                let v = parse(&out);
                let want = if user == User::Nobody { 65534 } else { 0 };
                assert_eq!(
                    stdout(&v).trim(),
                    format!("euid {want}"),
                    "{user:?} {land}: {v}"
                );
            }
        }
        // The user namespace of an ordinary user maps its own uid alone, never host 0.
        if user == User::Nobody {
            let v = w.drive("personal", &["--agent"], &["read", "/proc/self/uid_map"]);
            let map: Vec<String> = stdout(&v)
                .trim_start_matches("ok ")
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            assert_eq!(map, ["65534", "65534", "1"], "{v}");
        }
    }
}

#[test]
fn the_hosts_sockets_and_ipc_are_out_of_reach() {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_port = tcp.local_addr().unwrap().port().to_string();
    // A System V segment of the host.
    // SAFETY: integers only.
    let shm = unsafe { libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o644) };
    assert!(shm >= 0);
    let run_sock =
        root().then(|| PathBuf::from(format!("/run/hcp-test-{}.sock", std::process::id())));
    let _run_listener = run_sock
        .as_ref()
        .map(|p| std::os::unix::net::UnixListener::bind(p).unwrap());
    for user in users() {
        let w = World::new(user);
        let tmp_sock = w.r.join("tmux.sock");
        let home_sock = w.r.join("home/agent.sock");
        let _a = std::os::unix::net::UnixListener::bind(&tmp_sock).unwrap();
        let _b = std::os::unix::net::UnixListener::bind(&home_sock).unwrap();
        let mut socks = vec![tmp_sock.clone(), home_sock.clone()];
        socks.extend(run_sock.clone());
        for land in LANDS {
            for net in ["--deny", "--host"] {
                for s in &socks {
                    let v = w.drive(
                        land,
                        &["--agent", net],
                        &["unix-connect", &s.display().to_string()],
                    );
                    assert_denied(&v, &format!("{user:?} {land} {net} {}", s.display()));
                }
            }
            // With the default network, a TCP service on the host's loopback is not
            // reachable; with `host` it is.
            let v = w.drive(land, &["--agent"], &["tcp", "127.0.0.1", &tcp_port]);
            assert_denied(&v, "tcp to host loopback under deny");
            let v = w.drive(
                land,
                &["--agent", "--host"],
                &["tcp", "127.0.0.1", &tcp_port],
            );
            assert_ok(&v, "tcp under host");
            assert_eq!(v["sandbox"]["network"]["mode"], "host");
            let v = w.drive(land, &["--agent"], &["shm-list"]);
            assert_eq!(stdout(&v).trim(), "ok 0", "{user:?} {land}: {v}");
        }
        // A listed socket is reachable (and only because it is listed).
        if user == User::Me {
            let opts = ["--agent", "--write", &home_sock.display().to_string()];
            let v = w.drive(
                "personal",
                &opts,
                &["unix-connect", &home_sock.display().to_string()],
            );
            assert_ok(&v, "a listed socket");
        }
    }
    // SAFETY: removing the segment made above.
    unsafe { libc::shmctl(shm, libc::IPC_RMID, std::ptr::null_mut()) };
    if let Some(p) = run_sock {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn network_deny_is_total_and_tells_hcp() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let udp_port = udp.local_addr().unwrap().port().to_string();
    for user in users() {
        let w = World::new(user);
        let name = format!("hcp-test-{}", std::process::id());
        let _abs = {
            use std::os::linux::net::SocketAddrExt;
            let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
            std::os::unix::net::UnixListener::bind_addr(&a).unwrap()
        };
        let attempts: Vec<Vec<&str>> = vec![
            vec!["udp", "127.0.0.1", &udp_port],
            vec!["resolve", "hcp-test.invalid"],
            vec!["raw"],
            vec!["netlink"],
            vec!["packet"],
            vec!["vsock"],
            vec!["inet6"],
            vec!["io-uring"],
            vec!["abstract", &name],
        ];
        for land in LANDS {
            for a in &attempts {
                let v = w.drive(land, &["--agent"], a);
                assert_ne!(v["exit_code"], 0, "{user:?} {land} {a:?}: {v}");
                assert_eq!(v["sandbox"]["network"]["mode"], "deny");
                assert_eq!(v["sandbox"]["network"]["enforced"], true);
            }
            let v = w.drive(land, &["--agent"], &["udp", "127.0.0.1", &udp_port]);
            assert!(v["socket_attempts"].as_u64().unwrap_or(0) >= 1, "{v}");
            let v = w.drive(land, &["--agent"], &["socketpair"]);
            assert_ok(&v, "socketpair under deny");
            assert_eq!(v["socket_attempts"], 0);
        }
    }
}

#[test]
fn allow_runs_in_a_network_namespace_whose_listener_hcp_holds() {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_port = tcp.local_addr().unwrap().port().to_string();
    let port = hcp_adapter::EGRESS_PORT.to_string();
    for user in users() {
        let w = World::new(user);
        for land in LANDS {
            let opts = ["--agent", "--allow", "--echo-egress"];
            let v = w.drive(land, &opts, &["tcp-echo", "127.0.0.1", &port, "hello"]);
            assert_eq!(stdout(&v).trim(), "ok echo hello", "{user:?} {land}: {v}");
            assert_eq!(v["sandbox"]["network"]["mode"], "allow");
            // The host's loopback is another namespace's: nothing answers there.
            let v = w.drive(land, &opts, &["tcp", "127.0.0.1", &tcp_port]);
            assert_denied(&v, "the host's loopback from a namespace of its own");
            // Unix and other families stay refused.
            for a in [&["vsock"][..], &["netlink"], &["packet"]] {
                let v = w.drive(land, &opts, a);
                assert_denied(&v, &format!("{a:?} under allow"));
            }
        }
    }
}

#[test]
fn the_nested_call_marker_survives_setsid_double_fork_env_and_a_dead_parent() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive("personal", &["--agent"], &["marker"]);
        assert_eq!(stdout(&v), "inside\n", "{v}");
        let v = w.drive("personal", &[], &["marker"]);
        assert_eq!(stdout(&v), "outside\n", "the owner's call: {v}");
        let (fifo, host) = w.fifo("personal");
        let mut call = w
            .driver(
                "personal",
                &["--agent", "--timeout-ms", "1500"],
                &["detached-marker", &fifo],
            )
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let answer = World::await_fifo(&host, Duration::from_secs(5));
        let _ = call.wait();
        assert_eq!(answer.as_deref(), Some("inside\n"), "{user:?}");
    }
}

#[test]
fn no_descendant_outlives_the_call() {
    for user in users() {
        let w = World::new(user);
        let (fifo, _) = w.fifo("personal");
        // A double-forked daemon (it waits for a reader of the FIFO that never comes):
        // the call's child exits at once, and the daemon with it.
        let t = token("daemon");
        let v = w.drive("personal", &["--agent"], &["daemon", &t, &fifo]);
        assert_ok(&v, "daemon");
        assert!(
            gone_within(&t, Duration::from_secs(1)).is_some(),
            "{user:?}: daemon {t} survived the call"
        );
        let t = token("setsid");
        let v = w.drive(
            "personal",
            &["--agent", "--timeout-ms", "300"],
            &["setsid-sleep", &t, "/dev/null"],
        );
        assert_eq!(v["timed_out"], true, "{v}");
        assert!(
            gone_within(&t, Duration::from_secs(1)).is_some(),
            "{user:?}: setsid sleeper {t} survived"
        );
    }
}

#[test]
fn a_killed_driver_takes_every_descendant_with_it() {
    for user in users() {
        let w = World::new(user);
        for land in LANDS {
            let (fifo, host) = w.fifo(land);
            for how in ["daemon", "setsid-sleep"] {
                let t = token(how);
                let mut driver = w
                    .driver(
                        land,
                        &["--agent", "--timeout-ms", "20000"],
                        &[how, &t, &fifo, "stay"],
                    )
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                let ready = World::await_fifo(&host, Duration::from_secs(10));
                assert_eq!(ready.as_deref(), Some("ready\n"), "{user:?} {land} {how}");
                assert!(live_with(&t) >= 1);
                // SAFETY: integers only; the driver is our child.
                unsafe { libc::kill(driver.id() as i32, libc::SIGKILL) };
                let _ = driver.wait();
                assert!(
                    gone_within(&t, Duration::from_secs(1)).is_some(),
                    "{user:?} {land} {how}: {t} outlived a killed driver by a second"
                );
            }
        }
    }
}

#[test]
fn the_child_cannot_kill_outside_its_call() {
    for user in users() {
        let w = World::new(user);
        let me = std::process::id().to_string();
        let v = w.drive("personal", &["--agent"], &["kill", &me]);
        assert_denied(&v, "kill the test process");
    }
}

#[test]
fn a_fork_bomb_is_bounded() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive(
            "personal",
            &["--agent", "--processes", "30"],
            &["fork-bomb", "200"],
        );
        if user == User::Me && root() && v["sandbox"]["processes"] != "enforced" {
            skip_or_fail(&format!("as root: {}", v["sandbox"]["processes"]));
            continue;
        }
        let out = stdout(&v);
        let made: usize = out
            .split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(999);
        assert!(made < 30, "{user:?}: {out}");
        assert!(out.contains("EAGAIN"), "{out}");
        let v = w.drive("personal", &["--agent"], &["fork-bomb", "100"]);
        assert!(stdout(&v).starts_with("forked 100 all"), "{v}");
    }
}

/// The delegated cgroup an ordinary user's memory bound is made in (CI makes one and
/// names it in `HCP_TEST_CGROUP`).
fn delegated_cgroup() -> Option<String> {
    std::env::var("HCP_TEST_CGROUP")
        .ok()
        .filter(|p| !p.is_empty())
}

#[test]
fn the_memory_bound_holds_for_all_the_calls_processes_together() {
    for user in users() {
        let w = World::new(user);
        let mut opts = vec![
            "--agent".to_owned(),
            "--memory".into(),
            (96u64 << 20).to_string(),
        ];
        if user == User::Nobody || !root() {
            match delegated_cgroup() {
                Some(c) => opts.extend(["--cgroup".to_owned(), c]),
                None => {
                    skip_or_fail(
                        "no delegated cgroup for an ordinary user (set HCP_TEST_CGROUP to a memory cgroup it may write)",
                    );
                    continue;
                }
            }
        }
        let refs: Vec<&str> = opts.iter().map(String::as_str).collect();
        // Four children of 48 MiB each: each alone fits, together they do not.
        let v = w.drive(
            "personal",
            &refs,
            &["mem-hog", "4", &(48u64 << 20).to_string()],
        );
        if v["sandbox"]["memory"] != "enforced" {
            skip_or_fail(&format!("{user:?}: {}", v["sandbox"]["memory"]));
            continue;
        }
        assert_eq!(v["memory_exceeded"], true, "{user:?}: {v}");
        assert_ne!(stdout(&v).trim(), "ok", "{user:?}: {v}");
        let v = w.drive(
            "personal",
            &refs,
            &["mem-hog", "1", &(16u64 << 20).to_string()],
        );
        assert_eq!(stdout(&v).trim(), "ok", "{user:?}: {v}");
        assert_eq!(v["memory_exceeded"], false, "{user:?}: {v}");
    }
}

#[test]
fn init_of_the_pid_namespace_is_still_ended_on_timeout() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive(
            "personal",
            &["--agent", "--timeout-ms", "200"],
            &["setsid-sleep", &token("t"), "/dev/null"],
        );
        assert_eq!(v["timed_out"], true, "{v}");
        assert_eq!(v["signal"], libc::SIGKILL, "{v}");
    }
}

#[test]
fn programs_run_in_the_namespaces_as_their_user() {
    for user in users() {
        let w = World::new(user);
        let v = w.drive("personal", &["--agent"], &["pid1"]);
        let uid = if user == User::Nobody {
            65534
        } else {
            // SAFETY: getuid cannot fail.
            unsafe { libc::getuid() }
        };
        assert!(stdout(&v).starts_with("pid 1 "), "{v}");
        assert!(stdout(&v).ends_with(&format!("uid {uid}\n")), "{v}");
        let v = w.drive("personal", &["--agent"], &["list", "/proc"]);
        let pids = listed(&v)
            .iter()
            .filter(|n| n.parse::<u32>().is_ok())
            .count();
        assert!(pids <= 2, "{user:?}: {v}");
        // git's ownership check (`safe.directory`) passes in the user namespace.
        let Some(git) = ["/usr/bin/git", "/usr/local/bin/git"]
            .into_iter()
            .find(|p| Path::new(p).exists())
        else {
            skip_or_fail("no git on this machine");
            continue;
        };
        let repo = w.r.join("work");
        let init = Command::new(git)
            .args(["init", "-q"])
            .arg(&repo)
            .status()
            .unwrap();
        assert!(init.success());
        if user == User::Nobody {
            Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(&repo)
                .status()
                .unwrap();
        }
        let out = w
            .driver_program("local", &["--agent"], git)
            .args(["status", "--porcelain"])
            .output()
            .unwrap();
        let v = parse(&out);
        assert_eq!(v["exit_code"], 0, "{user:?}: {v}");
    }
}

#[test]
fn without_namespaces_an_agent_is_refused_and_the_owner_runs_unconfined() {
    use hcp_adapter::{
        CallPolicy, CallSandbox, Confinement, KernelSupport, Network, ProcessMechanism,
        ResourceLimits, pin_bin, verify_bin,
    };
    let w = World::new(User::Me);
    let mut support = KernelSupport::probe();
    support.processes = ProcessMechanism::Subreaper("as if the kernel had no namespaces".into());
    support.pids_cgroup = Ok(None);
    support.memory_cgroup = Ok(None);
    let bin = verify_bin(&pin_bin(Path::new(PROBE)).unwrap()).unwrap();
    let (home, hcp, work, tenant) = (
        w.r.join("home"),
        w.r.join("hcp"),
        w.r.join("work"),
        w.r.join("tenant"),
    );
    let homes = [home];
    let etc = hcp_adapter::EtcIndex::default();
    let call = CallSandbox {
        land: hcp_model::Land::Personal,
        caller: hcp_model::principal::Kind::Session,
        writes: false,
        workdir: &work,
        tenant_home: Some(&tenant),
        bin: bin.path(),
        interpreters: &[],
        hcp_home: &hcp,
        bootstrap: None,
        homes: &homes,
        read: &[],
        write: &[],
        protect_in_workdir: &[],
        etc: &etc,
    };
    let mut policy = CallPolicy {
        require: false,
        network: Network::Deny,
        limits: ResourceLimits {
            cpu_seconds: 10,
            address_space_bytes: 1 << 32,
            open_files: 256,
            file_size_bytes: 1 << 20,
            processes: 4096,
            tmp_bytes: 1 << 20,
            memory_bytes: 1 << 30,
        },
        cgroup: None,
    };
    let e = Confinement::for_call_with(&support, &call, &policy).unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.code().exit_status()),
        ("sandbox_unavailable", 77),
        "{e}"
    );
    let owner = CallSandbox {
        caller: hcp_model::principal::Kind::Owner,
        ..call
    };
    let (confine, report) = Confinement::for_call_with(&support, &owner, &policy).unwrap();
    assert!(confine.view().is_none() && !confine.has_pid_namespace());
    assert_eq!(report.summary(), "unconfined");
    assert!(
        report.field.filesystem.as_str().starts_with("no view"),
        "{report:?}"
    );
    assert!(
        report.field.memory.as_str().starts_with("per_process: "),
        "{report:?}"
    );
    policy.require = true;
    let e = Confinement::for_call_with(&support, &owner, &policy).unwrap_err();
    assert_eq!(e.code(), "sandbox_unavailable");
}

/// The first name below `/` of the directory the test bins were built in (the checkout's
/// target directory), which the view holds as the pinned bin's prefix.
fn checkout_top() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    exe.components()
        .nth(1)
        .and_then(|c| c.as_os_str().to_str().map(str::to_owned))
}
