//! No descendant outlives its call (RUNTIME §5 "Confinement of every land",
//! **Processes**).
//!
//! Where the kernel lets `hcp` make one, the child starts in a PID namespace of its own
//! (`CLONE_NEWPID`; as an ordinary user together with a user namespace whose maps the
//! child writes for itself, keeping the user's own uid and gid so that ownership checks
//! such as git's `safe.directory` still pass). The child is the namespace's init:
//!
//! - when it exits, the kernel kills every process left in the namespace, however it
//!   got there (`setsid`, double forks, daemons), before its exit is reported;
//! - it has the parent-death signal `SIGKILL`, so when `hcp` is killed, the namespace
//!   ends with it, within the kernel's own teardown (milliseconds);
//! - as an init, it gets only the signals it handles (and `SIGKILL`): on timeout and
//!   cancel, `SIGTERM` reaches the rest of the process group and the init only if it
//!   handles it, and `SIGKILL` follows after the grace, as before. A program that never
//!   handles `SIGTERM` is ended by that `SIGKILL`.
//!
//! Elsewhere (no user namespaces for this user, no `CAP_SYS_ADMIN` as root) `hcp` is
//! the child subreaper (`PR_SET_CHILD_SUBREAPER`): whatever leaves the child's process
//! group or loses its parent is re-parented to `hcp`, which ends every such process when
//! the call ends ([`end_orphans`]). When `hcp` itself is killed there, they survive;
//! [`ProcessMechanism`] says which mechanism holds, for `hcp doctor`. An orphan cannot
//! be told apart by call, so in a process that runs calls concurrently (`hcp mcp`) the
//! end of one call also ends the orphans of the others; their direct children are kept.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How the calls of this process keep their descendants from outliving them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessMechanism {
    /// A PID namespace per call, made directly (root with `CAP_SYS_ADMIN`).
    PidNamespace,
    /// A PID namespace inside a user namespace per call (an ordinary user).
    UserPidNamespace,
    /// `hcp` as child subreaper ends them at the end of the call, but not when it is
    /// killed; why there is no PID namespace.
    Subreaper(String),
}

impl ProcessMechanism {
    /// What holds, lowercase (for `hcp doctor`).
    pub fn describe(&self) -> String {
        match self {
            Self::PidNamespace => "a pid namespace per call".into(),
            Self::UserPidNamespace => "a user and pid namespace per call".into(),
            Self::Subreaper(why) => format!(
                "hcp as child subreaper, ending descendants when the call ends but not when hcp is killed ({why})"
            ),
        }
    }

    /// Whether a killed `hcp` takes every descendant with it.
    pub fn survives_sigkill_of_hcp(&self) -> bool {
        !matches!(self, Self::Subreaper(_))
    }
}

/// Whether the calling process holds `cap` in its effective set (`capget`).
pub(crate) fn has_capability(cap: u32) -> bool {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut h = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let mut d = [Data::default(); 2];
    // SAFETY: capget writes two `Data` entries for version 3.
    let r = unsafe { libc::syscall(libc::SYS_capget, &raw mut h, d.as_mut_ptr()) };
    if r != 0 {
        return false;
    }
    let (word, bit) = ((cap / 32) as usize, cap % 32);
    d.get(word).is_some_and(|w| w.effective & (1 << bit) != 0)
}

/// `CAP_SYS_ADMIN`.
const CAP_SYS_ADMIN: u32 = 21;

fn read_sysctl(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The mechanism this process will use ([`ProcessMechanism`]), from cheap checks only
/// (the effective uid and capabilities, three sysctls); the spawn itself falls back to no
/// namespace if the kernel refuses after all.
pub fn process_mechanism() -> ProcessMechanism {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        if has_capability(CAP_SYS_ADMIN) {
            return ProcessMechanism::PidNamespace;
        }
        return ProcessMechanism::Subreaper(
            "running as root without `CAP_SYS_ADMIN`, which a pid namespace needs".into(),
        );
    }
    if read_sysctl("/proc/sys/user/max_user_namespaces") == Some(0) {
        return ProcessMechanism::Subreaper("`user.max_user_namespaces` is 0".into());
    }
    if read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
        return ProcessMechanism::Subreaper(
            "`kernel.unprivileged_userns_clone` is 0 (no user namespaces for ordinary users)"
                .into(),
        );
    }
    if read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1) {
        return ProcessMechanism::Subreaper(
            "`kernel.apparmor_restrict_unprivileged_userns` is 1 (AppArmor forbids user namespaces to unconfined programs)"
                .into(),
        );
    }
    if !std::path::Path::new("/proc/self/ns/user").exists() {
        return ProcessMechanism::Subreaper("the kernel has no user namespaces".into());
    }
    ProcessMechanism::UserPidNamespace
}

/// Makes the calling process the child subreaper (`PR_SET_CHILD_SUBREAPER`), once per
/// process: orphaned descendants of its calls are re-parented to it rather than to init.
pub fn become_subreaper() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: integer arguments only.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        }
    });
}

/// The direct children the adapter is running now (their calls end them); every other
/// child of this process is an orphan of a call, re-parented here.
static RUNNING: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

/// Records a started child as one of a running call.
pub(crate) fn register(pid: libc::pid_t) {
    if let Ok(mut v) = RUNNING.lock() {
        v.push(pid);
    }
}

/// Forgets a child once reaped.
pub(crate) fn unregister(pid: libc::pid_t) {
    if let Ok(mut v) = RUNNING.lock() {
        v.retain(|&p| p != pid);
    }
}

/// The children of this process, from `/proc/self/task/*/children`.
fn children() -> io::Result<Vec<libc::pid_t>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")?.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<libc::pid_t>().ok()),
            );
        }
    }
    Ok(out)
}

/// Whether process `pid` runs under a seccomp filter (`Seccomp: 2` in its status), as
/// every descendant of a confined call does and other children of `hcp` (or of a test
/// harness) do not.
fn under_seccomp(pid: libc::pid_t) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

/// Ends every child of this process that is not a running call's direct child (an
/// orphan that `setsid`, a double fork or a dead parent left with `hcp`, the subreaper,
/// recognised by the seccomp filter every confined call's descendants carry),
/// then the orphans those leave in turn, and reaps them; at most `budget` long. Returns
/// how many were ended. Used where the call had no PID namespace.
pub fn end_orphans(budget: Duration) -> usize {
    let start = Instant::now();
    let mut ended = 0;
    loop {
        let running = RUNNING.lock().map(|v| v.clone()).unwrap_or_default();
        let orphans: Vec<libc::pid_t> = children()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| !running.contains(p) && under_seccomp(*p))
            .collect();
        if orphans.is_empty() || start.elapsed() >= budget {
            return ended;
        }
        for &p in &orphans {
            // SAFETY: a child of ours, unreaped, so the pid is still this process.
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        for &p in &orphans {
            let mut st = 0;
            // SAFETY: waitpid on our own child writes the status into a local.
            unsafe {
                libc::waitpid(p, &mut st, 0);
            }
            ended += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_mechanism_is_named() {
        let m = process_mechanism();
        assert!(!m.describe().is_empty());
        // This machine's kernel (CI and development) offers pid namespaces.
        if std::env::var("CI").as_deref() == Ok("true") {
            assert!(m.survives_sigkill_of_hcp(), "{m:?}");
        }
    }
}
