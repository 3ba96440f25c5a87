//! Tenant homes (RUNTIME §5.2): where each call's `HOME` is kept.
//!
//! A CLI keeps its configuration and data under `HOME`, so each call's `HOME` is the home of
//! its tenant, shown to no other tenant: in `personal` land one per pack and principal, in
//! `brain` land one per pack and project; `local` land has none (its `HOME` is the workdir).
//! The owner's own calls use principal `owner`, never the owner's real home.
//!
//! ```text
//! $HCP_HOME/homes/<pack>/principal/<principal id>/     (or under `sandbox.homes`)
//! $HCP_HOME/homes/<pack>/project/<project id>/
//! ```
//!
//! [`tenant_home_path`] is a pure function of its inputs; [`ensure_tenant_home`] creates a
//! home, empty and `0700`, on first use (the directories above it `0700` too), following no
//! symlink. `hcp home`, `hcp home rm` and `uninstall --purge` build on the same path.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The directory of the store that holds the tenant homes when `sandbox.homes` does not
/// name another.
pub const HOMES_DIR: &str = "homes";

/// The principal id of the owner's own calls (RUNTIME §5.2).
pub const OWNER_TENANT: &str = "owner";

/// Whose home: a principal's (`personal` land) or a project's (`brain` land).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tenant<'a> {
    /// `personal`: one home per pack and principal (`owner` for the owner).
    Principal(&'a str),
    /// `brain`: one home per pack and project.
    Project(&'a str),
}

impl<'a> Tenant<'a> {
    /// The tenant of a call of `land`: the principal in `personal`, the project in `brain`
    /// (`None` without one), none in `local`.
    pub fn of_call(
        land: hcp_model::Land,
        principal_id: &'a str,
        project: Option<&'a str>,
    ) -> Option<Self> {
        match land {
            hcp_model::Land::Personal => Some(Self::Principal(principal_id)),
            hcp_model::Land::Brain => project.map(Self::Project),
            hcp_model::Land::Local => None,
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Self::Principal(_) => "principal",
            Self::Project(_) => "project",
        }
    }

    fn id(self) -> &'a str {
        match self {
            Self::Principal(id) | Self::Project(id) => id,
        }
    }
}

/// The directory that holds every tenant home: `configured` (`sandbox.homes`) when given,
/// else `$HCP_HOME/homes` ([`HOMES_DIR`]).
pub fn homes_root(store_root: &Path, configured: Option<&Path>) -> PathBuf {
    configured.map_or_else(|| store_root.join(HOMES_DIR), Path::to_path_buf)
}

/// Why a tenant home has no path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no tenant home for {what} `{id}`: {reason}")]
pub struct TenantError {
    /// `pack`, `principal` or `project`.
    pub what: &'static str,
    /// The id as given.
    pub id: String,
    /// Why, lowercase.
    pub reason: String,
}

/// The home of `tenant` for pack `pack` under `homes` ([`homes_root`]): pure.
///
/// # Errors
/// [`TenantError`] for a pack id that is not one (RUNTIME §1.1) or a principal or project
/// id outside the names' charset (`^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$`), which no path
/// component could stand for safely.
pub fn tenant_home_path(
    homes: &Path,
    pack: &str,
    tenant: Tenant<'_>,
) -> Result<PathBuf, TenantError> {
    hcp_model::validate_pack_id(pack).map_err(|reason| TenantError {
        what: "pack",
        id: pack.to_owned(),
        reason,
    })?;
    crate::session::validate_name(tenant.id()).map_err(|reason| TenantError {
        what: tenant.kind(),
        id: tenant.id().to_owned(),
        reason,
    })?;
    Ok(homes.join(pack).join(tenant.kind()).join(tenant.id()))
}

