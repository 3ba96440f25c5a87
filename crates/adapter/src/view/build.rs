//! Building a view's plan in the parent (RUNTIME §5.1): from a [`ViewSpec`] to the entries
//! and the child's steps, one list of data for both.
//!
//! What every call shares is found once per process ([`Layout`]: which system directories
//! exist and which are symlinks into `/usr`, the directory the root tmpfs is mounted on,
//! the password database's entry of this user); a call adds its own paths, resolved here
//! (`realpath`), so that the child binds exactly the host path the parent looked at.

use super::child::{ATTR_NODEV, ATTR_NOSUID, ATTR_RDONLY, How, Op};
use super::{
    Before, EntryMode, ProtectedName, StoreView, VIEW_HOME, VIEW_TMP, View, ViewEntry, ViewSpec,
};
use crate::AdapterError;
use hcp_model::Land;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

/// The system directories of the view (RUNTIME §5.1), read-only.
const SYSTEM_DIRS: [&str; 7] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The device nodes of the view's `/dev`.
const DEVICES: [&str; 5] = ["null", "zero", "full", "random", "urandom"];

/// The links of the view's `/dev`.
const DEV_LINKS: [(&str, &str); 4] = [
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Parts of the call's `/proc` masked.
const PROC_MASKED: [&str; 3] = ["kcore", "keys", "timer_list"];

/// Directories that hold other users' or programs' files: never bound whole as a bin's
/// directory.
const SHARED_ROOTS: [&str; 7] = ["/", "/tmp", "/var/tmp", "/home", "/srv", "/mnt", "/media"];

/// Trees that are the kernel's, never an operator's path.
const KERNEL_TREES: [&str; 3] = ["/proc", "/sys", "/dev"];

/// Bytes of the root tmpfs beyond `tmp_bytes`: the skeleton (directories, the generated
/// `/etc/passwd`).
const SKELETON_BYTES: u64 = 1 << 20;

/// Where the view's own files live while it is built (removed before `execve`).
const STAGE: &str = "/.hcp";
const VOID: &str = "/.hcp/void";
const EMPTY: &str = "/.hcp/empty";
const PASSWD: &str = "/.hcp/passwd";

/// Where the staging directory is bound, read-only, for the covers to be bound from: onto
/// the host's `/sys` in the old tree (no view binds anything from there), so that it is
/// made read-only by the old tree's one recursive `mount_setattr` and goes with the old
/// tree's detach: no attribute change and no detach of its own. Where the host has no
/// `/sys` directory, or a plan binds from it, the stage is bound onto itself instead.
const STAGE_IN_OLD_TREE: &str = "/oldroot/sys";

/// What every call of this process shares.
#[derive(Debug)]
struct Layout {
    /// System directories: `(path, Some(target))` for a symlink, `(path, None)` for a
    /// directory.
    system: Vec<(PathBuf, Option<PathBuf>)>,
    /// `/etc` as resolved.
    etc: PathBuf,
    /// The host directory the root tmpfs is mounted on before `pivot_root`.
    base: PathBuf,
    /// The host's `/sys` is a directory: the stage can be bound onto it in the old tree
    /// ([`STAGE_IN_OLD_TREE`]).
    sys: bool,
    /// This user's entry of `/etc/passwd`: name, gecos, shell.
    user: (String, String, String),
}

fn layout() -> &'static Layout {
    static LAYOUT: OnceLock<Layout> = OnceLock::new();
    LAYOUT.get_or_init(|| {
        use crate::system::Entry;
        let system = SYSTEM_DIRS
            .iter()
            .filter_map(|d| {
                let p = PathBuf::from(d);
                match crate::system::entry(&p) {
                    Entry::Link { target, .. } => Some((p, Some(target))),
                    Entry::Dir => Some((p, None)),
                    Entry::File | Entry::Missing => None,
                }
            })
            .collect();
        let etc = crate::system::resolve(Path::new("/etc"));
        let base = ["/tmp", "/mnt", "/run"]
            .iter()
            .map(PathBuf::from)
            .find(|p| crate::system::entry(p) == Entry::Dir)
            .or_else(|| {
                ["/var/tmp", "/dev/shm"]
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()))
            })
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        Layout {
            system,
            etc,
            base,
            sys: crate::system::entry(Path::new("/sys")) == Entry::Dir,
            user: own_passwd_entry(),
        }
    })
}

/// The effective user's name, gecos and shell in `/etc/passwd` (read without NSS), else
/// `hcp`, empty, `/bin/sh`.
fn own_passwd_entry() -> (String, String, String) {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() }.to_string();
    super::host_passwd()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() >= 7 && f[2] == uid)
                .then(|| (f[0].to_owned(), f[4].to_owned(), f[6].to_owned()))
        })
        .unwrap_or_else(|| ("hcp".into(), String::new(), "/bin/sh".into()))
}

