//! The view of one call (RUNTIME §5.1 "What a call sees: built, not covered", §5.2 "Tenant
//! homes"): a root of the call's own holding only what the call was given.
//!
//! A child is not shown the machine minus a list of secrets. [`View::build`] turns what one
//! call is given ([`ViewSpec`]) into a plan, prepared in the parent: the entries of the view
//! ([`View::describe`], what `hcp show --view` prints) and, from the very same data, the
//! sequence of mount steps the child makes between `clone` and `execve` (the child module),
//! every path already a C string. Whatever the plan does not name does not exist in the
//! child: every home, every store, `/root`, the host's `/tmp`, `/var`, `/run`, `/mnt`,
//! `/srv`, `/opt`, other calls' temporary directories, every pathname socket of the host.
//!
//! | in the view | how |
//! |---|---|
//! | `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32` | read-only; a symlink into `/usr` (merged `/usr`) is made as the same symlink |
//! | `/etc` | read-only, with the entries of the [`EtcIndex`] covered (an empty file or directory) and `/etc/passwd` a generated file naming the call's `HOME` for its uid |
//! | `/etc`'s symlinks out of the view | their targets ([`EtcIndex::links`]), read-only at their own path |
//! | the pinned bin | read-only: its directory, and the one above when it is named `bin` (see [`bin_dirs`]); a script's interpreter likewise |
//! | `/dev` | `null`, `zero`, `full`, `random`, `urandom` (the host's nodes), the links `fd`, `stdin`, `stdout`, `stderr`, and `/dev/shm` |
//! | `/proc` | the call's own (its PID namespace), `/proc/sys`, `/proc/sysrq-trigger`, `/proc/irq`, `/proc/bus`, `/proc/fs` read-only, `/proc/kcore`, `/proc/keys`, `/proc/timer_list` masked; none where the kernel refuses it |
//! | `/tmp` (= `TMPDIR`), `/dev/shm` | the call's root tmpfs, at most `tmp_bytes` for both together, gone with the call |
//! | `HOME` | `personal`, `brain`: the tenant home at `/home/hcp`, read-only for a `read` verb, read-write for a `write` verb (this project's choice beside RUNTIME §5.2); `local`: the workdir, with its mode |
//! | the workdir (`local`) | at its own path, read-only for a `read` verb, read-write for a `write` verb with the protected names read-only |
//! | `read` / `write` paths | at their own path, read-only / read-write |
//! | the store (the bootstrap pack only) | read-only, with the names it may not read covered |
//!
//! `/sys` is absent. The root itself is a tmpfs, read-only once built.

mod build;
pub(crate) mod child;
pub mod etc;

pub use build::bin_dirs;
pub use etc::{Covered, EtcIndex, LinkTarget, Stamp, scan_etc, scan_etc_at};

use hcp_model::Land;
use serde::Serialize;
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The text of the host's `/etc/passwd` (read directly, without NSS), read once per
/// process and shared by what needs it (the view's own passwd entry, the machine's homes
/// `hcp_runtime` keeps out of a sandbox); empty when it cannot be read. Both users of it
/// kept their answer for the life of the process already.
pub fn host_passwd() -> &'static str {
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEXT.get_or_init(|| std::fs::read_to_string("/etc/passwd").unwrap_or_default())
}

/// Where a `personal` or `brain` call finds its tenant home: `/home/hcp` (RUNTIME §5.2).
pub const VIEW_HOME: &str = "/home/hcp";

/// The call's temporary directory in the view (its `TMPDIR`).
pub const VIEW_TMP: &str = "/tmp";

/// The protected names of a writable workdir when `sandbox.protect_in_workdir` does not
/// replace them (RUNTIME §5.1): what the owner's tools run next. Beside the contract's
/// list, `.git/commondir` and `.git/worktrees`: a `commondir` file (in `.git` or in a linked
/// worktree's directory) points git at another directory for its config and hooks, so a
/// call that could plant one would choose what the owner's next `git commit` runs.
pub const PROTECTED_IN_WORKDIR: [&str; 17] = [
    ".git/hooks",
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/worktrees",
    ".git/modules",
    ".claude",
    ".agents",
    ".codex",
    ".cursor",
    ".gemini",
    ".vscode",
    ".idea",
    ".husky",
    ".pre-commit-config.yaml",
    ".mcp.json",
    ".envrc",
];

/// The store as the bootstrap pack's child sees it (RUNTIME §5.1: read-only, without its
/// credentials, sessions, runtime policy, keys …).
#[derive(Debug, Clone, Copy)]
pub struct StoreView<'a> {
    /// `$HCP_HOME`, absolute.
    pub root: &'a Path,
    /// Names relative to the root the child may not read; each that exists is covered.
    pub hidden: &'a [&'a str],
}

