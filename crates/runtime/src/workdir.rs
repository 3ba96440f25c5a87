//! Which directories may be a working directory (RUNTIME §4 `--workdir`): the one function
//! that `hcp session start --workdir DIR` and a `local` call without a session workdir (its
//! caller's current directory) both answer to.
//!
//! A workdir is built from what it is given, never checked against what it is denied: it
//! must be an existing directory the owner may write; it may be none of, hold none of and
//! lie inside none of the system directories (those of §5.1, `/proc`, `/sys`, `/dev`,
//! `/run`, `/var/run`, `/dev/shm`, `/var`, `/boot`, `/opt`, `/snap`); it may be and hold
//! none of the shared roots (`/`, `/tmp`, `/var/tmp`, `/home`, `/srv`, `/mnt`, `/media`),
//! though a directory below one is fine; it may be and hold no home (`$HOME` and each home of the
//! password database), lie in none of a home's dot-directories, and be, hold or lie
//! inside neither the store, the
//! tenant homes, or (at `session start` only) the workdir of a live session of another
//! principal. A refusal is `bad_workdir` (exit 64) and its message names the rule.
//!
//! Sessions constrain each other in that one rule, at start, and nowhere else: no call
//! reads other sessions, so one session's workdir or a damaged session record never
//! refuses another principal's call.

use crate::Refusal;
use hcp_model::Code;
use std::path::{Path, PathBuf};

/// The places a workdir may neither be, hold nor lie inside (RUNTIME §4): the adapter's
/// [`hcp_adapter::NOT_A_SANDBOX`] (the system directories of §5.1, `/proc`, `/sys`, `/dev`,
/// `/run`, `/var` …) and `/var/run` and `/dev/shm`; `/var/tmp` lies in `/var` but is one of
/// [`hcp_adapter::SHARED_ROOTS`]. Resolved through their symlinks before use (`/bin` →
/// `/usr/bin`, `/var/run` → `/run`).
pub const EXTRA_SYSTEM: [&str; 2] = ["/var/run", "/dev/shm"];

/// The rule of RUNTIME §4 a workdir broke, named in the refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// It does not exist (or cannot be resolved).
    Missing,
    /// It is not a directory.
    NotADirectory,
    /// Its resolved path is not UTF-8 (the trail and the session record are JSON).
    NotUtf8,
    /// The owner may not write it.
    NotWritable,
    /// It is `/`.
    Root,
    /// It is, holds or lies inside a system directory, or is or holds a shared root.
    SharedPlace,
    /// It is or holds a home, or lies in a home's dot-directory.
    Home,
    /// It is, holds or lies inside the store, or the tenant homes.
    Store,
    /// It lies inside or holds the workdir of a live session of another principal.
    OtherSession,
}

impl Rule {
    /// The rule's name as the refusal prints it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Missing => "an existing directory",
            Self::NotADirectory => "a directory",
            Self::NotUtf8 => "a UTF-8 path",
            Self::NotWritable => "writable by the owner",
            Self::Root => "not `/`",
            Self::SharedPlace => "no system directory or shared root",
            Self::Home => "no home",
            Self::Store => "not the store",
            Self::OtherSession => "no other principal's workdir",
        }
    }
}

/// What a workdir is checked against, gathered by the caller.
#[derive(Debug, Clone, Default)]
pub struct Around {
    /// The store's root and the tenant homes' directory.
    pub stores: Vec<PathBuf>,
    /// The machine's homes, resolved ([`machine_homes`]).
    pub homes: Vec<PathBuf>,
    /// The workdirs of live sessions of other principals (empty for a call).
    pub others: Vec<PathBuf>,
    /// Whether the owner must be able to write it (a session's, a write verb's).
    pub writable: bool,
}

