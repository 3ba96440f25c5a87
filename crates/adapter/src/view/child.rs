//! The view's mount steps as the child makes them, between `clone` and `execve` (RUNTIME
//! §5.1). Every path is a C string the parent prepared; the child only makes
//! async-signal-safe system calls and never allocates.
//!
//! The sequence ([`apply`]), after the call's namespaces exist (mount, PID, IPC and, for an
//! ordinary user, user):
//!
//! 1. the whole tree is made a slave of the host's, so nothing made here propagates out;
//! 2. a tmpfs (the call's, bounded) is mounted on a host directory and made the root with
//!    `pivot_root`, the old root kept at `/oldroot`;
//! 3. the [`Op`]s of the plan: directories, symlinks and files of the skeleton, the staging
//!    directory of the view's own files bound onto the host's `/sys` in the old tree, the
//!    device nodes, then `mount_setattr(AT_RECURSIVE)` makes the whole old tree (the stage
//!    with it) read-only, `nosuid` and `nodev` (one call: every bind taken from it after is
//!    read-only without a call of its own), the call's `/proc`, then the binds of the given
//!    paths, each at its own path (`MS_BIND | MS_REC`: a user namespace admits only
//!    recursive binds), the read-write ones made writable again, the covers (bound from
//!    the stage);
//! 4. the old root is detached (the stage with it) and its directory removed; the root is
//!    remounted read-only.
//!
//! A bind of a path an agent could have written (the workdir, a protected name, a tenant
//! home, an operator's path) is resolved without following any symlink (`openat2` with
//! `RESOLVE_NO_SYMLINKS`, then `open_tree` and `move_mount`): a symlink planted in such a
//! tree fails the call instead of binding what it points at.

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

/// `MOUNT_ATTR_RDONLY`.
pub(crate) const ATTR_RDONLY: u64 = 0x1;
/// `MOUNT_ATTR_NOSUID`.
pub(crate) const ATTR_NOSUID: u64 = 0x2;
/// `MOUNT_ATTR_NODEV`.
pub(crate) const ATTR_NODEV: u64 = 0x4;

/// A fact the child learned while building the view, for the report.
pub(crate) const FACT_NO_PROC: u32 = 1;

const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

/// `struct mount_attr`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `struct open_how`.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// How a bind is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct How {
    /// Resolve source and target without following symlinks (a tree an agent may write).
    pub nofollow: bool,
    /// A source that does not exist is skipped, not a failure.
    pub optional: bool,
    /// Mount attributes set after the bind (on its top mount only).
    pub set: u64,
    /// Mount attributes cleared after the bind (`MOUNT_ATTR_RDONLY` for a read-write one).
    pub clr: u64,
    /// With `nofollow`: the type the source must be (`S_IFDIR`, `S_IFREG`, `S_IFLNK`,
    /// `S_IFSOCK`), or 0 for any. A source of another type (a FIFO or a symlink swapped in
    /// since the plan) fails the bind with `ENOTDIR`, `EISDIR` or `ELOOP`.
    pub kind: u32,
}

impl How {
    /// A bind of a tree only root writes: one `mount`, no attribute of its own.
    pub(crate) const PLAIN: Self = Self {
        nofollow: false,
        optional: false,
        set: 0,
        clr: 0,
        kind: 0,
    };

    /// [`How::PLAIN`] whose source may be missing.
    pub(crate) const OPTIONAL: Self = Self {
        optional: true,
        ..Self::PLAIN
    };

    /// A bind through descriptors that follow no symlink, of a source of type `kind`.
    pub(crate) const fn nofollow(kind: u32) -> Self {
        Self {
            nofollow: true,
            kind,
            ..Self::PLAIN
        }
    }
}

/// One step of the plan. Paths are absolute in the new root (`/usr`), or in the old one
/// (`/oldroot/usr`) for a bind's source.
#[derive(Debug)]
pub(crate) enum Op {
    /// `mkdir` with a mode (an existing directory is fine; the umask is 0 meanwhile).
    Mkdir(CString, libc::mode_t),
    /// An empty regular file (a mount point), mode 0.
    Touch(CString),
    /// `symlink(target, path)`.
    Symlink { target: CString, path: CString },
    /// A file holding `data`, mode 0644.
    Write { path: CString, data: Vec<u8> },
    /// A bind of `src` at `dst`.
    Bind {
        src: CString,
        dst: CString,
        how: How,
    },
    /// `mount_setattr` of the mount at `path`.
    Attr {
        path: CString,
        set: u64,
        clr: u64,
        recursive: bool,
    },
    /// A new proc at `path`; where the kernel refuses it, the steps up to [`Op::ProcEnd`]
    /// are skipped and the child notes [`FACT_NO_PROC`].
    Proc(CString),
    /// The end of the steps that need the call's `/proc`.
    ProcEnd,
    /// `umount2(path, MNT_DETACH)`.
    Detach(CString),
    /// `unlink`.
    Unlink(CString),
    /// `rmdir`.
    Rmdir(CString),
}