/// What one call is given: the inputs of its view (RUNTIME §5.1). Paths are absolute; the
/// builder resolves symlinks itself where it binds a host path.
#[derive(Debug, Clone, Copy)]
pub struct ViewSpec<'a> {
    /// The verb's land.
    pub land: Land,
    /// The workdir of a `local` call, at its own path (ignored in other lands).
    pub workdir: &'a Path,
    /// A `write` verb: its `local` workdir read-write (with the protected names), its
    /// `personal`/`brain` tenant home read-write. A `read` verb gets both read-only, so
    /// that a read grant never plants what a later write call of the same home runs (a
    /// `~/.sqliterc`, a `~/.gitconfig`); `/tmp` stays its writable scratch.
    pub writes: bool,
    /// `personal` and `brain`: the tenant home on the host, bound at [`VIEW_HOME`],
    /// read-write for a `write` verb and read-only for a `read` verb ([`writes`](Self::writes)).
    /// Required in those lands.
    pub tenant_home: Option<&'a Path>,
    /// The pinned bin.
    pub bin: &'a Path,
    /// The files of a script bin's pinned interpreter (its `#!` line as install resolved
    /// it, [`crate::VerifiedBin::interpreters`]); empty for a bin that is not a script.
    pub interpreters: &'a [PathBuf],
    /// The homes of the machine (`$HOME`, the password database's), resolved: a bin's
    /// directory that is one, a top-level entry of one, or holds one is not bound whole
    /// ([`bin_dirs`]).
    pub homes: &'a [PathBuf],
    /// The stores the builder knows of (this one), resolved: never in a view but through
    /// [`store`](Self::store), and never held by a bound bin directory or operator path.
    pub stores: &'a [PathBuf],
    /// Read-only paths (`packs.ID.read`, `sandbox.read`).
    pub read: &'a [PathBuf],
    /// Read-write paths (`packs.ID.write`).
    pub write: &'a [PathBuf],
    /// The protected names of a writable workdir (relative, `.git/hooks` …).
    pub protect_in_workdir: &'a [String],
    /// The store, for the bootstrap pack only.
    pub store: Option<StoreView<'a>>,
    /// What `/etc` covers and which of its symlinks' targets are bound.
    pub etc: &'a EtcIndex,
    /// Bytes of the call's tmpfs (`/tmp` and `/dev/shm` together).
    pub tmp_bytes: u64,
}

/// How an entry of the view is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "target")]
pub enum EntryMode {
    /// A host path, read-only.
    ReadOnly,
    /// A host path, read-write.
    ReadWrite,
    /// The call's tmpfs (read-write, bounded).
    Tmpfs,
    /// A device node of the host.
    Device,
    /// The call's own `/proc`.
    Proc,
    /// Covered: an empty file or directory stands in its place.
    Masked,
    /// A file hcp generated for the call (`/etc/passwd`), read-only.
    Generated,
    /// A symlink, with its target.
    Symlink(PathBuf),
}

impl EntryMode {
    /// The short word `hcp show --view` prints: `ro`, `rw`, `tmpfs`, `dev`, `proc`,
    /// `masked`, `generated`, `symlink`.
    pub fn word(&self) -> &'static str {
        match self {
            Self::ReadOnly => "ro",
            Self::ReadWrite => "rw",
            Self::Tmpfs => "tmpfs",
            Self::Device => "dev",
            Self::Proc => "proc",
            Self::Masked => "masked",
            Self::Generated => "generated",
            Self::Symlink(_) => "symlink",
        }
    }
}

/// One entry of a view: a path in the child's root and how it is there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ViewEntry {
    /// The path the child sees.
    pub path: PathBuf,
    /// How.
    pub mode: EntryMode,
    /// The host path it shows, when it shows one (a bind), else `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<PathBuf>,
    /// Why it is there, lowercase (`pinned bin`, `link target of /etc/resolv.conf` …).
    pub why: &'static str,
}

/// What a protected name of the workdir was before the call (for the quarantine of
/// what a call creates, RUNTIME §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Before {
    /// Absent.
    Absent,
    /// A directory (bound read-only onto itself).
    Dir,
    /// A regular file (bound read-only onto itself).
    File,
    /// A symlink: left as it is (a mount cannot stand on a symlink), so a call may
    /// replace it; the quarantine compares its target.
    Symlink,
    /// Something else (a socket, a FIFO): left as it is.
    Other,
}

/// One protected name of a writable workdir as the builder found it before the call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProtectedName {
    /// The name relative to the workdir (`.git/hooks`).
    pub name: String,
    /// Its host path.
    pub path: PathBuf,
    /// What it was.
    pub before: Before,
}

/// The built view of one call: its entries and the child's mount steps.
#[derive(Debug)]
pub struct View {
    entries: Vec<ViewEntry>,
    protected: Vec<ProtectedName>,
    home: PathBuf,
    socket_listed: bool,
    pub(crate) ops: Vec<child::Op>,
    /// The host directory the root tmpfs is mounted on before `pivot_root`.
    pub(crate) base: CString,
    /// The tmpfs options (`size=…,mode=0755`).
    pub(crate) tmpfs_data: CString,
}

