//! The mechanisms' floor of a view (issue 23's cost goal: "or the honest floor of the
//! mechanisms measured beside it"): a child made with raw system calls and nothing else —
//! `clone(CLONE_VM | CLONE_VFORK)` into new mount, PID and IPC namespaces (and a user
//! namespace for an ordinary user, a network namespace for the `netns` arms), a tmpfs
//! root, one bind per bind of the call's view (the same host paths at the same places,
//! made read-only by one recursive `mount_setattr` of the old tree, as the view does),
//! `pivot_root`, the old root detached, the root remounted read-only, `execve` of the same
//! program. No seccomp, no Landlock, no capability drop, no limits, no cgroup, no `/proc`,
//! no signal reset, no pipes; the plan is made in the parent, the child never allocates.
//!
//! [`Floor::raw`] is the same child without namespaces or mounts (a bare `clone` +
//! `execve`), so that `floor − raw` is what the kernel's mechanisms cost alone.
//!
//! [`Floor::full_of_view`] adds the rest of what a call's child is given, each as the
//! system calls alone (`hcp_adapter::floor_parts`): a `/proc` of its own, eight
//! `setrlimit`s, the parent-death signal, every capability set emptied (the bounding set
//! too, as root), `PR_SET_NO_NEW_PRIVS`, Landlock's scopes, hcp's seccomp program of a
//! non-owner `deny` call with its listener (closed at once: no channel to hcp); and, as
//! root, the call's two cgroups, made in the parent for each run (a pids cgroup with
//! `pids.max`; a memory cgroup with its limits and the OOM event registered), joined by the
//! child with one `write` each, removed after it. Still no pipes, no signal reset, no
//! masks inside `/proc`.

use hcp_adapter::view::{EntryMode, View};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// One step of the floor's plan, in the new root.
enum Step {
    Mkdir(CString),
    Touch(CString),
    Symlink(CString, CString),
    Bind(CString, CString),
}

/// The mechanisms of [`Floor::full_of_view`] after the view, prepared in the parent.
struct Full {
    rlimits: [(libc::__rlimit_resource_t, libc::rlimit); 8],
    bounding: Option<u32>,
    landlock: Option<std::os::fd::RawFd>,
    prog: &'static [hcp_adapter::floor_parts::SockFilter],
    /// As root: where the pids and the memory cgroup of each run are made.
    pids: Option<std::path::PathBuf>,
    memory: Option<std::path::PathBuf>,
    /// This run's `cgroup.procs` descriptors (-1: none), set by the parent before `clone`.
    procs: std::cell::Cell<[libc::c_int; 2]>,
}

/// One run's cgroups, made by the parent as a call's are (see the module docs).
struct RunCgroups {
    dirs: Vec<std::path::PathBuf>,
    fds: Vec<std::fs::File>,
}

impl RunCgroups {
    fn make(full: &Full) -> Self {
        use std::os::fd::AsRawFd;
        let mut r = Self {
            dirs: Vec::new(),
            fds: Vec::new(),
        };
        let name = format!("hcp-floor-{}", std::process::id());
        if let Some(base) = &full.pids {
            let dir = base.join(&name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("pids.max"), "1024").unwrap();
            r.join(dir);
        }
        if let Some(base) = &full.memory {
            let dir = base.join(&name);
            std::fs::create_dir(&dir).unwrap();
            let v = (2u64 << 30).to_string();
            std::fs::write(dir.join("memory.limit_in_bytes"), &v).unwrap();
            let _ = std::fs::write(dir.join("memory.memsw.limit_in_bytes"), &v);
            let _ = std::fs::write(dir.join("memory.swappiness"), "0");
            let control = std::fs::File::open(dir.join("memory.oom_control")).unwrap();
            // SAFETY: integers; the descriptor is closed with `control` below.
            let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            assert!(efd >= 0);
            std::fs::write(
                dir.join("cgroup.event_control"),
                format!("{efd} {}", control.as_raw_fd()),
            )
            .unwrap();
            // SAFETY: ours.
            unsafe { libc::close(efd) };
            r.join(dir);
        }
        let mut procs = [-1; 2];
        for (slot, f) in procs.iter_mut().zip(&r.fds) {
            *slot = f.as_raw_fd();
        }
        full.procs.set(procs);
        r
    }

    fn join(&mut self, dir: std::path::PathBuf) {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .unwrap();
        self.fds.push(f);
        self.dirs.push(dir);
    }
}

