//! A fork bomb bounded also as root (RUNTIME §5 "Confinement of every land",
//! **Processes**).
//!
//! `RLIMIT_NPROC` binds every user but root: the kernel exempts uid 0 of the initial
//! user namespace. A `pids` cgroup's `pids.max` binds root too. As root, each call gets
//! a cgroup of its own, `hcp-<pid>-<n>` beneath the cgroup `hcp` runs in, with
//! `pids.max` = the call's `processes` limit; the child enters it between `clone` and
//! `execve`, and it is removed after the call, when it is empty ([`CallCgroup`]). (On
//! cgroup v1 the call cgroups lie directly under the `pids` hierarchy's root.) What a
//! killed `hcp` left is ended and removed by the next call of a root `hcp`
//! ([`sweep`]). Where the pids controller is on cgroup v1 (a `pids` hierarchy) that one
//! is used, else cgroup v2 when the pids controller is enabled for the children of
//! `hcp`'s cgroup ([`pids_cgroup_base`]).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The directory in which this process may make call cgroups with a `pids.max`, or why
/// there is none. Reads `/proc/self/cgroup` and `/proc/self/mountinfo`.
///
/// # Errors
/// Why no pids cgroup can be made here (lowercase).
pub fn pids_cgroup_base() -> Result<PathBuf, String> {
    // The common cgroup v1 layout first: a call cgroup need not lie beneath hcp's own,
    // and reading `/proc/self/cgroup` costs more than the check (about 50 µs).
    let usual = Path::new("/sys/fs/cgroup/pids");
    if usual.join("cgroup.procs").exists() {
        return writable(usual.to_path_buf());
    }
    pids_cgroup_base_slow()
}

fn pids_cgroup_base_slow() -> Result<PathBuf, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let mounts = || std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // cgroup v1: a hierarchy with the pids controller.
    let v1_path = own.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
        ctl.split(',').any(|c| c == "pids").then(|| path.to_owned())
    });
    let mount_of = |want: &dyn Fn(&str, &str) -> bool| {
        mounts().lines().find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mut post = post.split_whitespace();
            let fstype = post.next()?;
            let _source = post.next()?;
            let opts = post.next().unwrap_or("");
            let mountpoint = pre.split_whitespace().nth(4)?;
            want(fstype, opts).then(|| PathBuf::from(mountpoint))
        })
    };
    if let Some(path) = v1_path {
        let mp = mount_of(&|t, o| t == "cgroup" && o.split(',').any(|x| x == "pids"))
            .ok_or("the pids cgroup hierarchy is not mounted")?;
        let base = mp.join(path.trim_start_matches('/'));
        return writable(base);
    }
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("no pids cgroup: neither a v1 pids hierarchy nor cgroup v2")?;
    let mp = mount_of(&|t, _| t == "cgroup2").ok_or("cgroup v2 is not mounted")?;
    let own_dir = mp.join(path.trim_start_matches('/'));
    // The pids controller must be enabled for our cgroup's children. Our own cgroup
    // holds processes (ours), so v2 lets us make children only where the controller is
    // already delegated to them.
    let subtree =
        std::fs::read_to_string(own_dir.join("cgroup.subtree_control")).unwrap_or_default();
    if !subtree.split_whitespace().any(|c| c == "pids") {
        return Err(format!(
            "the pids controller is not enabled for the children of `{}` (cgroup v2)",
            own_dir.display()
        ));
    }
    writable(own_dir)
}

fn writable(dir: PathBuf) -> Result<PathBuf, String> {
    use nix::unistd::{AccessFlags, access};
    access(&dir, AccessFlags::W_OK | AccessFlags::X_OK)
        .map(|()| dir.clone())
        .map_err(|e| format!("cannot make a cgroup in `{}`: {e}", dir.display()))
}

const PREFIX: &str = "hcp-";

/// One call's cgroup: made before the spawn, removed on drop (after its processes are
/// gone; any still there are killed first).
#[derive(Debug)]
pub struct CallCgroup {
    dir: PathBuf,
    /// `<dir>/cgroup.procs`, which the child writes `0` to.
    pub(crate) procs: CString,
}

impl CallCgroup {
    /// Makes `hcp-<pid>-<n>` under `base` with `pids.max` = `max`.
    ///
    /// # Errors
    /// The OS error of `mkdir` or of writing `pids.max`.
    pub fn create(base: &Path, max: u64) -> io::Result<Self> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{PREFIX}{}-{n}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // A leftover of a killed process with our pid: empty it.
                kill_members(&dir);
            }
            Err(e) => return Err(e),
        }
        let made = Self {
            procs: CString::new(dir.join("cgroup.procs").as_os_str().as_bytes())
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
            dir,
        };
        std::fs::write(made.dir.join("pids.max"), max.to_string())?;
        Ok(made)
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for CallCgroup {
    fn drop(&mut self) {
        if std::fs::remove_dir(&self.dir).is_err() {
            kill_members(&self.dir);
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Kills every process in the cgroup at `dir` until it is empty (bounded).
fn kill_members(dir: &Path) {
    for _ in 0..100 {
        let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        let pids: Vec<i32> = procs
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if pids.is_empty() {
            return;
        }
        for p in pids {
            // SAFETY: integers only. The pid is a member of our call's cgroup.
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Ends the processes of, and removes, the call cgroups under `base` that processes no
/// longer running left (`hcp-<pid>-<n>` whose `<pid>` is gone): what a killed `hcp`
/// leaves. Returns how many were removed.
pub fn sweep(base: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|r| r.split_once('-'))
            .and_then(|(p, _)| p.parse::<i32>().ok())
        else {
            continue;
        };
        let dead = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH);
        if dead {
            kill_members(&e.path());
            removed += usize::from(std::fs::remove_dir(e.path()).is_ok());
        }
    }
    removed
}