/// Checks `dir` against every rule of RUNTIME §4 and returns it resolved (`realpath`).
///
/// # Errors
/// `bad_workdir` (exit 64) naming `dir`, the rule it broke and what it collided with.
pub fn check(dir: &Path, around: &Around) -> Result<PathBuf, Refusal> {
    let refuse = |(rule, why): (Rule, String)| {
        Refusal::new(
            Code::BadWorkdir,
            format!(
                "working directory `{}` {why} (rule: {})",
                dir.display(),
                rule.name()
            ),
        )
        .hint(
            "give a project directory of its own (for example one below `/tmp` or inside a home, not its dot-directories); the rules: README.md, \"Working directories\"",
        )
    };
    rules(dir, around).map_err(refuse)
}

/// A broken rule and what broke it.
type Broken = (Rule, String);

fn rules(dir: &Path, around: &Around) -> Result<PathBuf, Broken> {
    let work = std::fs::canonicalize(dir).map_err(|e| {
        (
            Rule::Missing,
            match e.kind() {
                std::io::ErrorKind::NotFound => "does not exist".into(),
                std::io::ErrorKind::PermissionDenied => {
                    "cannot be resolved: permission denied".into()
                }
                _ => format!("cannot be resolved: {}", e.to_string().to_lowercase()),
            },
        )
    })?;
    if !work.is_dir() {
        return Err((Rule::NotADirectory, "is not a directory".into()));
    }
    if work.to_str().is_none() {
        return Err((
            Rule::NotUtf8,
            format!("resolves to `{}`, which is not UTF-8", work.display()),
        ));
    }
    if work == Path::new("/") {
        return Err((Rule::Root, "is `/`".into()));
    }
    places_rule(&work)?;
    homes_rule(&work, &around.homes)?;
    around_rule(&work, around)?;
    if around.writable && nix::unistd::access(&work, nix::unistd::AccessFlags::W_OK).is_err() {
        return Err((Rule::NotWritable, "is not writable by the owner".into()));
    }
    Ok(work)
}

fn places_rule(work: &Path) -> Result<(), Broken> {
    let (systems, shared) = places();
    for root in shared {
        if work == root {
            return Err((
                Rule::SharedPlace,
                format!(
                    "is `{}`, shared by every user and program; use a directory below it",
                    root.display()
                ),
            ));
        }
        if root.starts_with(work) {
            return Err((Rule::SharedPlace, format!("holds `{}`", root.display())));
        }
    }
    let below_shared = shared.iter().any(|r| work.starts_with(r));
    for place in systems {
        if work == place {
            return Err((
                Rule::SharedPlace,
                format!("is the system directory `{}`", place.display()),
            ));
        }
        if place.starts_with(work) {
            return Err((
                Rule::SharedPlace,
                format!("holds the system directory `{}`", place.display()),
            ));
        }
        if work.starts_with(place) && !below_shared {
            return Err((
                Rule::SharedPlace,
                format!("lies inside the system directory `{}`", place.display()),
            ));
        }
    }
    Ok(())
}

fn homes_rule(work: &Path, homes: &[PathBuf]) -> Result<(), Broken> {
    for home in homes {
        if work == home {
            return Err((
                Rule::Home,
                "is a home; use a project directory inside it".into(),
            ));
        }
        if home.starts_with(work) {
            return Err((Rule::Home, format!("holds the home `{}`", home.display())));
        }
        if let Ok(rest) = work.strip_prefix(home)
            && let Some(first) = rest.components().next()
            && first.as_os_str().as_encoded_bytes().starts_with(b".")
        {
            return Err((
                Rule::Home,
                format!(
                    "lies inside `{}`, a dot-directory of a home (configuration, keys, tools)",
                    home.join(first).display()
                ),
            ));
        }
    }
    Ok(())
}

fn around_rule(work: &Path, around: &Around) -> Result<(), Broken> {
    for store in &around.stores {
        let store = std::fs::canonicalize(store).unwrap_or_else(|_| store.clone());
        let how = if work == store {
            "is"
        } else if work.starts_with(&store) {
            "lies inside"
        } else if store.starts_with(work) {
            "holds"
        } else {
            continue;
        };
        return Err((
            Rule::Store,
            format!("{how} the store's `{}`", store.display()),
        ));
    }
    for other in &around.others {
        let other = std::fs::canonicalize(other).unwrap_or_else(|_| other.clone());
        let how = if work.starts_with(&other) {
            "lies inside"
        } else if other.starts_with(work) {
            "holds"
        } else {
            continue;
        };
        return Err((
            Rule::OtherSession,
            format!(
                "{how} `{}`, the workdir of a live session of another principal",
                other.display()
            ),
        ));
    }
    Ok(())
}