impl Drop for RunCgroups {
    fn drop(&mut self) {
        self.fds.clear();
        for d in &self.dirs {
            std::fs::remove_dir(d).unwrap();
        }
    }
}

/// A prepared floor child: what it mounts, and the program it runs.
pub struct Floor {
    full: Option<Full>,
    flags: libc::c_int,
    /// The host directory the root tmpfs is mounted on (`None`: the raw spawn).
    base: Option<CString>,
    steps: Vec<Step>,
    /// `/proc/self/uid_map` and `gid_map` lines, in a user namespace.
    maps: Option<(CString, CString)>,
    cwd: CString,
    bin: CString,
    argv: [*const libc::c_char; 2],
    envp: [*const libc::c_char; 1],
    stack: Stack,
    binds: usize,
    view_mount_calls: usize,
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

impl Floor {
    /// The bare spawn: `clone(CLONE_VM | CLONE_VFORK)` and `execve(bin)`.
    pub fn raw(bin: &Path) -> Self {
        Self::new(bin, libc::SIGCHLD, None, Vec::new(), Path::new("/"))
    }

    /// The floor of `view` (its binds, its symlinks, its home as the working directory),
    /// with a network namespace when `netns`.
    pub fn of_view(view: &View, bin: &Path, base: &Path, netns: bool) -> Self {
        let mut steps = Vec::new();
        let mut made: Vec<std::path::PathBuf> = Vec::new();
        let mut mkdirs = |at: &Path, steps: &mut Vec<Step>| {
            for a in at.ancestors().collect::<Vec<_>>().into_iter().rev().skip(1) {
                if !made.iter().any(|m| m == a) {
                    made.push(a.to_owned());
                    steps.push(Step::Mkdir(c(a)));
                }
            }
        };
        // The view's own empty file and directory, as the covers' sources.
        steps.push(Step::Mkdir(c(Path::new("/.floor"))));
        steps.push(Step::Touch(c(Path::new("/.floor/void"))));
        steps.push(Step::Mkdir(c(Path::new("/.floor/empty"))));
        for e in view.describe() {
            if e.path.starts_with("/proc") {
                continue; // the floor mounts no /proc
            }
            let dir_at = |p: &Path| std::fs::metadata(p).map(|m| m.is_dir()).unwrap_or(false);
            match (&e.mode, &e.source) {
                (EntryMode::ReadOnly | EntryMode::ReadWrite | EntryMode::Device, Some(src)) => {
                    let is_dir = dir_at(src);
                    if is_dir {
                        mkdirs(&e.path, &mut steps);
                    } else {
                        if let Some(p) = e.path.parent() {
                            mkdirs(p, &mut steps);
                        }
                        steps.push(Step::Touch(c(&e.path)));
                    }
                    steps.push(Step::Bind(
                        c(&Path::new("/oldroot").join(src.strip_prefix("/").unwrap())),
                        c(&e.path),
                    ));
                }
                (EntryMode::Masked | EntryMode::Generated, _) => {
                    let src = if dir_at(&e.path) {
                        "/.floor/empty"
                    } else {
                        "/.floor/void"
                    };
                    steps.push(Step::Bind(c(Path::new(src)), c(&e.path)));
                }
                (EntryMode::Symlink(target), _) => {
                    if let Some(p) = e.path.parent() {
                        mkdirs(p, &mut steps);
                    }
                    steps.push(Step::Symlink(c(target), c(&e.path)));
                }
                (EntryMode::Tmpfs, _) => {
                    // `/tmp` stays writable: its own mount of the root tmpfs, as in the view.
                    mkdirs(&e.path, &mut steps);
                    steps.push(Step::Bind(c(&e.path), c(&e.path)));
                }
                _ => {}
            }
        }
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let mut flags = libc::SIGCHLD | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
        if !root {
            flags |= libc::CLONE_NEWUSER;
        }
        if netns {
            flags |= libc::CLONE_NEWNET;
        }
        let mut f = Self::new(bin, flags, Some(c(base)), steps, view.home());
        f.view_mount_calls = view.mount_calls();
        if !root {
            // SAFETY: getuid and getgid cannot fail.
            let (u, g) = unsafe { (libc::getuid(), libc::getgid()) };
            f.maps = Some((
                CString::new(format!("{u} {u} 1\n")).unwrap(),
                CString::new(format!("{g} {g} 1\n")).unwrap(),
            ));
        }
        f
    }

