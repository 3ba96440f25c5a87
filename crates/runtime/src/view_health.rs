//! `hcp doctor`'s part on the view (RUNTIME §5.1–§5.4): what the operator gave calls beyond
//! the view every call gets, and what the machine lacks for it.
//!
//! - every operator-given socket (a `packs.ID.write` entry that is a Unix socket: then
//!   every pathname socket of that pack's view is reachable), every pack with the `host`
//!   network, every write path;
//! - the mounts found beneath a path an installed pack's view binds (the kernel brings them
//!   along: a user namespace admits only recursive binds);
//! - how old the store's index of `/etc` is (`hcp doctor --refresh` scans it again);
//! - the kernel mechanism an ordinary user's view needs and, when it is missing, its fix
//!   (Ubuntu 23.10 and later: an AppArmor profile granting hcp `userns`);
//! - the keys of earlier configurations that are read and ignored (`sandbox.protect`,
//!   `sandbox.tmpdir`);
//! - what the quarantine holds (protected names calls created, `hcp_store::quarantine`).

use hcp_store::Home;
use hcp_store::config::RuntimeConfig;
use serde::Serialize;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// The view part of `hcp doctor`'s report.
#[derive(Debug, Serialize)]
pub struct ViewHealth {
    /// `packs.ID.write` entries that are Unix sockets (RUNTIME §5.1: with one, `socket(2)`
    /// of `AF_UNIX` passes and every pathname socket of the pack's view is reachable).
    pub sockets: Vec<PackPath>,
    /// Packs whose children get the host's network (`host`); `*` when `sandbox.network`
    /// gives it to every pack without its own.
    pub host_network: Vec<String>,
    /// Every `packs.ID.write` path: read-write in that pack's every view.
    pub write_paths: Vec<PackPath>,
    /// The mount points found beneath a path of the view (its host path first).
    pub mounts_beneath: Vec<MountBeneath>,
    /// The store's index of `/etc` (RUNTIME §5.1).
    pub etc_index: EtcIndexHealth,
    /// The mechanism an ordinary user's view needs (a user namespace), when it is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing_mechanism: Option<MissingMechanism>,
    /// Keys of `config.json` read and ignored (RUNTIME §5.3 "Earlier configurations").
    pub ignored_keys: Vec<String>,
    /// What the quarantine holds, one entry per call.
    pub quarantine: Vec<hcp_store::quarantine::Held>,
}

/// A path `config.json` gives a pack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PackPath {
    /// The pack id.
    pub pack: String,
    /// The path.
    pub path: PathBuf,
}

/// A mount of the host beneath a path some pack's view binds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MountBeneath {
    /// The pack whose view holds it (the first, when several do).
    pub pack: String,
    /// The view's entry it lies beneath (its path in the view).
    pub view_path: PathBuf,
    /// The mount point on the host.
    pub mount_point: PathBuf,
}

/// The store's index of `/etc`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EtcIndexHealth {
    /// When it was made (RFC 3339), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scanned_at: Option<String>,
    /// Its age in seconds, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_seconds: Option<u64>,
    /// Whether it was made in this boot (else the next call scans `/etc` again).
    pub this_boot: bool,
    /// Why there is none, or it cannot be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A kernel mechanism the view needs that this machine lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MissingMechanism {
    /// What is missing, lowercase.
    pub what: String,
    /// What the operator does about it.
    pub fix: String,
}

/// The sysctls that govern an ordinary user's user namespaces (`None`: absent here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsernsSysctls {
    /// `user.max_user_namespaces`.
    pub max_user_namespaces: Option<u64>,
    /// `kernel.unprivileged_userns_clone` (Debian).
    pub unprivileged_userns_clone: Option<u64>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu 23.10 and later).
    pub apparmor_restrict_unprivileged_userns: Option<u64>,
}

impl UsernsSysctls {
    /// Reads them from `/proc/sys`.
    pub fn read() -> Self {
        let r = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse().ok())
        };
        Self {
            max_user_namespaces: r("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: r("/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict_unprivileged_userns: r(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
            ),
        }
    }
}