/// Makes the home at `path` on first use: empty, `0700`, and every missing directory above
/// it up to `homes` `0700` too, owned by this user. A home that exists is left as it is.
///
/// # Errors
/// The OS error naming the path; a component below `homes` that is a symlink or not a
/// directory (`ENOTDIR`: a home is never reached through a symlink), or one this user does
/// not own.
pub fn ensure_tenant_home(homes: &Path, path: &Path) -> io::Result<()> {
    let err = |p: &Path, e: io::Error| io::Error::new(e.kind(), format!("`{}`: {e}", p.display()));
    let rel = path.strip_prefix(homes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{}` is not below `{}`", path.display(), homes.display()),
        )
    })?;
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700);
    let mut at = homes.to_owned();
    if let Err(e) = builder.create(&at)
        && e.kind() != io::ErrorKind::AlreadyExists
    {
        return Err(err(&at, e));
    }
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    // The directory of every home itself, as each component below it: never a link (a
    // link to `/` would put homes on the host), never another user's.
    match std::fs::symlink_metadata(&at) {
        Ok(m) if m.is_dir() && !m.file_type().is_symlink() && m.uid() == uid => {}
        Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {
            return Err(err(
                &at,
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the directory of the tenant homes is another user's",
                ),
            ));
        }
        Ok(_) => return Err(err(&at, io::Error::from_raw_os_error(libc::ENOTDIR))),
        Err(e) => return Err(err(&at, e)),
    }
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() && !m.file_type().is_symlink() => {
                if m.uid() != uid {
                    return Err(err(
                        &at,
                        io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            "a tenant home's directory is another user's",
                        ),
                    ));
                }
            }
            Ok(_) => {
                return Err(err(&at, io::Error::from_raw_os_error(libc::ENOTDIR)));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => match builder.create(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(err(&at, e)),
            },
            Err(e) => return Err(err(&at, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn homes_are_per_pack_and_principal_or_project() {
        let homes = homes_root(Path::new("/h"), None);
        assert_eq!(homes, PathBuf::from("/h/homes"));
        assert_eq!(
            homes_root(Path::new("/h"), Some(Path::new("/srv/homes"))),
            PathBuf::from("/srv/homes")
        );
        assert_eq!(
            tenant_home_path(&homes, "mail", Tenant::Principal("ann")).unwrap(),
            PathBuf::from("/h/homes/mail/principal/ann")
        );
        assert_eq!(
            tenant_home_path(&homes, "mail", Tenant::Project("apollo")).unwrap(),
            PathBuf::from("/h/homes/mail/project/apollo")
        );
        assert_eq!(
            tenant_home_path(&homes, "mail", Tenant::Principal(OWNER_TENANT)).unwrap(),
            PathBuf::from("/h/homes/mail/principal/owner")
        );
        for (pack, t) in [
            ("Mail", Tenant::Principal("ann")),
            ("mail", Tenant::Principal("../x")),
            ("mail", Tenant::Principal("a/b")),
            ("mail", Tenant::Project("")),
            ("mail", Tenant::Project(".hidden")),
        ] {
            assert!(tenant_home_path(&homes, pack, t).is_err(), "{pack} {t:?}");
        }
        assert_eq!(
            Tenant::of_call(hcp_model::Land::Brain, "ann", Some("p")),
            Some(Tenant::Project("p"))
        );
        assert_eq!(Tenant::of_call(hcp_model::Land::Brain, "ann", None), None);
        assert_eq!(Tenant::of_call(hcp_model::Land::Local, "ann", None), None);
    }

    #[test]
    fn a_home_is_made_0700_once_and_never_through_a_symlink() {
        let d = tempfile::tempdir().unwrap();
        let homes = d.path().join("homes");
        let h = tenant_home_path(&homes, "mail", Tenant::Principal("ann")).unwrap();
        ensure_tenant_home(&homes, &h).unwrap();
        for p in [&homes, &h, &homes.join("mail")] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", p.display());
        }
        std::fs::write(h.join("kept"), "x").unwrap();
        ensure_tenant_home(&homes, &h).unwrap();
        assert!(h.join("kept").exists());
        let elsewhere = d.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, homes.join("git")).unwrap();
        let g = tenant_home_path(&homes, "git", Tenant::Principal("ann")).unwrap();
        assert!(ensure_tenant_home(&homes, &g).is_err());
        assert!(std::fs::read_dir(&elsewhere).unwrap().next().is_none());
    }
}
