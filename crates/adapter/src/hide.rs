//! Paths no child of a call may read or write (RUNTIME §5 "Confinement of every land"):
//! `$HCP_HOME`, other principals' sandboxes, and the protected secrets.
//!
//! Landlock only allows: "everything but these" is either a complement (a rule for each
//! sibling along the path to each hidden entry) or a mount namespace in which each
//! hidden entry is covered. Measured here (BENCHMARKS.md, "Confinement"), a complement of
//! `/` around `~/.ssh`, `/etc/shadow` and the store is about 175 rules, 0.8 ms or more
//! per call (one `open(O_PATH)` and one `landlock_add_rule` each); a mount namespace with
//! a handful of mounts costs about 0.07 ms. So where the call gets a mount namespace
//! (always as root with `CAP_SYS_ADMIN`; as an ordinary user inside the call's user
//! namespace), each hidden directory is covered with a read-only bind of an empty
//! directory and each hidden file with a bind of a socket inode (`open` fails with
//! `ENXIO`), both made by the parent ([`Covers`]); elsewhere the
//! Landlock rules are the complement ([`complement`]).
//!
//! A mount made in the call's namespace cannot be undone from inside it: Landlock forbids
//! `mount`, `umount` and `pivot_root` to the child; `open_tree`, `move_mount`, the `fs*`
//! calls and `open_by_handle_at`, through which the covered entry could be reached under
//! another path, need `CAP_SYS_ADMIN` or `CAP_DAC_READ_SEARCH`, which no child keeps
//! after `execve` (an ordinary user has none; a root child loses them from its bounding
//! set); and in a user namespace of its own the child finds the covering mounts locked.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Entries of a home that hold credentials (RUNTIME §5): `~/.ssh`, `~/.gnupg`, `~/.aws`,
/// `~/.azure`, `~/.config/gcloud`, `~/.kube`, `~/.docker`, `~/.netrc`,
/// `~/.git-credentials`.
pub const HOME_SECRETS: [&str; 9] = [
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
];

/// The homes of the calling user whose [`HOME_SECRETS`] every call hides (RUNTIME §5:
/// "`~` is both `$HOME` as hcp sees it and the user's home in the password database"):
/// `home_env` (the caller's `$HOME`), then the effective user's entry of `/etc/passwd`
/// (read directly, without NSS: a user known only to a directory service is covered by
/// `$HOME` alone). Absolute paths only, deduplicated.
pub fn own_homes(home_env: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = home_env
        .filter(|h| h.is_absolute())
        .map(Path::to_path_buf)
        .into_iter()
        .collect();
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() }.to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    if let Some(home) = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() > 5 && f[2] == uid).then(|| PathBuf::from(f[5]))
    }) && home.is_absolute()
        && home != Path::new("/")
        && !out.contains(&home)
    {
        out.push(home);
    }
    out
}

/// System files that hold credentials: `/etc/shadow`, `/etc/gshadow`, and every entry
/// of `/etc/ssh` whose name holds `key` ([`system_secrets`]).
pub const SYSTEM_SECRETS: [&str; 2] = ["/etc/shadow", "/etc/gshadow"];

/// [`SYSTEM_SECRETS`] and `/etc/ssh/*key*`. The keys are looked for (a directory read)
/// only by root: `sshd` refuses host keys that anyone but root can read, so the
/// permission bits keep every other user out of them.
pub fn system_secrets() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = SYSTEM_SECRETS.iter().map(PathBuf::from).collect();
    if !crate::limits::running_as_root() {
        return v;
    }
    if let Ok(entries) = std::fs::read_dir("/etc/ssh") {
        v.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().as_bytes().windows(3).any(|w| w == b"key"))
                .map(|e| e.path()),
        );
    }
    v
}

/// Sockets of daemons that act for the user or for root beyond any call, hidden from
/// every call (a `connect()` to a covered socket is refused): the container engines'
/// (root-equivalent), the system D-Bus (polkit grants active sessions more than a call
/// may have). With the user's runtime directory ([`runtime_dir`]) and the sockets the
/// caller's environment names ([`session_sockets`]), they close the way out of a call
/// through a local daemon that starts programs outside it (`systemd-run --user` over the
/// session bus, an ssh or gpg agent, `docker run`).
pub const SYSTEM_SOCKETS: [&str; 6] = [
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
];

/// The user's runtime directory, `/run/user/<euid>`: the session bus, the user's
/// systemd manager, the gpg, ssh and sound agents.
pub fn runtime_dir() -> PathBuf {
    // SAFETY: geteuid cannot fail.
    PathBuf::from(format!("/run/user/{}", unsafe { libc::geteuid() }))
}