/// The `/etc/passwd` of a view: root, this user with `home`, and `nobody`.
fn passwd(home: &Path) -> Vec<u8> {
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let (name, gecos, shell) = &layout().user;
    let home = home.display();
    let mut out = String::new();
    if uid == 0 {
        out.push_str(&format!("root:x:0:0:{gecos}:{home}:{shell}\n"));
    } else {
        out.push_str("root:x:0:0:root:/root:/usr/sbin/nologin\n");
        if uid != 65534 {
            out.push_str(&format!("{name}:x:{uid}:{gid}:{gecos}:{home}:{shell}\n"));
        }
    }
    if uid == 65534 {
        out.push_str(&format!("{name}:x:{uid}:{gid}:{gecos}:{home}:{shell}\n"));
    } else {
        out.push_str("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    }
    out.into_bytes()
}

/// What the view binds for a pinned bin (or interpreter) at `bin` (RUNTIME §5.1, "the pinned
/// bin"): nothing when it lies in a system directory or `/etc`; else its directory and,
/// when that is named `bin`, the directory above it — unless the one above is a home, a
/// top-level entry of a home (`~/.local`, `~/.cargo`), holds a home or a store, or is a
/// shared root (`/`, `/tmp`, `/home` …): then the bin's directory alone. A directory that is
/// itself such a place, or lies at the top of a home or one level in (`~/bin`,
/// `~/.local/bin`, `~/.cargo/bin`, `~/tools`: where a user keeps tools of every kind) gives
/// way to the bin file alone. Returns the paths to bind, each a directory, or the file
/// itself. `bin`, `homes` and `stores` are compared as given: pass them resolved
/// (`realpath`; a pinned path is). A bin's directory that became a symlink since the pin
/// then fails the call's bind (it follows no symlink) rather than binding elsewhere.
pub fn bin_dirs(bin: &Path, homes: &[PathBuf], stores: &[PathBuf]) -> Vec<PathBuf> {
    // The system directories as written and as resolved (`/bin` → `/usr/bin`), once per
    // process: a bin in one of them (the common case) costs no system call here.
    static SYSTEM: OnceLock<Vec<PathBuf>> = OnceLock::new();
    let system = SYSTEM.get_or_init(|| {
        SYSTEM_DIRS
            .iter()
            .chain(["/etc"].iter())
            .flat_map(|d| [PathBuf::from(d), crate::system::resolve(Path::new(d))])
            .collect()
    });
    if system.iter().any(|d| bin.starts_with(d)) {
        return Vec::new();
    }
    let bin = bin.to_owned();
    let unfit = |d: &Path| {
        SHARED_ROOTS.iter().any(|r| d == Path::new(r))
            || homes.iter().any(|h| h.starts_with(d))
            || stores.iter().any(|s| s.starts_with(d) || d.starts_with(s))
    };
    let Some(dir) = bin.parent() else {
        return vec![bin];
    };
    // A directory at the top of a home or one level in (`~/bin`, `~/.local/bin`,
    // `~/.cargo/bin`, `~/tools`) is where a user keeps tools of every kind, scripts with
    // tokens in them among them: the bin alone.
    let crowded = |d: &Path| {
        let up = d.parent();
        homes
            .iter()
            .any(|h| up == Some(h.as_path()) || up.and_then(Path::parent) == Some(h.as_path()))
    };
    if unfit(dir) || crowded(dir) {
        return vec![bin.clone()];
    }
    if dir.file_name().is_some_and(|n| n == "bin")
        && let Some(above) = dir.parent()
    {
        let top_of_home = above.parent().is_some_and(|p| homes.iter().any(|h| h == p));
        if !unfit(above) && !top_of_home {
            return vec![above.to_owned()];
        }
    }
    vec![dir.to_owned()]
}

fn cstr(p: &Path) -> Result<CString, AdapterError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| AdapterError::SandboxFailed {
        path: p.to_owned(),
        reason: "a path of the view holds a NUL byte".into(),
        source: None,
    })
}

fn old(p: &Path) -> Result<CString, AdapterError> {
    let mut b = b"/oldroot".to_vec();
    b.extend_from_slice(p.as_os_str().as_bytes());
    CString::new(b).map_err(|_| AdapterError::SandboxFailed {
        path: p.to_owned(),
        reason: "a path of the view holds a NUL byte".into(),
        source: None,
    })
}

fn unavailable(reason: String) -> AdapterError {
    AdapterError::SandboxUnavailable { reason }
}

/// The kind of a host path as it will stand in the view. The child checks that what it
/// binds is still of this kind (`How::kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Socket,
    Fifo,
    Symlink,
    /// A device node: no view holds one but its own `/dev`.
    Device,
}

impl Kind {
    fn of(m: &std::fs::Metadata) -> Self {
        let t = m.file_type();
        if t.is_dir() {
            Self::Dir
        } else if t.is_symlink() {
            Self::Symlink
        } else if t.is_socket() {
            Self::Socket
        } else if t.is_fifo() {
            Self::Fifo
        } else if t.is_file() {
            Self::File
        } else {
            Self::Device
        }
    }

    /// The `S_IFMT` bits of this kind.
    fn mode(self) -> u32 {
        match self {
            Self::Dir => libc::S_IFDIR,
            Self::File => libc::S_IFREG,
            Self::Socket => libc::S_IFSOCK,
            Self::Fifo => libc::S_IFIFO,
            Self::Symlink => libc::S_IFLNK,
            Self::Device => 0,
        }
    }
}