impl Op {
    /// What the step does, for an error message.
    pub(crate) fn describe(&self) -> String {
        let l = |c: &CString| c.to_string_lossy().into_owned();
        match self {
            Self::Mkdir(p, _) => format!("making the directory `{}`", l(p)),
            Self::Touch(p) => format!("making the file `{}`", l(p)),
            Self::Symlink { path, .. } => format!("making the symlink `{}`", l(path)),
            Self::Write { path, .. } => format!("writing `{}`", l(path)),
            Self::Bind { src, dst, .. } => format!(
                "binding `{}` at `{}`",
                l(src).trim_start_matches("/oldroot"),
                l(dst)
            ),
            Self::Attr { path, .. } => format!("setting the mount attributes of `{}`", l(path)),
            Self::Proc(p) => format!("mounting the call's proc at `{}`", l(p)),
            Self::ProcEnd => "the call's proc".to_owned(),
            Self::Detach(p) => format!("detaching `{}`", l(p)),
            Self::Unlink(p) => format!("removing `{}`", l(p)),
            Self::Rmdir(p) => format!("removing `{}`", l(p)),
        }
    }

    /// Mount-type system calls this step makes.
    pub(crate) fn mount_calls(&self) -> usize {
        match self {
            Self::Bind { how, .. } => {
                let attr = usize::from(how.set | how.clr != 0);
                if how.nofollow { 2 + attr } else { 1 + attr }
            }
            Self::Attr { .. } | Self::Proc(_) | Self::Detach(_) => 1,
            _ => 0,
        }
    }
}

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EINVAL)
}

/// 0, or the errno of a failed call returning `r`.
fn check(r: libc::c_long) -> i32 {
    if r < 0 { errno() } else { 0 }
}

fn mount_setattr(dirfd: i32, path: &CStr, flags: libc::c_uint, set: u64, clr: u64) -> i32 {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: a NUL-terminated path and a struct on this stack; the kernel reads both.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dirfd,
            path.as_ptr(),
            flags,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// `openat2(path, O_PATH | O_NOFOLLOW | O_CLOEXEC, RESOLVE_NO_SYMLINKS)`: a descriptor or
/// `-errno`. A symlink on the way fails (`ELOOP`); a symlink at the end is opened itself.
fn open_nofollow(path: &CStr) -> i32 {
    let how = OpenHow {
        flags: (libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS,
    };
    // SAFETY: a NUL-terminated path and a struct on this stack.
    let r = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &raw const how,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if r < 0 { -errno() } else { r as i32 }
}

fn close(fd: i32) {
    // SAFETY: a descriptor this child opened.
    unsafe {
        libc::close(fd);
    }
}

/// 0 when the file `fd` refers to is of type `kind` (`S_IF*`, 0: any), else the errno a
/// path of the wrong type would have met: `ENOTDIR`, `EISDIR`, `ELOOP`, `EINVAL`.
fn check_kind(fd: i32, kind: u32) -> i32 {
    if kind == 0 {
        return 0;
    }
    // SAFETY: a struct on this stack the kernel fills; a descriptor we hold.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &raw mut st) } != 0 {
        return errno();
    }
    let got = st.st_mode & libc::S_IFMT;
    if got == kind {
        return 0;
    }
    match (kind, got) {
        (libc::S_IFDIR, _) => libc::ENOTDIR,
        (_, libc::S_IFDIR) => libc::EISDIR,
        (_, libc::S_IFLNK) => libc::ELOOP,
        _ => libc::EINVAL,
    }
}

/// A bind through descriptors, never following a symlink (see the module docs).
fn bind_nofollow(src: &CStr, dst: &CStr, how: How) -> i32 {
    let s = open_nofollow(src);
    if s < 0 {
        return -s;
    }
    let e = check_kind(s, how.kind);
    if e != 0 {
        close(s);
        return e;
    }
    // SAFETY: a descriptor we hold and an empty path; the flags clone the tree.
    let tree = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            s,
            c"".as_ptr(),
            OPEN_TREE_CLONE
                | libc::O_CLOEXEC as libc::c_uint
                | libc::AT_EMPTY_PATH as libc::c_uint
                | AT_RECURSIVE,
        )
    };
    let e = errno();
    close(s);
    if tree < 0 {
        return e;
    }
    let tree = tree as i32;
    if how.set | how.clr != 0 {
        let e = mount_setattr(
            tree,
            c"",
            libc::AT_EMPTY_PATH as libc::c_uint,
            how.set,
            how.clr,
        );
        if e != 0 {
            close(tree);
            return e;
        }
    }
    let t = open_nofollow(dst);
    if t < 0 {
        close(tree);
        return -t;
    }
    // SAFETY: two descriptors we hold and empty paths.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            t,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        )
    };
    let e = check(r);
    close(t);
    close(tree);
    e
}