/// The missing mechanism, when `missing` (`hcp_adapter::KernelSupport::view_missing`:
/// why no view can be built here) says one is, and its fix from `sysctls`, for the `hcp`
/// at `exe`. Pure.
pub fn missing_mechanism(
    missing: Option<&str>,
    sysctls: &UsernsSysctls,
    exe: &Path,
) -> Option<MissingMechanism> {
    let why = missing?;
    let fix = if sysctls.apparmor_restrict_unprivileged_userns == Some(1) {
        format!(
            "AppArmor forbids user namespaces to unconfined programs (Ubuntu 23.10 and later): give hcp a profile granting `userns`, \
             e.g. `/etc/apparmor.d/hcp` holding `abi <abi/4.0>, include <tunables/global> profile hcp {} flags=(unconfined) {{ userns, }}`, \
             then `apparmor_parser -r /etc/apparmor.d/hcp`",
            exe.display()
        )
    } else if sysctls.unprivileged_userns_clone == Some(0) {
        "`sysctl -w kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d/ to keep it)".into()
    } else if sysctls.max_user_namespaces == Some(0) {
        "`sysctl -w user.max_user_namespaces=15000` (and in /etc/sysctl.d/ to keep it)".into()
    } else if why.contains("CAP_SYS_ADMIN") {
        "run hcp as root with its capabilities, or as an ordinary user".into()
    } else if why.contains("mount_setattr") {
        "run hcp on Linux 5.12 or later".into()
    } else {
        "run hcp where user namespaces are allowed (a container's seccomp profile or a missing kernel option can forbid them)".into()
    };
    Some(MissingMechanism {
        what: format!("no view can be built for a session's call: {why}"),
        fix,
    })
}

/// The `packs.ID.write` entries of `config` that are Unix sockets on this machine, and
/// every write path.
pub fn write_grants(config: &RuntimeConfig) -> (Vec<PackPath>, Vec<PackPath>) {
    let mut sockets = Vec::new();
    let mut writes = Vec::new();
    for (id, pack) in &config.packs.0 {
        for p in &pack.write {
            let path = p.path();
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
                sockets.push(PackPath {
                    pack: id.clone(),
                    path: path.clone(),
                });
            }
            writes.push(PackPath {
                pack: id.clone(),
                path,
            });
        }
    }
    (sockets, writes)
}

/// Examines the view part for `hcp doctor` (see the module docs), adding what is wrong to
/// `problems` and what holds less than it could, or what to do, to `notes`. A view that
/// cannot be built and the ignored keys are the sandbox part's problem and notes
/// ([`crate::doctor`]); this adds the fix and lists them.
pub fn examine(
    rt: &crate::Runtime,
    config: &RuntimeConfig,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> ViewHealth {
    let home = rt.home();
    let (sockets, write_paths) = write_grants(config);
    for s in &sockets {
        notes.push(format!(
            "pack `{}` is given the socket `{}`: every pathname socket of its view is reachable",
            s.pack,
            s.path.display()
        ));
    }
    let host_network = host_network(config);
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("hcp"));
    let missing = missing_mechanism(
        hcp_adapter::KernelSupport::probe()
            .view_missing()
            .as_deref(),
        &UsernsSysctls::read(),
        &exe,
    );
    if let Some(m) = &missing {
        // The sandbox part names the problem; this is what to do about it.
        notes.push(format!("to build views here: {}", m.fix));
    }
    let ignored_keys: Vec<String> = config
        .ignored_keys()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let quarantine = match hcp_store::quarantine::list(home) {
        Ok(q) => q,
        Err(e) => {
            problems.push(format!("cannot read the quarantine: {e}"));
            Vec::new()
        }
    };
    if !quarantine.is_empty() {
        notes.push(format!(
            "the quarantine holds what {} call(s) created under protected names of their workdir: look at `{}` and delete what you do not keep",
            quarantine.len(),
            hcp_store::quarantine::dir(home).display()
        ));
    }
    let mounts = mounts_of_views(rt, config);
    ViewHealth {
        sockets,
        host_network,
        write_paths,
        mounts_beneath: mounts,
        etc_index: etc_index(home),
        missing_mechanism: missing,
        ignored_keys,
        quarantine,
    }
}