/// The kind of what `p` names, its symlinks followed.
fn kind_of(p: &Path) -> Option<Kind> {
    std::fs::metadata(p).ok().map(|m| Kind::of(&m))
}

/// A bind of a host path, or a cover, planned at a view path; sorted by that path before
/// the steps are made, so that a parent is bound before what lies in it.
#[derive(Debug)]
struct Planned {
    at: PathBuf,
    what: What,
}

#[derive(Debug)]
enum What {
    /// A host path (`host`) bound at `at`.
    Host {
        host: PathBuf,
        kind: Kind,
        writable: bool,
        nofollow: bool,
        optional: bool,
        why: &'static str,
    },
    /// A protected name bound read-only onto itself (or its parent onto itself,
    /// writable), in the view.
    OntoItself { writable: bool, kind: Kind },
    /// An empty file or directory over what may not be read.
    Cover { dir: bool, why: &'static str },
    /// The generated `/etc/passwd`.
    Passwd,
}

/// The staged files as the covers are bound from them (in the stage's read-only mount).
#[derive(Default)]
struct Staged {
    void: CString,
    empty: CString,
    passwd: CString,
}

struct Builder {
    entries: Vec<ViewEntry>,
    ops: Vec<Op>,
    stage: Staged,
    /// View paths made in the root tmpfs.
    made: Vec<PathBuf>,
    /// View paths where a host tree is mounted.
    mounts: Vec<PathBuf>,
}

impl Builder {
    fn entry(&mut self, path: &Path, mode: EntryMode, source: Option<&Path>, why: &'static str) {
        self.entries.push(ViewEntry {
            path: path.to_owned(),
            mode,
            source: source.map(Path::to_path_buf),
            why,
        });
    }

    fn under_mount(&self, p: &Path) -> bool {
        self.mounts.iter().any(|m| p.starts_with(m))
    }