impl View {
    /// The view of `spec` (RUNTIME §5.1), prepared in the parent.
    ///
    /// # Errors
    /// `sandbox_unavailable` for what no view may hold: a `read` or `write` path that is
    /// `/`, lies in `/proc`, `/sys` or `/dev`, or holds or lies inside a store; a
    /// `personal`/`brain` call without a tenant home; `sandbox_failed` when a path cannot be
    /// resolved or holds a NUL byte.
    pub fn build(spec: &ViewSpec<'_>) -> Result<Self, crate::AdapterError> {
        build::build(spec, false)
    }

    /// [`build`](Self::build) of a spec whose workdir is resolved already.
    pub(crate) fn build_resolved(spec: &ViewSpec<'_>) -> Result<Self, crate::AdapterError> {
        build::build(spec, true)
    }

    /// The entries of the view, in the order they are made (what `hcp show --view` lists).
    pub fn describe(&self) -> &[ViewEntry] {
        &self.entries
    }

    /// The protected names of a writable `local` workdir as they were before the call
    /// (empty in other lands and for a `read` verb).
    pub fn protected_before(&self) -> &[ProtectedName] {
        &self.protected
    }

    /// Whether a read-write path of the configuration is a socket (RUNTIME §5.1: then
    /// `socket(2)` of `AF_UNIX` passes, and every pathname socket of the view is
    /// reachable).
    pub fn lists_socket(&self) -> bool {
        self.socket_listed
    }

    /// The child's `HOME` in the view: [`VIEW_HOME`], or a `local` call's workdir.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Whether `path` (absolute) exists in the view as the host's own path: beneath a
    /// read-only or read-write entry, or a symlink of the view (for the child's `PATH`,
    /// which keeps only the parent's entries that lie in the view). Lexical: `path` is
    /// compared as written.
    pub fn shows(&self, path: &Path) -> bool {
        path.is_absolute()
            && self.entries.iter().any(|e| match &e.mode {
                EntryMode::ReadOnly | EntryMode::ReadWrite => {
                    e.source.as_deref() == Some(e.path.as_path()) && path.starts_with(&e.path)
                }
                EntryMode::Symlink(_) => path.starts_with(&e.path),
                _ => false,
            })
    }

    /// The child's `PATH`: the entries of `path` (the parent's, `:`-separated) that lie in
    /// the view ([`shows`](Self::shows)), in order.
    pub fn path_var(&self, path: &std::ffi::OsStr) -> std::ffi::OsString {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let kept: Vec<&[u8]> = path
            .as_bytes()
            .split(|b| *b == b':')
            .filter(|e| !e.is_empty() && self.shows(Path::new(std::ffi::OsStr::from_bytes(e))))
            .collect();
        std::ffi::OsString::from_vec(kept.join(&b':'))
    }

    /// What step `i` of the plan does, for an error message (`-1`: the steps around the
    /// plan: the root tmpfs, `pivot_root`, the detach of the old root).
    pub fn describe_step(&self, i: i32) -> String {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.ops.get(i))
            .map_or_else(
                || "its root, pivot_root or the detach of the host's tree".to_owned(),
                child::Op::describe,
            )
    }

    /// How many mount system calls the child makes for this view (for the cost notes):
    /// the root tmpfs, `pivot_root`, and each bind, attribute change and detach.
    pub fn mount_calls(&self) -> usize {
        4 + self.ops.iter().map(child::Op::mount_calls).sum::<usize>()
    }
}

/// The mounts of the host that lie beneath a host directory the view binds (RUNTIME §5.1:
/// "what is mounted beneath one of them comes with it, since a user namespace admits only
/// recursive binds"), from `mountinfo` (the text of the caller's `/proc/self/mountinfo`):
/// each as (the view's entry, the mount point), for `hcp doctor` and `hcp show --view`.
pub fn mounts_beneath(view: &View, mountinfo: &str) -> Vec<(PathBuf, PathBuf)> {
    let points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(unescape_mountinfo)
        .collect();
    let mut out = Vec::new();
    for e in &view.entries {
        let Some(src) = &e.source else { continue };
        if !matches!(e.mode, EntryMode::ReadOnly | EntryMode::ReadWrite) {
            continue;
        }
        for p in &points {
            if p != src && p.starts_with(src) && !out.iter().any(|(_, q)| q == p) {
                out.push((e.path.clone(), p.clone()));
            }
        }
    }
    out
}

/// A mount point of `/proc/self/mountinfo`, its octal escapes (`\040` for a space) undone.
fn unescape_mountinfo(s: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && let Ok(n) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("x"), 8)
        {
            out.push(n);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}