    /// [`Floor::of_view`] (no network namespace) with the rest of the child's mechanisms
    /// (see the module docs).
    pub fn full_of_view(view: &View, bin: &Path, base: &Path) -> Self {
        let mut f = Self::of_view(view, bin, base, false);
        f.steps.push(Step::Mkdir(c(Path::new("/proc"))));
        let resources = [
            libc::RLIMIT_CPU,
            libc::RLIMIT_FSIZE,
            libc::RLIMIT_NOFILE,
            libc::RLIMIT_NPROC,
            libc::RLIMIT_AS,
            libc::RLIMIT_CORE,
            libc::RLIMIT_MEMLOCK,
            libc::RLIMIT_MSGQUEUE,
        ];
        let rlimits = resources.map(|r| {
            let mut l = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes the struct on our stack.
            assert_eq!(unsafe { libc::getrlimit(r, &raw mut l) }, 0);
            (r, l)
        });
        // SAFETY: geteuid cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        let k = hcp_adapter::KernelSupport::probe();
        f.full = Some(Full {
            rlimits,
            bounding: root.then(hcp_adapter::floor_parts::last_cap),
            landlock: hcp_adapter::floor_parts::scope_ruleset(),
            prog: hcp_adapter::floor_parts::deny_program(),
            pids: k.pids_cgroup.ok().flatten(),
            memory: k.memory_cgroup.ok().flatten(),
            procs: std::cell::Cell::new([-1; 2]),
        });
        f
    }

    fn new(
        bin: &Path,
        flags: libc::c_int,
        base: Option<CString>,
        steps: Vec<Step>,
        cwd: &Path,
    ) -> Self {
        let bin = c(bin);
        let binds = steps.iter().filter(|s| matches!(s, Step::Bind(..))).count();
        let mut f = Self {
            full: None,
            flags,
            base,
            steps,
            maps: None,
            cwd: c(cwd),
            argv: [std::ptr::null(); 2],
            envp: [std::ptr::null()],
            bin,
            stack: Stack::new(),
            binds,
            view_mount_calls: 0,
        };
        f.argv[0] = f.bin.as_ptr();
        f
    }

    /// How many binds the child makes (the view's binds, its covers and `/tmp`).
    pub fn binds(&self) -> usize {
        self.binds
    }

    /// How many mount system calls the view this floor stands for makes
    /// ([`View::mount_calls`]; 0 for [`Floor::raw`]).
    pub fn view_mount_calls(&self) -> usize {
        self.view_mount_calls
    }

    /// Runs the child once and waits for it; panics when a step failed (its exit status
    /// names the step: 100 + the index, 90–99 the fixed steps).
    pub fn run(&self) {
        let cgroups = self.full.as_ref().map(RunCgroups::make);
        let arg = std::ptr::from_ref(self).cast_mut().cast();
        // SAFETY: CLONE_VM | CLONE_VFORK: this thread is suspended until the child has
        // exec'd or exited, so `self` and the stack outlive what the child uses.
        let pid = unsafe {
            libc::clone(
                child,
                self.stack.top(),
                self.flags | libc::CLONE_VM | libc::CLONE_VFORK,
                arg,
            )
        };
        assert!(pid > 0, "clone: {}", std::io::Error::last_os_error());
        let mut status = 0;
        // SAFETY: our child.
        let r = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        assert_eq!(r, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the floor's child failed: status {status:#x} (exit {}: {})",
            libc::WEXITSTATUS(status),
            self.describe(libc::WEXITSTATUS(status))
        );
        drop(cgroups);
    }

    fn describe(&self, code: i32) -> String {
        match usize::try_from(code - 100)
            .ok()
            .and_then(|i| self.steps.get(i))
        {
            Some(Step::Mkdir(p)) => format!("mkdir {p:?}"),
            Some(Step::Touch(p)) => format!("touch {p:?}"),
            Some(Step::Symlink(t, p)) => format!("symlink {p:?} -> {t:?}"),
            Some(Step::Bind(s, d)) => format!("bind {s:?} at {d:?}"),
            None => format!("fixed step {code}"),
        }
    }
}

/// Writes `data` to `path` (async-signal-safe).
unsafe fn write_file(path: &CStr, data: &[u8]) -> bool {
    // SAFETY: a NUL-terminated path; `data` lives.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, data.as_ptr().cast(), data.len()) == data.len() as isize;
        libc::close(fd);
        ok
    }
}

extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Floor`, alive and unchanged while it is suspended.
    let f: &Floor = unsafe { &*arg.cast::<Floor>() };
    // SAFETY (each call below): NUL-terminated strings of the parent's; integers.
    unsafe {
        let fail = |code: i32| -> ! { libc::_exit(code) };
        if let Some(full) = &f.full {
            for fd in full.procs.get() {
                if fd >= 0 && libc::write(fd, c"0".as_ptr().cast(), 1) != 1 {
                    fail(79);
                }
            }
        }
        if let Some((u, g)) = &f.maps
            && !(write_file(c"/proc/self/setgroups", b"deny")
                && write_file(c"/proc/self/uid_map", u.as_bytes())
                && write_file(c"/proc/self/gid_map", g.as_bytes()))
        {
            fail(90);
        }
        if let Some(base) = &f.base {
            let null = std::ptr::null();
            if libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_SLAVE | libc::MS_REC,
                null.cast(),
            ) != 0
            {
                fail(91);
            }
            if libc::mount(
                c"tmpfs".as_ptr(),
                base.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"size=67108864,mode=0755".as_ptr().cast(),
            ) != 0
            {
                fail(92);
            }
            if libc::chdir(base.as_ptr()) != 0
                || libc::mkdir(c"oldroot".as_ptr(), 0) != 0
                || libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c"oldroot".as_ptr()) != 0
                || libc::chdir(c"/".as_ptr()) != 0
            {
                fail(93);
            }
            // The old tree read-only in one call: every bind taken from it is read-only.
            let attr: [u64; 4] = [0x1 | 0x2 | 0x4, 0, 0, 0];
            if libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                c"/oldroot".as_ptr(),
                0x8000, // AT_RECURSIVE
                attr.as_ptr(),
                std::mem::size_of_val(&attr),
            ) != 0
            {
                fail(94);
            }
            for (i, s) in f.steps.iter().enumerate() {
                let ok = match s {
                    Step::Mkdir(p) => {
                        libc::mkdir(p.as_ptr(), 0o755) == 0
                            || *libc::__errno_location() == libc::EEXIST
                            || *libc::__errno_location() == libc::EROFS
                    }
                    Step::Touch(p) => {
                        let fd = libc::open(
                            p.as_ptr(),
                            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                            0,
                        );
                        if fd >= 0 {
                            libc::close(fd);
                        }
                        true
                    }
                    Step::Symlink(t, p) => {
                        libc::symlink(t.as_ptr(), p.as_ptr());
                        true
                    }
                    Step::Bind(src, dst) => {
                        libc::mount(
                            src.as_ptr(),
                            dst.as_ptr(),
                            null,
                            libc::MS_BIND | libc::MS_REC,
                            null.cast(),
                        ) == 0
                    }
                };
                if !ok {
                    fail(100 + i32::try_from(i).unwrap_or(100));
                }
            }
            if f.full.is_some()
                && libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    null.cast(),
                ) != 0
            {
                fail(89);
            }
            if libc::umount2(c"/oldroot".as_ptr(), libc::MNT_DETACH) != 0
                || libc::rmdir(c"/oldroot".as_ptr()) != 0
            {
                fail(95);
            }
            if libc::mount(
                null,
                c"/".as_ptr(),
                null,
                libc::MS_REMOUNT
                    | libc::MS_BIND
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV,
                null.cast(),
            ) != 0
            {
                fail(96);
            }
        }
        if libc::chdir(f.cwd.as_ptr()) != 0 {
            fail(97);
        }
        if let Some(full) = &f.full {
            for (r, l) in &full.rlimits {
                if libc::setrlimit(*r, l) != 0 {
                    fail(80);
                }
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                fail(81);
            }
            if hcp_adapter::floor_parts::drop_caps(full.bounding) != 0 {
                fail(82);
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                fail(83);
            }
            if let Some(fd) = full.landlock
                && libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) != 0
            {
                fail(84);
            }
            let listener = hcp_adapter::floor_parts::install(full.prog, true);
            if listener < 0 {
                fail(85);
            }
            libc::close(listener);
        }
        libc::execve(f.bin.as_ptr(), f.argv.as_ptr(), f.envp.as_ptr());
        fail(98)
    }
}

/// The child's stack: 256 KiB of anonymous memory, made once.
struct Stack {
    base: *mut libc::c_void,
    len: usize,
}

impl Stack {
    fn new() -> Self {
        let len = 256 << 10;
        // SAFETY: an anonymous private mapping.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        Self { base, len }
    }

    fn top(&self) -> *mut libc::c_void {
        // SAFETY: within the mapping (its end; the stack grows down).
        unsafe { self.base.cast::<u8>().add(self.len).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.base, self.len) };
    }
}