fn bind(src: &CStr, dst: &CStr, how: How) -> i32 {
    if how.nofollow {
        return bind_nofollow(src, dst, how);
    }
    // SAFETY: NUL-terminated paths; no data.
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return errno();
    }
    if how.set | how.clr != 0 {
        return mount_setattr(libc::AT_FDCWD, dst, 0, how.set, how.clr);
    }
    0
}

fn run_op(op: &Op) -> i32 {
    // SAFETY (each call below): NUL-terminated paths and buffers the parent owns and
    // keeps alive until `clone` returns; integers otherwise.
    unsafe {
        match op {
            Op::Mkdir(p, mode) => {
                if libc::mkdir(p.as_ptr(), *mode) != 0 && errno() != libc::EEXIST {
                    return errno();
                }
                0
            }
            Op::Touch(p) => {
                let fd = libc::open(
                    p.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                    0,
                );
                if fd < 0 {
                    return errno();
                }
                libc::close(fd);
                0
            }
            Op::Symlink { target, path } => {
                check(libc::symlink(target.as_ptr(), path.as_ptr()).into())
            }
            Op::Write { path, data } => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o644,
                );
                if fd < 0 {
                    return errno();
                }
                let n = libc::write(fd, data.as_ptr().cast(), data.len());
                let e = if n < 0 || n as usize != data.len() {
                    errno()
                } else {
                    0
                };
                libc::close(fd);
                e
            }
            Op::Bind { src, dst, how } => {
                let e = bind(src, dst, *how);
                if how.optional && e == libc::ENOENT {
                    0
                } else {
                    e
                }
            }
            Op::Attr {
                path,
                set,
                clr,
                recursive,
            } => mount_setattr(
                libc::AT_FDCWD,
                path,
                if *recursive { AT_RECURSIVE } else { 0 },
                *set,
                *clr,
            ),
            Op::Proc(p) => check(
                libc::mount(
                    c"proc".as_ptr(),
                    p.as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
                    std::ptr::null(),
                )
                .into(),
            ),
            Op::ProcEnd => 0,
            Op::Detach(p) => check(libc::umount2(p.as_ptr(), libc::MNT_DETACH).into()),
            Op::Unlink(p) => check(libc::unlink(p.as_ptr()).into()),
            Op::Rmdir(p) => check(libc::rmdir(p.as_ptr()).into()),
        }
    }
}

/// Builds `view` in the calling child (see the module docs). Async-signal-safe, no
/// allocation. On a failure returns the errno, with the index of the failed step in
/// `failed_op` (-1: the fixed steps around the plan).
pub(crate) fn apply(view: &super::View, facts: &AtomicU32, failed_op: &AtomicI32) -> i32 {
    // The modes of the plan are exact; the caller's umask is back before `execve`.
    // SAFETY: integers only.
    let umask = unsafe { libc::umask(0) };
    let e = build_root(view, facts, failed_op);
    // SAFETY: integers only.
    unsafe { libc::umask(umask) };
    e
}

fn build_root(view: &super::View, facts: &AtomicU32, failed_op: &AtomicI32) -> i32 {
    let fixed = |e: i32| {
        failed_op.store(-1, Ordering::Release);
        e
    };
    // SAFETY (each call below): NUL-terminated paths owned by the parent; integers.
    unsafe {
        // 1. Nothing propagates out of the call's namespace.
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_SLAVE | libc::MS_REC,
            std::ptr::null(),
        ) != 0
        {
            return fixed(errno());
        }
        // 2. The call's root.
        if libc::mount(
            c"tmpfs".as_ptr(),
            view.base.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            view.tmpfs_data.as_ptr().cast(),
        ) != 0
        {
            return fixed(errno());
        }
        if libc::chdir(view.base.as_ptr()) != 0 || libc::mkdir(c"oldroot".as_ptr(), 0) != 0 {
            return fixed(errno());
        }
        if libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c"oldroot".as_ptr()) != 0 {
            return fixed(errno());
        }
        if libc::chdir(c"/".as_ptr()) != 0 {
            return fixed(errno());
        }
    }
    // 3. The plan.
    let mut skipping = false;
    for (i, op) in view.ops.iter().enumerate() {
        if skipping {
            skipping = !matches!(op, Op::ProcEnd);
            continue;
        }
        let e = run_op(op);
        if e == 0 {
            continue;
        }
        if matches!(op, Op::Proc(_)) && (e == libc::EPERM || e == libc::EACCES) {
            facts.fetch_or(FACT_NO_PROC, Ordering::AcqRel);
            skipping = true;
            continue;
        }
        failed_op.store(i32::try_from(i).unwrap_or(i32::MAX), Ordering::Release);
        return e;
    }
    // 4. The host is gone; the root is read-only.
    // SAFETY: as above.
    unsafe {
        if libc::umount2(c"/oldroot".as_ptr(), libc::MNT_DETACH) != 0
            || libc::rmdir(c"/oldroot".as_ptr()) != 0
        {
            return fixed(errno());
        }
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
            std::ptr::null(),
        ) != 0
        {
            return fixed(errno());
        }
    }
    0
}