/// The agent and bus sockets that `env` (the caller's environment, as `hcp` got it) names:
/// `SSH_AUTH_SOCK`, the `unix:path=` of `DBUS_SESSION_BUS_ADDRESS`, `XDG_RUNTIME_DIR`,
/// `GPG_AGENT_INFO`'s socket. For the runtime to pass as `protect`.
pub fn session_sockets<K, V>(env: impl IntoIterator<Item = (K, V)>) -> Vec<PathBuf>
where
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let mut out = Vec::new();
    for (k, v) in env {
        let (k, v) = (k.as_ref().to_string_lossy(), v.as_ref().to_string_lossy());
        let path = match k.as_ref() {
            "SSH_AUTH_SOCK" | "XDG_RUNTIME_DIR" => Some(v.to_string()),
            "GPG_AGENT_INFO" => v.split(':').next().map(str::to_owned),
            "DBUS_SESSION_BUS_ADDRESS" => v
                .split(';')
                .flat_map(|a| a.split(','))
                .find_map(|kv| {
                    kv.split_once(':')
                        .map_or(kv, |(_, r)| r)
                        .strip_prefix("path=")
                })
                .map(str::to_owned),
            _ => None,
        };
        out.extend(path.map(PathBuf::from).filter(|p| p.is_absolute()));
    }
    out
}

/// The block devices holding data (`/proc/partitions`): root reads a raw disk by its
/// permission bits alone, and with it every hidden file on it, so a root child that may
/// read `/dev` gets them hidden too. Other users are kept out by the bits (`0660 root
/// disk` or tighter), which the call checks.
pub fn block_devices() -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string("/proc/partitions") else {
        return Vec::new();
    };
    text.lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().nth(3))
        .map(|name| Path::new("/dev").join(name))
        .collect()
}

/// Whether the kernel's permission bits alone keep this process from reading and from
/// writing `path` (a directory: from entering it). Root is never kept out this way.
fn dac_keeps_out(path: &Path, is_dir: bool) -> bool {
    use nix::unistd::AccessFlags;
    if crate::limits::running_as_root() {
        return false;
    }
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    let can = |mode| {
        // SAFETY: a NUL-terminated path; faccessat reads it only.
        unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mode, libc::AT_EACCESS) == 0 }
    };
    if is_dir {
        !can(AccessFlags::X_OK.bits())
    } else {
        !can(AccessFlags::R_OK.bits()) && !can(AccessFlags::W_OK.bits())
    }
}

/// One entry to cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hidden {
    /// The path as resolved (symlinks followed: the mount covers the target).
    pub path: PathBuf,
    /// A directory (else a file).
    pub dir: bool,
}