/// The system directories and the shared roots, resolved, once per process.
fn places() -> &'static (Vec<PathBuf>, Vec<PathBuf>) {
    static PLACES: std::sync::OnceLock<(Vec<PathBuf>, Vec<PathBuf>)> = std::sync::OnceLock::new();
    PLACES.get_or_init(|| {
        let list = |names: &mut dyn Iterator<Item = &&str>| {
            let mut v: Vec<PathBuf> = names.map(|p| resolve(Path::new(p))).collect();
            v.sort();
            v.dedup();
            v
        };
        (
            list(&mut hcp_adapter::NOT_A_SANDBOX.iter().chain(EXTRA_SYSTEM.iter())),
            list(&mut hcp_adapter::SHARED_ROOTS.iter()),
        )
    })
}

/// `p` as `realpath` resolves it, else as written: from the adapter's listing of `/`
/// ([`hcp_adapter::resolve_system_path`], no system call for a top-level name), which
/// the view reads anyway. Where that answers another path, it is what `realpath` answers
/// when that path exists; a symlink that leads nowhere keeps `p` as written.
fn resolve(p: &Path) -> PathBuf {
    let r = hcp_adapter::resolve_system_path(p);
    if r != p && !r.exists() {
        return p.to_owned();
    }
    r
}

/// The places no workdir may be, hold or lie inside: the store's root and the tenant
/// homes' directory `homes`. A homes directory made a link (to `/`, say) is damage `hcp
/// doctor` names, and no call's home is made through it: what it points to is not the
/// homes, so it is not kept from being a workdir (the link itself lies in the store, or
/// where it was put).
pub fn stores_of(root: &Path, homes: PathBuf) -> Vec<PathBuf> {
    let is_link = std::fs::symlink_metadata(&homes).is_ok_and(|m| m.file_type().is_symlink());
    let mut stores = vec![root.to_owned()];
    if !is_link {
        stores.push(homes);
    }
    stores
}

/// What a workdir of `rt`'s store is checked against: the store, the tenant homes, the
/// machine's homes; `others` and `writable` as given.
///
/// # Errors
/// `bad_config` when `config.json` does not load (it says where the tenant homes are).
pub fn around(
    rt: &crate::Runtime,
    others: Vec<PathBuf>,
    writable: bool,
) -> Result<Around, Refusal> {
    let homes = crate::home::homes(rt)?;
    Ok(Around {
        stores: stores_of(rt.home().root(), homes),
        homes: machine_homes(std::env::var_os("HOME").map(PathBuf::from)),
        others,
        writable,
    })
}

/// Checks the `--workdir` of `hcp session start --principal PRINCIPAL` (RUNTIME §4): every
/// rule, the live sessions of other principals included (a damaged session record is not
/// read: it names no principal and constrains nobody; nor is a workdir that breaks the
/// rules itself).
///
/// # Errors
/// `bad_workdir` (64) naming the rule; `bad_config`; the state's when sessions cannot be
/// listed.
pub fn for_session(
    rt: &crate::Runtime,
    principal: &str,
    dir: &Path,
    now: hcp_store::session::Timestamp,
) -> Result<PathBuf, Refusal> {
    let mut around = around(rt, Vec::new(), true)?;
    // A live session's workdir that breaks the rules itself (`/`, stored by an earlier
    // version) is refused at its every call; it constrains no one else.
    let others: Vec<PathBuf> = rt
        .state()
        .session_list()
        .map_err(|e| Refusal::store(&e))?
        .into_iter()
        .filter(|s| s.principal.as_str() != principal)
        .filter(|s| s.state(now) == hcp_store::session::SessionState::Active)
        .filter_map(|s| s.workdir)
        .filter(|w| check(w, &around).is_ok())
        .collect();
    around.others = others;
    check(dir, &around)
}

