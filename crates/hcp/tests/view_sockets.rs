//! Issue 23, "owner authority through the owner's own sockets" (RUNTIME §5.1, §5.3): through
//! the built `hcp`, as root and as `nobody`, in `personal`, `brain` and `local` land, with
//! the default network, a call reaches none of the owner's servers: the owner's tmux
//! server (`tmux -L` under `/tmp`), an ssh-agent, a Unix socket in `/tmp`, in `/run` and
//! in `~`, a TCP service on the host's loopback. Each server sees no connection, and
//! nothing outside the call changes.

#![allow(clippy::unwrap_used)]

mod common;
mod confine_common;
mod view_common;

use confine_common::{As, assert_denied, users};
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use view_common::{LANDS, Vw, outside, sqlite3_or_skip, verb};

/// The owner's tmux server on socket `name` (`tmux -L`), ended on drop.
struct Tmux<'a> {
    vw: &'a Vw,
    name: String,
}

impl<'a> Tmux<'a> {
    fn start(vw: &'a Vw, name: &str) -> Option<Self> {
        if !Path::new("/usr/bin/tmux").exists() {
            common::skip::skip("no tmux (`apt-get install -y tmux`)");
            return None;
        }
        let out = vw
            .cw
            .command(Path::new("/usr/bin/tmux"))
            .args(["-L", name, "new-session", "-d", "-s", "owner", "sleep 600"])
            .output()
            .unwrap();
        assert!(out.status.success(), "tmux: {}", vw.w().render(&out));
        Some(Self {
            vw,
            name: name.to_owned(),
        })
    }

    /// The server's socket (`$TMUX_TMPDIR` unset: `/tmp/tmux-UID/NAME`).
    fn socket(&self) -> PathBuf {
        let uid = match self.vw.cw.user {
            As::Me => unsafe_uid(),
            As::Nobody => confine_common::NOBODY,
        };
        PathBuf::from(format!("/tmp/tmux-{uid}/{}", self.name))
    }
}

impl Drop for Tmux<'_> {
    fn drop(&mut self) {
        let _ = self
            .vw
            .cw
            .command(Path::new("/usr/bin/tmux"))
            .args(["-L", &self.name, "kill-server"])
            .output();
    }
}

fn unsafe_uid() -> u32 {
    // SAFETY: getuid cannot fail.
    unsafe { libc::getuid() }
}

/// A Unix socket listening at `path`, connectable by every user outside a call.
fn listen_unix(path: &Path) -> std::os::unix::net::UnixListener {
    let _ = std::fs::remove_file(path);
    let l = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

fn no_connection_on(l: &std::os::unix::net::UnixListener, what: &str) {
    match l.accept() {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("{what}: the owner's socket got a connection: {other:?}"),
    }
}

#[test]
fn the_owners_tmux_server_is_unreachable() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let name = format!("hcp-view-{}", std::process::id());
        let Some(tmux) = Tmux::start(&vw, &name) else {
            return;
        };
        let before = outside(&vw);
        let marker = w.root().join("srv/tmux-ran");
        for land in LANDS {
            // The issue's own escape: a window of the owner's tmux, unconfined.
            let cmd = format!(
                "tmux -L {name} new-window -d 'touch {}' 2>&1; echo rc=$?",
                marker.display()
            );
            let said = vw.sh(Some(&vw.reader), &verb(land, "read"), &cmd);
            assert!(!said.contains("rc=0"), "{user:?} {land}: {said}");
            let sock = tmux.socket().display().to_string();
            let v = vw.probe(Some(&vw.reader), land, &["unix-connect", &sock]);
            assert_denied(&v, &format!("{user:?} {land} unix-connect {sock}"));
        }
        assert!(!marker.exists(), "{user:?}: the owner's tmux ran a command");
        assert_eq!(outside(&vw), before, "{user:?}");
    }
}

#[test]
fn an_ssh_agent_and_sockets_in_tmp_run_and_home_are_unreachable() {
    if !sqlite3_or_skip() {
        return;
    }
    for user in users() {
        let vw = Vw::new(user);
        let w = vw.w();
        let mut socks: Vec<PathBuf> = vec![
            w.root().join("owner.sock"),
            w.home.join(".emacs.d/server.sock"),
        ];
        if confine_common::root() {
            socks.push(PathBuf::from(format!(
                "/run/hcp-view-{}.sock",
                std::process::id()
            )));
        }
        std::fs::create_dir_all(w.home.join(".emacs.d")).unwrap();
        let listeners: Vec<_> = socks.iter().map(|p| listen_unix(p)).collect();
        // An ssh-agent of the owner's (it daemonises once its socket is bound).
        let agent_sock = w.root().join("agent.sock");
        let agent = vw
            .cw
            .command(Path::new("/usr/bin/ssh-agent"))
            .arg("-a")
            .arg(&agent_sock)
            .output();
        let agent_pid: Option<i32> = agent.as_ref().ok().and_then(|o| {
            String::from_utf8_lossy(&o.stdout).split(';').find_map(|p| {
                p.trim()
                    .strip_prefix("SSH_AGENT_PID=")
                    .and_then(|n| n.parse().ok())
            })
        });
        if agent_pid.is_none() {
            common::skip::skip("no ssh-agent (`apt-get install -y openssh-client`)");
        }
        let before = outside(&vw);
        for land in LANDS {
            for (sock, l) in socks.iter().zip(&listeners) {
                let s = sock.display().to_string();
                let v = vw.probe(Some(&vw.reader), land, &["unix-connect", &s]);
                assert_denied(&v, &format!("{user:?} {land} unix-connect {s}"));
                no_connection_on(l, &format!("{user:?} {land} {s}"));
            }
            if agent_pid.is_some() {
                let cmd = format!(
                    "SSH_AUTH_SOCK={} ssh-add -l 2>&1; echo rc=$?",
                    agent_sock.display()
                );
                let said = vw.sh(Some(&vw.reader), &verb(land, "read"), &cmd);
                assert!(
                    !said.contains("no identities")
                        && !said.contains("rc=0")
                        && !said.contains("rc=1\n"),
                    "{user:?} {land}: the agent answered: {said}"
                );
            }
        }
        assert_eq!(outside(&vw), before, "{user:?}");
        if let Some(pid) = agent_pid {
            // SAFETY: integers only.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        for s in &socks {
            let _ = std::fs::remove_file(s);
        }
    }
}

#[test]
fn a_tcp_service_on_host_loopback_is_unreachable_with_the_default_network() {
    for user in users() {
        let vw = Vw::new(user);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let before = outside(&vw);
        for land in LANDS {
            let v = vw.probe(Some(&vw.reader), land, &["tcp", "127.0.0.1", &port]);
            assert_denied(&v, &format!("{user:?} {land} tcp 127.0.0.1:{port}"));
            assert_eq!(
                v["sandbox"]["network"]["mode"], "deny",
                "{user:?} {land}: {v}"
            );
            match l.accept() {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => panic!("{user:?} {land}: the service got a connection: {other:?}"),
            }
        }
        assert_eq!(outside(&vw), before, "{user:?}");
    }
}