/// The entries to cover among `candidates`: those that exist, that this process could
/// otherwise read or write, that lie beneath one of `readable` (what the Landlock rules
/// would let the child reach), and that no other hidden entry already holds. Each
/// `reveal` path (an operator's `read` grant) is taken out: a candidate it equals or
/// holds is not hidden, and a candidate that holds it is replaced by its other entries
/// (one level at a time down to the granted path).
pub(crate) fn hidden(
    candidates: &[PathBuf],
    readable: &[PathBuf],
    reveal: &[PathBuf],
) -> Vec<Hidden> {
    let mut out: Vec<Hidden> = Vec::new();
    let mut queue: Vec<PathBuf> = candidates.to_vec();
    while let Some(p) = queue.pop() {
        // One `lstat` for the common case (absent, or not a symlink); a symlink is
        // resolved, since the mount covers its target.
        let Ok(lmeta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let (path, meta) = if lmeta.file_type().is_symlink() {
            let Ok(meta) = std::fs::metadata(&p) else {
                continue;
            };
            (p.canonicalize().unwrap_or(p), meta)
        } else {
            (p, lmeta)
        };
        if reveal.iter().any(|r| path.starts_with(r)) {
            continue;
        }
        if meta.is_dir() && reveal.iter().any(|r| r.starts_with(&path)) {
            // Cover every entry but the way to the granted path.
            if let Ok(entries) = std::fs::read_dir(&path) {
                for e in entries.flatten() {
                    let ep = e.path();
                    if !reveal.iter().any(|r| r == &ep) {
                        queue.push(ep);
                    }
                }
            }
            continue;
        }
        if !readable.iter().any(|r| path.starts_with(r)) || dac_keeps_out(&path, meta.is_dir()) {
            continue;
        }
        out.push(Hidden {
            path,
            dir: meta.is_dir(),
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup();
    // Drop what a hidden directory already covers.
    let dirs: Vec<PathBuf> = out
        .iter()
        .filter(|h| h.dir)
        .map(|h| h.path.clone())
        .collect();
    out.retain(|h| !dirs.iter().any(|d| h.path != *d && h.path.starts_with(d)));
    out
}

/// What hidden entries are covered with: an empty directory (mode `000`) for
/// directories and a socket inode (opening it fails with `ENXIO`, for reading and for
/// writing) for files. Made once per user and kept ([`Covers::shared`]):
/// `hcp-covers-<euid>` beside the private `TMPDIR`s, mode `0700`, which no child may
/// write (it lies outside its `TMPDIR`); a call binds them, so they must exist only while
/// its child starts. Where that directory is not as hcp makes it (another owner, another
/// mode), the call makes its own, `hcp-exec-<pid>-hide-XXXXXX`, removed on drop and swept
/// with the private `TMPDIR`s ([`Covers::create_in`]). Binding these costs a few
/// microseconds a mount; a fresh tmpfs per call cost more to make and to tear down.
#[derive(Debug)]
pub(crate) struct Covers {
    /// A directory of this call's own, removed on drop; `None` for the shared one.
    dir: Option<tempfile::TempDir>,
    empty: CString,
    socket: CString,
}

/// The start of the shared covers' name, followed by the effective uid.
const SHARED_PREFIX: &str = "hcp-covers-";

fn cstring(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

/// Makes `empty` (a directory, mode `000`) and `socket` (a socket inode) in `dir`.
fn fill(dir: &Path) -> std::io::Result<(CString, CString)> {
    use std::os::unix::fs::PermissionsExt;
    let empty = dir.join("empty");
    std::fs::create_dir(&empty)?;
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o000))?;
    let socket = cstring(&dir.join("socket"))?;
    // SAFETY: a NUL-terminated path; a socket inode needs no privilege.
    if unsafe { libc::mknod(socket.as_ptr(), libc::S_IFSOCK | 0o600, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((cstring(&empty)?, socket))
}

/// Whether `dir` is the shared covers as hcp makes them: a directory (not a symlink)
/// owned by the effective user, mode `0700`, holding `empty` (a directory, mode `000`) and
/// `socket` (a socket), both the user's. Three `lstat`s.
fn is_ours(dir: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let ok = |p: &Path, want: &dyn Fn(&std::fs::FileType) -> bool, mode: u32| {
        std::fs::symlink_metadata(p)
            .is_ok_and(|m| want(&m.file_type()) && m.uid() == uid && m.mode() & 0o7777 == mode)
    };
    ok(dir, &|t| t.is_dir(), 0o700)
        && ok(&dir.join("empty"), &|t| t.is_dir(), 0o000)
        && ok(&dir.join("socket"), &|t| t.is_socket(), 0o600)
}

impl Covers {
    /// The user's shared covers under `base`, made on first use (in a temporary name,
    /// then renamed into place, so that concurrent calls see them whole); a call's own
    /// ([`create_in`](Self::create_in)) where the shared ones are not as hcp makes them.
    pub(crate) fn shared(base: &Path) -> std::io::Result<Self> {
        // SAFETY: geteuid cannot fail.
        let dir = base.join(format!("{SHARED_PREFIX}{}", unsafe { libc::geteuid() }));
        let found = |dir: &Path| -> std::io::Result<Self> {
            Ok(Self {
                dir: None,
                empty: cstring(&dir.join("empty"))?,
                socket: cstring(&dir.join("socket"))?,
            })
        };
        if is_ours(&dir) {
            return found(&dir);
        }
        if std::fs::symlink_metadata(&dir).is_err() {
            use std::os::unix::fs::PermissionsExt;
            let tmp = tempfile::Builder::new()
                .prefix(&format!("hcp-exec-{}-hide-", std::process::id()))
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir_in(base)?;
            fill(tmp.path())?;
            if std::fs::rename(tmp.path(), &dir).is_ok() {
                let _ = tmp.keep();
            } else {
                // Another call made them first; ours go with `tmp`.
                let _ = std::fs::set_permissions(
                    tmp.path().join("empty"),
                    std::fs::Permissions::from_mode(0o700),
                );
            }
            if is_ours(&dir) {
                return found(&dir);
            }
        }
        Self::create_in(base)
    }

    /// A call's own covers under `base`, removed on drop.
    pub(crate) fn create_in(base: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix(&format!("hcp-exec-{}-hide-", std::process::id()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        let (empty, socket) = fill(dir.path())?;
        Ok(Self {
            dir: Some(dir),
            empty,
            socket,
        })
    }
}

impl Drop for Covers {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        if let Some(dir) = self.dir.take() {
            let _ = std::fs::set_permissions(
                dir.path().join("empty"),
                std::fs::Permissions::from_mode(0o700),
            );
            let _ = dir.close();
        }
    }
}

/// What the child mounts in its own mount namespace, as C strings made in the parent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MountPlan {
    /// Make every mount a slave first (a mount namespace of the same user namespace
    /// shares propagation with the parent's; one of a new user namespace does not).
    pub slave_root: bool,
    /// Directories: each gets a bind of the empty directory, made a read-only mount
    /// first.
    pub dirs: Vec<CString>,
    /// Files: a bind of the socket inode.
    pub files: Vec<CString>,
    /// The empty directory of [`Covers`].
    pub empty: CString,
    /// The socket inode of [`Covers`].
    pub socket: CString,
    /// Mount a `/proc` of the call's PID namespace over `/proc`, so that the child sees
    /// its own processes only (not other calls' or the owner's command lines).
    pub proc: bool,
}

impl MountPlan {
    pub(crate) fn new(hidden: &[Hidden], slave_root: bool, covers: &Covers, proc: bool) -> Self {
        let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).ok();
        Self {
            slave_root,
            dirs: hidden
                .iter()
                .filter(|h| h.dir)
                .filter_map(|h| c(&h.path))
                .collect(),
            files: hidden
                .iter()
                .filter(|h| !h.dir)
                .filter_map(|h| c(&h.path))
                .collect(),
            empty: covers.empty.clone(),
            socket: covers.socket.clone(),
            proc,
        }
    }

    /// Applies the plan in the child (async-signal-safe, no allocation). Returns 0 or
    /// the errno of the failed `mount`.
    pub(crate) fn apply_in_child(&self) -> i32 {
        let errno = || {
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL)
        };
        let bind = |from: &CString, to: &CString| {
            // SAFETY: mount(2) with NUL-terminated strings the parent owns.
            unsafe {
                libc::mount(
                    from.as_ptr(),
                    to.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            }
        };
        // SAFETY: mount(2) with NUL-terminated strings the parent owns.
        if self.slave_root
            && unsafe {
                libc::mount(
                    std::ptr::null(),
                    c"/".as_ptr(),
                    std::ptr::null(),
                    libc::MS_REC | libc::MS_SLAVE,
                    std::ptr::null(),
                )
            } != 0
        {
            return errno();
        }
        // The empty directory becomes a read-only mount of its own first, and every
        // hidden directory a bind of it (a bind keeps the source's read-only flag). Not a
        // bind of the first hidden directory: that one may be another call's private
        // `TMPDIR`, whose removal there detaches its mounts here too.
        if !self.dirs.is_empty() {
            let ro = libc::MS_REMOUNT
                | libc::MS_BIND
                | libc::MS_RDONLY
                | libc::MS_NOSUID
                | libc::MS_NODEV
                | libc::MS_NOEXEC;
            if bind(&self.empty, &self.empty) != 0
                // SAFETY: as above.
                || unsafe {
                    libc::mount(std::ptr::null(), self.empty.as_ptr(), std::ptr::null(), ro, std::ptr::null())
                } != 0
            {
                return errno();
            }
        }
        // A target gone since the parent planned the mounts (another call's private
        // `TMPDIR` removed meanwhile) is skipped: there is nothing left there to reach.
        let gone = |e: i32| e == libc::ENOENT;
        for d in &self.dirs {
            if bind(&self.empty, d) != 0 && !gone(errno()) {
                return errno();
            }
        }
        for f in &self.files {
            if bind(&self.socket, f) != 0 && !gone(errno()) {
                return errno();
            }
        }
        // SAFETY: mount(2) with static strings.
        if self.proc
            && unsafe {
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    std::ptr::null(),
                )
            } != 0
        {
            return errno();
        }
        0
    }
}

/// The complement of `hidden` beneath `root`: the entries of `root` and, for each
/// directory on the way to a hidden entry, its other entries, so that a rule on each
/// reaches everything beneath `root` but the hidden entries. `root` itself when nothing
/// hidden lies strictly beneath it. Entries made after this call are not covered (and so
/// stay out of reach).
pub(crate) fn complement(root: &Path, hidden: &[Hidden]) -> Vec<PathBuf> {
    let inside: Vec<&Path> = hidden
        .iter()
        .map(|h| h.path.as_path())
        .filter(|h| h.starts_with(root) && *h != root)
        .collect();
    if inside.is_empty() {
        return vec![root.to_owned()];
    }
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if inside.contains(&p.as_path()) {
            continue;
        }
        if inside.iter().any(|h| h.starts_with(&p)) && e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(complement(&p, hidden));
        } else {
            out.push(p);
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hidden_keeps_what_exists_drops_nested_and_reveals_grants() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        for p in ["home/.ssh/sub", "home/.aws", "home/.config/gcloud", "hcp"] {
            std::fs::create_dir_all(r.join(p)).unwrap();
        }
        std::fs::write(r.join("home/.netrc"), "x").unwrap();
        std::fs::write(r.join("home/.aws/config"), "x").unwrap();
        std::fs::write(r.join("home/.aws/credentials"), "x").unwrap();
        let cand: Vec<PathBuf> = [
            "home/.ssh",
            "home/.ssh/sub",
            "home/.netrc",
            "home/.kube",
            "home/.aws",
            "hcp",
        ]
        .iter()
        .map(|p| r.join(p))
        .collect();
        let h = hidden(
            &cand,
            std::slice::from_ref(&r),
            &[r.join("home/.aws/config")],
        );
        let paths: Vec<PathBuf> = h
            .iter()
            .map(|h| h.path.strip_prefix(&r).unwrap().to_owned())
            .collect();
        assert_eq!(
            paths,
            ["hcp", "home/.aws/credentials", "home/.netrc", "home/.ssh"]
                .iter()
                .map(PathBuf::from)
                .collect::<Vec<_>>()
        );
        assert!(h[0].dir && !h[1].dir);
        // Outside what the child can read: nothing to hide.
        assert!(hidden(&cand, &[r.join("elsewhere")], &[]).is_empty());
    }

    #[test]
    fn shared_covers_are_made_once_and_only_trusted_as_made() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let a = Covers::shared(base.path()).unwrap();
        assert!(a.dir.is_none(), "shared");
        let b = Covers::shared(base.path()).unwrap();
        assert_eq!((&a.empty, &a.socket), (&b.empty, &b.socket));
        drop(a);
        // SAFETY: geteuid cannot fail.
        let shared = base
            .path()
            .join(format!("hcp-covers-{}", unsafe { libc::geteuid() }));
        assert!(is_ours(&shared), "kept after the call");
        // Not as hcp makes them (a wider mode): the call makes its own.
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        let c = Covers::shared(base.path()).unwrap();
        assert!(c.dir.is_some(), "a call's own");
        let own = c.dir.as_ref().unwrap().path().to_owned();
        drop(c);
        assert!(!own.exists());
    }

    #[test]
    fn own_homes_are_home_and_the_password_entry() {
        let h = own_homes(Some(Path::new("/nonexistent-home")));
        assert_eq!(h[0], PathBuf::from("/nonexistent-home"));
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            assert!(h.contains(&PathBuf::from("/root")), "{h:?}");
        }
        assert!(
            own_homes(Some(Path::new("relative")))
                .iter()
                .all(|p| p.is_absolute())
        );
    }

    #[test]
    fn session_sockets_are_read_from_the_environment() {
        let env = [
            ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/run/user/1000/bus,guid=1",
            ),
            ("XDG_RUNTIME_DIR", "/run/user/1000"),
            ("GPG_AGENT_INFO", "/run/user/1000/gnupg/S.gpg-agent:0:1"),
            ("HOME", "/home/u"),
            ("SSH_AUTH_SOCK", "relative"),
        ];
        assert_eq!(
            session_sockets(env),
            [
                "/tmp/ssh-x/agent.1",
                "/run/user/1000/bus",
                "/run/user/1000",
                "/run/user/1000/gnupg/S.gpg-agent"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn the_complement_leaves_out_exactly_the_hidden() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().canonicalize().unwrap();
        for p in ["a/b/secret", "a/b/ok", "a/c", "z"] {
            std::fs::create_dir_all(r.join(p)).unwrap();
        }
        let h = [Hidden {
            path: r.join("a/b/secret"),
            dir: true,
        }];
        let mut c = complement(&r, &h);
        c.sort();
        assert_eq!(c, vec![r.join("a/b/ok"), r.join("a/c"), r.join("z")]);
        assert_eq!(complement(&r.join("z"), &h), vec![r.join("z")]);
    }
}