/// The mounts of the host beneath what the views of the installed packs bind: each pack's
/// view for the owner, one per land its verbs use (the view of a `brain` verb for a
/// project of no name: its home is never made), built as a call's would be
/// (`prepare::describe_view`) and compared with `/proc/self/mountinfo`
/// (`hcp_adapter::view::mounts_beneath`). A pack whose view cannot be built is left out
/// (its calls are refused, and say why).
fn mounts_of_views(rt: &crate::Runtime, config: &RuntimeConfig) -> Vec<MountBeneath> {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let caller = crate::call::Caller {
        session_token: None,
        project: None,
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
        parent_env: std::env::vars_os().collect(),
        limit_overrides: hcp_adapter::LimitOverrides::default(),
    };
    let mut out: Vec<MountBeneath> = Vec::new();
    for id in hcp_store::pack::installed_ids(rt.home()).unwrap_or_default() {
        let Ok(pack) = hcp_store::pack::load(rt.home(), id.as_str()) else {
            continue;
        };
        let mut seen = Vec::new();
        for (key, entry) in &pack.policy.verbs {
            let (land, op) = (entry.privacy.land, entry.operation);
            if seen.contains(&(land, op)) {
                continue;
            }
            seen.push((land, op));
            let Ok(plan) = pack.manifest.plan_verb(key) else {
                continue;
            };
            // Verified, its fingerprints not kept: `hcp doctor` writes nothing (under a
            // session above all, which may not touch the store's packs).
            let Ok((bin, _)) = crate::pins::verify_deferred(&pack, &plan.program) else {
                continue;
            };
            let spec = crate::prepare::ConfineSpec {
                land,
                caller: hcp_model::principal::Kind::Owner,
                principal_id: hcp_store::tenant::OWNER_TENANT,
                project: (land == hcp_model::Land::Brain).then_some("doctor"),
                writes: op == hcp_model::Operation::Write,
                workdir: &caller.cwd,
                bin: &bin,
                bootstrap: crate::prepare::is_bootstrap(&pack, bin.path()),
                pack_id: id.as_str(),
                config,
            };
            let Ok((view, _)) = crate::prepare::describe_view(rt.home(), &caller, &spec) else {
                continue;
            };
            for (view_path, mount_point) in hcp_adapter::view::mounts_beneath(&view, &mountinfo) {
                if !out.iter().any(|m| m.mount_point == mount_point) {
                    out.push(MountBeneath {
                        pack: id.to_string(),
                        view_path,
                        mount_point,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| a.mount_point.cmp(&b.mount_point));
    out
}

fn host_network(config: &RuntimeConfig) -> Vec<String> {
    use hcp_store::config::NetworkMode;
    let mut out = Vec::new();
    if config.sandbox.network == NetworkMode::Host {
        out.push("*".to_owned());
    }
    for (id, p) in &config.packs.0 {
        if p.network == Some(NetworkMode::Host) {
            out.push(id.clone());
        }
    }
    out
}

/// The store's `/etc` index as `hcp doctor` shows it (RUNTIME §5.1: "`doctor` says how old
/// the list is").
fn etc_index(home: &Home) -> EtcIndexHealth {
    match crate::view_index::stored(home) {
        Ok(i) => {
            let age = i.scanned_at.parse::<jiff::Timestamp>().ok().and_then(|t| {
                u64::try_from(jiff::Timestamp::now().duration_since(t).as_secs()).ok()
            });
            EtcIndexHealth {
                this_boot: i.boot_id == crate::view_index::boot_id(),
                scanned_at: Some(i.scanned_at),
                age_seconds: age,
                error: None,
            }
        }
        Err(e) => EtcIndexHealth {
            scanned_at: None,
            age_seconds: None,
            this_boot: false,
            error: Some(if crate::view_index::path(home).exists() {
                format!("{e}; the next call or `hcp doctor --refresh` makes it again")
            } else {
                "none yet: the next call or `hcp doctor --refresh` makes it".to_owned()
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_fix_follows_what_forbids_user_namespaces() {
        let exe = Path::new("/usr/local/bin/hcp");
        assert_eq!(
            missing_mechanism(None, &UsernsSysctls::default(), exe),
            None
        );
        let sub = Some("no namespaces for this user: x");
        let ubuntu = UsernsSysctls {
            apparmor_restrict_unprivileged_userns: Some(1),
            ..UsernsSysctls::default()
        };
        let m = missing_mechanism(sub, &ubuntu, exe).unwrap_or_else(|| unreachable!());
        assert!(
            m.fix.contains("userns") && m.fix.contains("/usr/local/bin/hcp"),
            "{}",
            m.fix
        );
        let debian = UsernsSysctls {
            unprivileged_userns_clone: Some(0),
            ..UsernsSysctls::default()
        };
        let m = missing_mechanism(sub, &debian, exe).unwrap_or_else(|| unreachable!());
        assert!(
            m.fix.contains("kernel.unprivileged_userns_clone=1"),
            "{}",
            m.fix
        );
    }
}