/// The machine's homes, resolved (`realpath`): `home_env` (the caller's `$HOME`) and every
/// home of `/etc/passwd` (see [`user_homes`]), for the rule of a bin's directory in the view
/// and a `local` workdir's. Read and resolved once per process for a given `home_env`.
pub fn machine_homes(home_env: Option<PathBuf>) -> Vec<PathBuf> {
    static HOMES: std::sync::Mutex<Option<(Option<PathBuf>, Vec<PathBuf>)>> =
        std::sync::Mutex::new(None);
    let mut cached = HOMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((env, homes)) = cached.as_ref()
        && *env == home_env
    {
        return homes.clone();
    }
    let homes: Vec<PathBuf> = user_homes(home_env.clone().into_iter())
        .into_iter()
        .map(|h| h.canonicalize().unwrap_or(h))
        .collect();
    *cached = Some((home_env, homes.clone()));
    homes
}

/// Home directories a sandbox may not be, hold, or lie in a dot-directory of:
/// `from_env` (the caller's `$HOME`) and every home in /etc/passwd (read directly, without
/// NSS; a user only known to a directory service is covered by `$HOME` alone), except
/// `/` and homes inside `hcp_adapter::NOT_A_SANDBOX` directories (no sandbox lies there
/// anyway). Deduplicated, in that order.
fn user_homes(from_env: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = from_env.filter(|h| h.is_absolute()).collect();
    for home in hcp_adapter::view::host_passwd()
        .lines()
        .filter_map(|l| l.split(':').nth(5))
        .map(PathBuf::from)
    {
        let system = hcp_adapter::NOT_A_SANDBOX
            .iter()
            .any(|d| home.starts_with(d));
        if home.is_absolute() && home != Path::new("/") && !system && !homes.contains(&home) {
            homes.push(home);
        }
    }
    homes
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rule_of(dir: &Path, around: &Around) -> String {
        check(dir, around).unwrap_err().message
    }

    #[test]
    fn every_rule_refuses_with_its_name() {
        let t = tempfile::tempdir().unwrap();
        let store = t.path().join("store");
        std::fs::create_dir(&store).unwrap();
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".config/x")).unwrap();
        std::fs::create_dir_all(home.join("project")).unwrap();
        let other = t.path().join("other");
        std::fs::create_dir_all(other.join("inner")).unwrap();
        let file = t.path().join("file");
        std::fs::write(&file, "").unwrap();
        let around = Around {
            stores: vec![store.clone()],
            homes: vec![home.clone()],
            others: vec![other.clone()],
            writable: true,
        };
        for (dir, rule) in [
            (PathBuf::from("/"), Rule::Root),
            (PathBuf::from("/usr"), Rule::SharedPlace),
            (PathBuf::from("/usr/share"), Rule::SharedPlace),
            (PathBuf::from("/etc"), Rule::SharedPlace),
            (PathBuf::from("/tmp"), Rule::SharedPlace),
            (PathBuf::from("/var"), Rule::SharedPlace),
            (PathBuf::from("/dev/shm"), Rule::SharedPlace),
            (PathBuf::from("/proc/self"), Rule::SharedPlace),
            (home.clone(), Rule::Home),
            (home.join(".config/x"), Rule::Home),
            (store.clone(), Rule::Store),
            (t.path().to_owned(), Rule::Home),
            (other.join("inner"), Rule::OtherSession),
            (file.clone(), Rule::NotADirectory),
            (t.path().join("missing"), Rule::Missing),
        ] {
            let m = rule_of(&dir, &around);
            assert!(m.contains(rule.name()), "{}: {m}", dir.display());
        }
        let in_store = store.join("state");
        std::fs::create_dir(&in_store).unwrap();
        assert!(rule_of(&in_store, &around).contains(Rule::Store.name()));
        assert!(check(&home.join("project"), &around).is_ok());
        // A directory below /tmp is fine (the temporary directory lies there).
        if t.path().starts_with(resolve(Path::new("/tmp"))) {
            assert!(check(t.path(), &Around::default()).is_ok());
        }
    }
}