    /// Makes `p` (and the directories above it) in the root tmpfs, unless it lies in a
    /// mounted host tree (where it exists already, as the host's).
    fn make(&mut self, p: &Path, kind: Kind) -> Result<(), AdapterError> {
        let mut at = PathBuf::from("/");
        let comps: Vec<Component<'_>> = p.components().skip(1).collect();
        for (i, c) in comps.iter().enumerate() {
            at.push(c);
            if self.under_mount(&at) {
                return Ok(());
            }
            if self.made.contains(&at) {
                continue;
            }
            let last = i + 1 == comps.len();
            if last && kind != Kind::Dir {
                self.ops.push(Op::Touch(cstr(&at)?));
            } else {
                self.ops.push(Op::Mkdir(cstr(&at)?, 0o755));
            }
            self.made.push(at.clone());
        }
        Ok(())
    }
}

/// The view of `spec` ([`View::build`]).
pub(super) fn build(spec: &ViewSpec<'_>, workdir_resolved: bool) -> Result<View, AdapterError> {
    let in_old_tree = layout().sys;
    let view = build_staged(spec, workdir_resolved, in_old_tree)?;
    // A host path under `/sys` (none of the system's usual ones) is bound from the old
    // tree, which the stage would cover: then the stage is bound onto itself.
    let old_sys = STAGE_IN_OLD_TREE.as_bytes();
    let staged = [VOID, EMPTY, PASSWD].map(|f| {
        let mut p = old_sys.to_vec();
        p.extend_from_slice(&f.as_bytes()[STAGE.len()..]);
        p
    });
    let binds_from_sys = view.ops.iter().any(|op| match op {
        Op::Bind { src, .. } => {
            let s = src.as_bytes();
            s.starts_with(old_sys)
                && matches!(s.get(old_sys.len()), None | Some(b'/'))
                && !staged.iter().any(|f| f.as_slice() == s)
        }
        _ => false,
    });
    if in_old_tree && binds_from_sys {
        return build_staged(spec, workdir_resolved, false);
    }
    Ok(view)
}

/// [`build`] with the stage bound onto [`STAGE_IN_OLD_TREE`] (`in_old_tree`) or onto itself.
fn build_staged(
    spec: &ViewSpec<'_>,
    workdir_resolved: bool,
    in_old_tree: bool,
) -> Result<View, AdapterError> {
    let lay = layout();
    let local = spec.land == Land::Local;
    let home: PathBuf = if local {
        spec.workdir.to_owned()
    } else {
        PathBuf::from(VIEW_HOME)
    };
    let mut b = Builder {
        entries: Vec::new(),
        ops: Vec::new(),
        stage: Staged::default(),
        made: Vec::new(),
        mounts: Vec::new(),
    };
    let ro = ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV;

    // The view's own files: an empty file and directory for covers, the generated
    // passwd; one read-only mount of them, so that every cover bound from it is read-only:
    // in the old tree, made read-only with it below and detached with it, else onto itself.
    b.ops.push(Op::Mkdir(cstr(Path::new(STAGE))?, 0o755));
    b.ops.push(Op::Touch(cstr(Path::new(VOID))?));
    b.ops.push(Op::Mkdir(cstr(Path::new(EMPTY))?, 0o555));
    b.ops.push(Op::Write {
        path: cstr(Path::new(PASSWD))?,
        data: passwd(&home),
    });
    let stage = if in_old_tree {
        Path::new(STAGE_IN_OLD_TREE)
    } else {
        Path::new(STAGE)
    };
    b.ops.push(Op::Bind {
        src: cstr(Path::new(STAGE))?,
        dst: cstr(stage)?,
        how: How {
            set: if in_old_tree { 0 } else { ro },
            ..How::PLAIN
        },
    });
    let staged =
        |f: &str| cstr(&stage.join(Path::new(f).strip_prefix(STAGE).unwrap_or(Path::new(f))));
    b.stage = Staged {
        void: staged(VOID)?,
        empty: staged(EMPTY)?,
        passwd: staged(PASSWD)?,
    };

    // /dev: the host's nodes (bound before the old tree loses `dev`), links, /dev/shm.
    b.ops.push(Op::Mkdir(cstr(Path::new("/dev"))?, 0o755));
    b.made.push(PathBuf::from("/dev"));
    for d in DEVICES {
        let p = Path::new("/dev").join(d);
        b.ops.push(Op::Touch(cstr(&p)?));
        b.ops.push(Op::Bind {
            src: old(&p)?,
            dst: cstr(&p)?,
            how: How::PLAIN,
        });
        b.entry(&p, EntryMode::Device, Some(&p), "device");
    }
    for (name, target) in DEV_LINKS {
        let p = Path::new("/dev").join(name);
        b.ops.push(Op::Symlink {
            target: cstr(Path::new(target))?,
            path: cstr(&p)?,
        });
        b.entry(
            &p,
            EntryMode::Symlink(PathBuf::from(target)),
            None,
            "device",
        );
    }
    b.ops.push(Op::Mkdir(cstr(Path::new("/dev/shm"))?, 0o1777));
    b.made.push(PathBuf::from("/dev/shm"));
    b.entry(
        Path::new("/dev/shm"),
        EntryMode::Tmpfs,
        None,
        "shared memory, with /tmp in one bound",
    );

    // /tmp, made now so that what is bound beneath it (a workdir in the host's /tmp)
    // finds it.
    b.ops.push(Op::Mkdir(cstr(Path::new(VIEW_TMP))?, 0o1777));
    b.made.push(PathBuf::from(VIEW_TMP));

    // From here every bind of the old tree (and of the stage, when it lies there) is
    // read-only, nosuid and nodev.
    b.ops.push(Op::Attr {
        path: cstr(Path::new("/oldroot"))?,
        set: ro,
        clr: 0,
        recursive: true,
    });

    // /proc: the call's own, read-only as a whole (uid 0 passes the owner bits of every
    // file in it: `/proc/sys`, `/proc/sysrq-trigger`, a process's own attributes), parts
    // masked.
    b.ops.push(Op::Mkdir(cstr(Path::new("/proc"))?, 0o555));
    b.made.push(PathBuf::from("/proc"));
    b.ops.push(Op::Proc(cstr(Path::new("/proc"))?));
    b.entry(
        Path::new("/proc"),
        EntryMode::Proc,
        None,
        "the call's processes, read-only",
    );
    for p in PROC_MASKED {
        let p = Path::new("/proc").join(p);
        b.ops.push(Op::Bind {
            src: b.stage.void.clone(),
            dst: cstr(&p)?,
            how: How::OPTIONAL,
        });
        b.entry(
            &p,
            EntryMode::Masked,
            None,
            "kernel memory, keys and timers",
        );
    }
    b.ops.push(Op::ProcEnd);
    b.mounts.push(PathBuf::from("/proc"));

    // System directories.
    for (p, link) in &lay.system {
        match link {
            Some(t) => {
                b.ops.push(Op::Symlink {
                    target: cstr(t)?,
                    path: cstr(p)?,
                });
                b.made.push(p.clone());
                b.entry(p, EntryMode::Symlink(t.clone()), None, "system");
            }
            None => {
                b.ops.push(Op::Mkdir(cstr(p)?, 0o755));
                b.made.push(p.clone());
                b.ops.push(Op::Bind {
                    src: old(p)?,
                    dst: cstr(p)?,
                    how: How::PLAIN,
                });
                b.mounts.push(p.clone());
                b.entry(p, EntryMode::ReadOnly, Some(p), "system");
            }
        }
    }

    // What the call is given, sorted by view path.
    let mut planned: Vec<Planned> = Vec::new();
    planned.push(Planned {
        at: PathBuf::from("/etc"),
        what: What::Host {
            host: lay.etc.clone(),
            kind: Kind::Dir,
            writable: false,
            nofollow: false,
            optional: false,
            why: "system configuration",
        },
    });
    let granted: Vec<&PathBuf> = spec.read.iter().chain(spec.write).collect();
    for c in &spec.etc.covered {
        if granted.iter().any(|g| c.path.starts_with(g)) {
            continue;
        }
        planned.push(Planned {
            at: c.path.clone(),
            what: What::Cover {
                dir: c.dir,
                why: "not readable by every user",
            },
        });
    }
    if Path::new("/etc/passwd").exists() {
        planned.push(Planned {
            at: PathBuf::from("/etc/passwd"),
            what: What::Passwd,
        });
    }
    for l in &spec.etc.links {
        planned.push(Planned {
            at: l.target.clone(),
            what: What::Host {
                host: l.target.clone(),
                kind: if l.dir { Kind::Dir } else { Kind::File },
                writable: false,
                nofollow: true,
                optional: true,
                why: "target of a symlink of /etc",
            },
        });
    }
    let mut programs: Vec<(PathBuf, &'static str)> = bin_dirs(spec.bin, spec.homes, spec.stores)
        .into_iter()
        .map(|p| (p, "pinned bin"))
        .collect();
    for i in spec.interpreters {
        for p in bin_dirs(i, spec.homes, spec.stores) {
            if !programs.iter().any(|(q, _)| *q == p) {
                programs.push((p, "interpreter of the pinned bin"));
            }
        }
    }
    for (p, why) in programs {
        let kind = kind_of(&p).unwrap_or(Kind::File);
        planned.push(Planned {
            at: p.clone(),
            what: What::Host {
                host: p,
                kind,
                writable: false,
                nofollow: true,
                optional: false,
                why,
            },
        });
    }
    // Operator paths: absolute, resolved, never a kernel tree or a store.
    let mut operator: Vec<(PathBuf, bool, Kind)> = Vec::new();
    for (list, writable) in [(spec.read, false), (spec.write, true)] {
        for p in list {
            let Ok(r) = p.canonicalize() else {
                continue;
            };
            check_operator_path(p, &r, spec.stores)?;
            let Some(kind) = kind_of(&r) else { continue };
            check_operator_kind(p, kind, writable)?;
            operator.retain(|(q, _, _)| *q != r);
            operator.push((r, writable, kind));
        }
    }
    let mut socket_listed = false;
    let write_roots: Vec<PathBuf> = operator
        .iter()
        .filter(|(_, w, k)| *w && *k == Kind::Dir)
        .map(|(p, _, _)| p.clone())
        .collect();
    for (p, writable, kind) in operator {
        socket_listed |= writable && kind == Kind::Socket;
        planned.push(Planned {
            at: p.clone(),
            what: What::Host {
                host: p,
                kind,
                writable,
                nofollow: true,
                optional: false,
                why: if writable {
                    "read-write path of the configuration"
                } else {
                    "read-only path of the configuration"
                },
            },
        });
    }
    if let Some(store) = spec.store {
        plan_store(&mut planned, store)?;
    }
    let mut protected = Vec::new();
    if local {
        let work = if workdir_resolved {
            spec.workdir.to_owned()
        } else {
            spec.workdir
                .canonicalize()
                .map_err(|e| AdapterError::SandboxFailed {
                    path: spec.workdir.to_owned(),
                    reason: "cannot resolve the working directory".into(),
                    source: Some(e),
                })?
        };
        planned.push(Planned {
            at: work.clone(),
            what: What::Host {
                host: work.clone(),
                kind: Kind::Dir,
                writable: spec.writes,
                nofollow: true,
                optional: false,
                why: if spec.writes {
                    "the workdir of a write verb"
                } else {
                    "the workdir of a read verb"
                },
            },
        });
        if spec.writes {
            let mut writable = vec![work.clone()];
            writable.extend(write_roots.iter().cloned());
            protected = plan_protected(&mut planned, &work, &writable, spec.protect_in_workdir)?;
        }
    } else {
        let tenant = spec
            .tenant_home
            .ok_or_else(|| unavailable("a personal or brain call needs its tenant home".into()))?;
        // A home not made yet (a view described before any call) stands as given; a call's
        // is always made before its view is built.
        let tenant = tenant.canonicalize().unwrap_or_else(|_| tenant.to_owned());
        planned.push(Planned {
            at: PathBuf::from(VIEW_HOME),
            what: What::Host {
                host: tenant,
                kind: Kind::Dir,
                writable: spec.writes,
                nofollow: true,
                optional: false,
                why: if spec.writes {
                    "the tenant home of a write verb"
                } else {
                    "the tenant home of a read verb"
                },
            },
        });
    }
    planned.sort_by(|a, b| a.at.cmp(&b.at));
    for p in &planned {
        emit(&mut b, p)?;
    }

    // /tmp (= TMPDIR) and /dev/shm: the root tmpfs, each its own writable mount.
    for p in [VIEW_TMP, "/dev/shm"] {
        b.ops.push(Op::Bind {
            src: cstr(Path::new(p))?,
            dst: cstr(Path::new(p))?,
            how: How::PLAIN,
        });
    }
    b.entry(
        Path::new(VIEW_TMP),
        EntryMode::Tmpfs,
        None,
        "the call's temporary directory",
    );
    // The view's own files go (the covers keep what they show); a stage in the old tree
    // goes with it.
    if !in_old_tree {
        b.ops.push(Op::Detach(cstr(Path::new(STAGE))?));
    }
    for f in [VOID, PASSWD] {
        b.ops.push(Op::Unlink(cstr(Path::new(f))?));
    }
    for d in [EMPTY, STAGE] {
        b.ops.push(Op::Rmdir(cstr(Path::new(d))?));
    }

    let base = cstr(&lay.base)?;
    let tmpfs_data = CString::new(format!(
        "size={},mode=0755",
        spec.tmp_bytes.saturating_add(SKELETON_BYTES)
    ))
    .map_err(|_| unavailable("bad tmpfs options".into()))?;
    Ok(View {
        entries: b.entries,
        protected,
        home,
        socket_listed,
        ops: b.ops,
        base,
        tmpfs_data,
    })
}

/// Refuses an operator's path no view may hold: `/`, a kernel tree, a store or what holds
/// one.
fn check_operator_path(given: &Path, p: &Path, stores: &[PathBuf]) -> Result<(), AdapterError> {
    let refuse = |why: &str| {
        Err(unavailable(format!(
            "the configured path `{}` {why}, which no call may reach",
            given.display()
        )))
    };
    if p == Path::new("/") {
        return refuse("is `/`");
    }
    if KERNEL_TREES.iter().any(|t| p.starts_with(t)) {
        return refuse("lies in a kernel tree (`/proc`, `/sys`, `/dev`)");
    }
    for s in stores {
        if s.starts_with(p) {
            return refuse(&format!("holds the store `{}`", s.display()));
        }
        if p.starts_with(s) {
            return refuse(&format!("lies inside the store `{}`", s.display()));
        }
    }
    Ok(())
}

/// Refuses an operator's path of a kind no view holds there: a socket or a FIFO named
/// read-only (a read-only mount keeps neither `connect` nor a writer out: it would be a
/// channel to whoever listens), a device node anywhere.
fn check_operator_kind(given: &Path, kind: Kind, writable: bool) -> Result<(), AdapterError> {
    let what = match kind {
        Kind::Socket if !writable => "a socket",
        Kind::Fifo if !writable => "a FIFO",
        Kind::Device => "a device node",
        _ => return Ok(()),
    };
    Err(unavailable(if kind == Kind::Device {
        format!(
            "the configured path `{}` is {what}, which no view holds",
            given.display()
        )
    } else {
        format!(
            "the read-only path `{}` of the configuration is {what}, which a read-only mount does not keep a call from using; name it among the pack's `write` paths to give calls that endpoint",
            given.display()
        )
    }))
}

/// The store for the bootstrap pack: read-only, its hidden names covered.
fn plan_store(planned: &mut Vec<Planned>, store: StoreView<'_>) -> Result<(), AdapterError> {
    let root = store
        .root
        .canonicalize()
        .map_err(|e| AdapterError::SandboxFailed {
            path: store.root.to_owned(),
            reason: "cannot resolve the store".into(),
            source: Some(e),
        })?;
    planned.push(Planned {
        at: root.clone(),
        what: What::Host {
            host: root.clone(),
            kind: Kind::Dir,
            writable: false,
            nofollow: true,
            optional: false,
            why: "the store, for the bootstrap pack",
        },
    });
    for name in store.hidden {
        let p = root.join(name);
        if let Ok(m) = std::fs::symlink_metadata(&p) {
            planned.push(Planned {
                at: p,
                what: What::Cover {
                    dir: m.is_dir(),
                    why: "of the store, not the bootstrap pack's to read",
                },
            });
        }
    }
    Ok(())
}

/// The protected names of a writable workdir (RUNTIME §5.1): each that exists bound
/// read-only onto itself, its parent inside the workdir bound onto itself; returns what
/// each was before the call.
///
/// Each name is walked one component at a time, nothing followed blindly:
/// - a symlink is bound onto itself (it can be neither removed nor replaced) and, when it
///   resolves into a tree the call may write (`writable`: the workdir, the operator's
///   read-write paths), the walk goes on from its target, so that `.git -> repo.git` or
///   `.git/hooks -> ../githooks` protects `repo.git/hooks` or `githooks`; a symlink to the
///   workdir itself or above it refuses the call (its target cannot be made read-only
///   without the workdir);
/// - a regular file where the name goes on (`.git` a `gitdir:` file: it names where git finds
///   the config and hooks) is bound read-only onto itself.
fn plan_protected(
    planned: &mut Vec<Planned>,
    work: &Path,
    writable: &[PathBuf],
    names: &[String],
) -> Result<Vec<ProtectedName>, AdapterError> {
    let mut out = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    // The names share their first components (`.git`): each path is looked at once.
    let mut looked: Vec<(PathBuf, Option<std::fs::Metadata>)> = Vec::new();
    let mut lstat = |p: &Path| {
        if let Some((_, m)) = looked.iter().find(|(q, _)| q == p) {
            return m.clone();
        }
        let m = std::fs::symlink_metadata(p).ok();
        looked.push((p.to_owned(), m.clone()));
        m
    };
    let mut push = |planned: &mut Vec<Planned>, at: &Path, writable: bool, kind: Kind| {
        if !seen.iter().any(|p| p == at) {
            seen.push(at.to_owned());
            planned.push(Planned {
                at: at.to_owned(),
                what: What::OntoItself { writable, kind },
            });
        }
    };
    for name in names {
        let rel = Path::new(name);
        let normal =
            !rel.is_absolute() && rel.components().all(|c| matches!(c, Component::Normal(_)));
        if !normal {
            continue;
        }
        let comps: Vec<Component<'_>> = rel.components().collect();
        let mut at = work.to_owned();
        let mut before = Before::Absent;
        // The directories walked through inside a writable tree: bound onto themselves
        // once the name is found, so that it cannot be moved away with them.
        let mut parents: Vec<PathBuf> = Vec::new();
        let mut i = 0;
        let mut hops = 0;
        while i < comps.len() {
            at.push(comps[i]);
            let last = i + 1 == comps.len();
            let Some(m) = lstat(&at) else {
                before = if hops == 0 { Before::Absent } else { before };
                break;
            };
            match Kind::of(&m) {
                Kind::Symlink => {
                    if hops == 0 {
                        before = if last { Before::Symlink } else { Before::Other };
                    }
                    push(planned, &at, false, Kind::Symlink);
                    hops += 1;
                    let target = match at.canonicalize() {
                        Ok(t) if hops <= MAX_PROTECTED_HOPS => t,
                        _ => break,
                    };
                    if work.starts_with(&target) {
                        return Err(unavailable(format!(
                            "the protected name `{name}` of the workdir is a symlink to `{}`, which holds the workdir; a call may not write there",
                            target.display()
                        )));
                    }
                    let Some(root) = writable.iter().find(|w| target.starts_with(w)) else {
                        // Outside every tree the call may write: nothing to protect there.
                        break;
                    };
                    // Go on from the target: the rest of the name lies beneath it, and
                    // the directories down to it may not be moved either.
                    parents = target
                        .ancestors()
                        .skip(1)
                        .take_while(|a| a.starts_with(root) && a != root)
                        .map(Path::to_path_buf)
                        .collect();
                    at = target;
                    if !last {
                        parents.push(at.clone());
                    }
                    if last {
                        let kind = kind_of(&at).unwrap_or(Kind::File);
                        protect(planned, &mut push, &at, kind, &parents, work, writable);
                        break;
                    }
                    i += 1;
                    continue;
                }
                Kind::Dir if !last => parents.push(at.clone()),
                Kind::Dir | Kind::File if last => {
                    let kind = Kind::of(&m);
                    if hops == 0 {
                        before = if kind == Kind::Dir {
                            Before::Dir
                        } else {
                            Before::File
                        };
                    }
                    protect(planned, &mut push, &at, kind, &parents, work, writable);
                }
                Kind::File => {
                    // A file where the name goes on: it says where the rest is found.
                    if hops == 0 {
                        before = Before::Other;
                    }
                    protect(
                        planned,
                        &mut push,
                        &at,
                        Kind::File,
                        &parents,
                        work,
                        writable,
                    );
                    break;
                }
                _ => {
                    if hops == 0 {
                        before = Before::Other;
                    }
                    break;
                }
            }
            i += 1;
        }
        out.push(ProtectedName {
            name: name.clone(),
            path: work.join(rel),
            before,
        });
    }
    Ok(out)
}

/// Symlinks followed at most while walking one protected name.
const MAX_PROTECTED_HOPS: usize = 8;

/// Plans `at` (of `kind`) read-only onto itself and each of `parents` (the directories
/// walked through to it) onto itself, writable, but the roots of the writable trees
/// themselves (the workdir, an operator's path), which stay as they are bound.
fn protect(
    planned: &mut Vec<Planned>,
    push: &mut impl FnMut(&mut Vec<Planned>, &Path, bool, Kind),
    at: &Path,
    kind: Kind,
    parents: &[PathBuf],
    work: &Path,
    writable: &[PathBuf],
) {
    for p in parents {
        if p != work && !writable.iter().any(|w| w == p) {
            push(planned, p, true, Kind::Dir);
        }
    }
    push(planned, at, false, kind);
}

fn emit(b: &mut Builder, p: &Planned) -> Result<(), AdapterError> {
    let ro = ATTR_RDONLY | ATTR_NOSUID | ATTR_NODEV;
    match &p.what {
        What::Host {
            host,
            kind,
            writable,
            nofollow,
            optional,
            why,
        } => {
            b.make(&p.at, *kind)?;
            let how = if *nofollow {
                How::nofollow(kind.mode())
            } else {
                How::PLAIN
            };
            b.ops.push(Op::Bind {
                src: old(host)?,
                dst: cstr(&p.at)?,
                how: How {
                    optional: *optional,
                    clr: if *writable { ATTR_RDONLY } else { 0 },
                    ..how
                },
            });
            if *kind == Kind::Dir {
                b.mounts.push(p.at.clone());
            }
            let mode = if *writable {
                EntryMode::ReadWrite
            } else {
                EntryMode::ReadOnly
            };
            b.entry(&p.at, mode, Some(host), why);
        }
        What::OntoItself { writable, kind } => {
            // A symlink takes no attribute (it cannot be written anyway).
            let set = if *writable || *kind == Kind::Symlink {
                0
            } else {
                ro
            };
            b.ops.push(Op::Bind {
                src: cstr(&p.at)?,
                dst: cstr(&p.at)?,
                how: How {
                    set,
                    ..How::nofollow(kind.mode())
                },
            });
            if !*writable {
                b.entry(
                    &p.at,
                    EntryMode::ReadOnly,
                    Some(&p.at),
                    "protected name of the workdir",
                );
            }
        }
        What::Cover { dir, why } => {
            let from = if *dir {
                b.stage.empty.clone()
            } else {
                b.stage.void.clone()
            };
            b.ops.push(Op::Bind {
                src: from,
                dst: cstr(&p.at)?,
                how: How::OPTIONAL,
            });
            b.entry(&p.at, EntryMode::Masked, None, why);
        }
        What::Passwd => {
            b.ops.push(Op::Bind {
                src: b.stage.passwd.clone(),
                dst: cstr(&p.at)?,
                how: How::OPTIONAL,
            });
            b.entry(
                &p.at,
                EntryMode::Generated,
                None,
                "names the call's home for its user",
            );
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_bins_directory_is_bound_with_its_prefix_unless_that_is_a_home_or_a_store() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        for p in [
            "opt/tool/bin",
            "home/u/.cargo/bin",
            "home/u/proj/bin",
            "loose",
        ] {
            std::fs::create_dir_all(r.join(p)).unwrap();
        }
        for f in [
            "opt/tool/bin/t",
            "home/u/.cargo/bin/c",
            "home/u/proj/bin/p",
            "home/u/h",
            "loose/l",
        ] {
            std::fs::write(r.join(f), "").unwrap();
        }
        let homes = [r.join("home/u")];
        let none: [PathBuf; 0] = [];
        assert_eq!(
            bin_dirs(&r.join("opt/tool/bin/t"), &homes, &none),
            [r.join("opt/tool")]
        );
        // `~/.cargo/bin` holds every tool cargo installed: the bin alone; so does a
        // project's `bin` at the top of a home.
        assert_eq!(
            bin_dirs(&r.join("home/u/.cargo/bin/c"), &homes, &none),
            [r.join("home/u/.cargo/bin/c")]
        );
        assert_eq!(
            bin_dirs(&r.join("home/u/proj/bin/p"), &homes, &none),
            [r.join("home/u/proj/bin/p")]
        );
        // Deeper in a home: the directory above `bin`.
        std::fs::create_dir_all(r.join("home/u/src/tool/bin")).unwrap();
        std::fs::write(r.join("home/u/src/tool/bin/t"), "").unwrap();
        assert_eq!(
            bin_dirs(&r.join("home/u/src/tool/bin/t"), &homes, &none),
            [r.join("home/u/src/tool")]
        );
        // In a home itself: the file alone.
        assert_eq!(
            bin_dirs(&r.join("home/u/h"), &homes, &none),
            [r.join("home/u/h")]
        );
        // A directory that holds a store: the bin's directory alone.
        let stores = [r.join("opt/tool/store")];
        assert_eq!(
            bin_dirs(&r.join("opt/tool/bin/t"), &homes, &stores),
            [r.join("opt/tool/bin")]
        );
        assert_eq!(
            bin_dirs(&r.join("loose/l"), &homes, &none),
            [r.join("loose")]
        );
        assert!(bin_dirs(Path::new("/bin/sh"), &homes, &none).is_empty());
        assert!(bin_dirs(Path::new("/usr/bin/env"), &homes, &none).is_empty());
    }

    #[test]
    fn the_hosts_mounts_beneath_a_bound_path_are_named() {
        let d = tempfile::tempdir().unwrap();
        let tenant = d.path().canonicalize().unwrap();
        let etc = super::super::EtcIndex::default();
        let view = build(
            &ViewSpec {
                land: Land::Personal,
                workdir: Path::new("/"),
                writes: false,
                tenant_home: Some(&tenant),
                bin: Path::new("/bin/sh"),
                interpreters: &[],
                homes: &[],
                stores: &[],
                read: &[],
                write: &[],
                protect_in_workdir: &[],
                store: None,
                etc: &etc,
                tmp_bytes: 1 << 20,
            },
            false,
        )
        .unwrap();
        let info = format!(
            "22 1 0:21 / / rw - ext4 /dev/vda rw\n\
             30 22 0:40 / /usr/local/share/x rw - tmpfs t rw\n\
             31 22 0:41 / {}/with\\040space rw - tmpfs t rw\n\
             32 22 0:42 / /srv/elsewhere rw - tmpfs t rw\n",
            tenant.display()
        );
        assert_eq!(
            super::super::mounts_beneath(&view, &info),
            vec![
                (PathBuf::from("/usr"), PathBuf::from("/usr/local/share/x")),
                (PathBuf::from("/home/hcp"), tenant.join("with space")),
            ]
        );
    }

    #[test]
    fn the_generated_passwd_names_the_home_for_this_user() {
        let text = String::from_utf8(passwd(Path::new("/home/hcp"))).unwrap();
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let line = text
            .lines()
            .find(|l| l.split(':').nth(2) == Some(uid.to_string().as_str()))
            .unwrap();
        assert_eq!(line.split(':').nth(5), Some("/home/hcp"), "{text}");
    }
}
