//! Tenant homes, the owner's side (RUNTIME §5.2): where a tenant's home is (`hcp home PACK
//! --principal P | --project J`), seeding it with a directory of the owner's (`--seed`),
//! removing it (`hcp home rm`), and removing every home of a pack (`hcp uninstall ID
//! --purge`).
//!
//! Seeding and removing are acts of authority (RUNTIME §6): each goes through one function
//! of this module — [`seed`], [`remove`], [`purge`] — and nowhere else, so that their
//! records are written in one place. Where the homes are is `hcp_store::tenant` (the same
//! path every call's view binds); what the copy and the removal do on disk is
//! `hcp_store::tenant_admin`.

use crate::Runtime;
use crate::refusal::Refusal;
use hcp_model::Code;
use hcp_store::config::RuntimeConfig;
use hcp_store::tenant::{OWNER_TENANT, Tenant, homes_root, tenant_home_path};
use std::path::{Path, PathBuf};

/// Whose home, as the owner names it on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Whose {
    /// `--principal P`: the principal's home for the pack's `personal` calls (`owner`: the
    /// owner's own calls).
    Principal(String),
    /// `--project J`: the project's home for the pack's `brain` calls.
    Project(String),
}

impl Whose {
    fn tenant(&self) -> Tenant<'_> {
        match self {
            Self::Principal(p) => Tenant::Principal(p),
            Self::Project(j) => Tenant::Project(j),
        }
    }

    /// `principal `P`` or `project `J``, for messages.
    pub fn describe(&self) -> String {
        match self {
            Self::Principal(p) => format!("principal `{p}`"),
            Self::Project(j) => format!("project `{j}`"),
        }
    }
}

/// The directory holding every tenant home of `rt`'s store: `sandbox.homes`, else
/// `$HCP_HOME/homes`.
///
/// # Errors
/// `bad_config` (78) or `store_io` (74) when `config.json` does not load.
pub fn homes(rt: &Runtime) -> Result<PathBuf, Refusal> {
    let config = RuntimeConfig::load(rt.home().root()).map_err(|e| {
        Refusal::new(e.code(), e.to_string()).hint("fix `config.json` in the store")
    })?;
    Ok(homes_of(rt.home().root(), &config))
}

/// [`homes`] of a configuration already read.
pub fn homes_of(store: &Path, config: &RuntimeConfig) -> PathBuf {
    let configured = config
        .sandbox
        .homes
        .as_ref()
        .map(hcp_store::config::ConfigPath::path);
    homes_root(store, configured.as_deref())
}

/// Checks the id of `whose`: a principal id (or `owner`), a project name.
///
/// # Errors
/// `bad_principal` or `bad_value` (2).
pub fn check_whose(whose: &Whose) -> Result<(), Refusal> {
    match whose {
        Whose::Principal(p) if p == OWNER_TENANT => {}
        Whose::Principal(p) => {
            hcp_store::session::PrincipalId::parse(p).map_err(|e| {
                Refusal::new(Code::BadPrincipal, e.to_string()).hint(format!(
                    "a principal id is ASCII letters, digits, `.`, `_`, `@` and `-`; the owner's own calls are `--principal {OWNER_TENANT}`"
                ))
            })?;
        }
        Whose::Project(j) => {
            hcp_store::session::validate_name(j).map_err(|why| {
                Refusal::new(Code::BadValue, format!("project `{j}` is not a project name: {why}"))
                    .hint("a project is ASCII letters, digits, `.`, `_`, `@` and `-`, starting with a letter or digit")
            })?;
        }
    }
    Ok(())
}

/// Checks what the owner named: the pack installed, the principal or project id one.
fn checked(rt: &Runtime, pack: &str, whose: &Whose) -> Result<(PathBuf, PathBuf), Refusal> {
    hcp_store::pack::load(rt.home(), pack).map_err(|e| crate::refusal::pack_refusal(&e))?;
    check_whose(whose)?;
    let homes = homes(rt)?;
    let home = tenant_home_path(&homes, pack, whose.tenant())
        .map_err(|e| Refusal::new(Code::BadValue, e.to_string()))?;
    Ok((homes, home))
}

/// The path of `whose` home for `pack`, checked as [`path`] checks it but not made: what
/// an act of authority on the home records before it is made (RUNTIME §6).
///
/// # Errors
/// As [`path`].
pub fn locate(rt: &Runtime, pack: &str, whose: &Whose) -> Result<PathBuf, Refusal> {
    checked(rt, pack, whose).map(|(_, home)| home)
}

/// The path of `whose` home for `pack` (`hcp home`), made (empty, `0700`) when it is new,
/// so that the owner can copy a CLI's configuration into it.
///
/// # Errors
/// `not_installed` (66), `bad_principal` / `bad_value` (2), `bad_config`, `store_io`.
pub fn path(rt: &Runtime, pack: &str, whose: &Whose) -> Result<PathBuf, Refusal> {
    let (homes, home) = checked(rt, pack, whose)?;
    hcp_store::tenant::ensure_tenant_home(&homes, &home).map_err(|e| {
        Refusal::new(
            Code::StoreIo,
            format!("cannot make the home `{}`: {e}", home.display()),
        )
    })?;
    Ok(home)
}

/// Copies the owner's directory `source` into `whose` home for `pack` (`hcp home PACK
/// --principal P --seed PATH`; `hcp_store::tenant_admin::seed`). An act of authority.
///
/// # Errors
/// As [`path`]; `bad_seed` (2) for a `source` that cannot be seeded or a name the home
/// already holds; `store_io` when the copy fails (the home is left as it was).
pub fn seed(
    rt: &Runtime,
    pack: &str,
    whose: &Whose,
    source: &Path,
) -> Result<(PathBuf, hcp_store::tenant_admin::Seeded), Refusal> {
    let (homes, home) = checked(rt, pack, whose)?;
    let whose_json = match whose {
        Whose::Principal(p) => serde_json::json!({"principal": p}),
        Whose::Project(j) => serde_json::json!({"project": j}),
    };
    let made =
        crate::authority::Act::by_owner(rt, "home --seed").map_err(|e| Refusal::store(&e))?;
    let authorize = |s: &hcp_store::tenant_admin::Seeded| {
        made.record(serde_json::json!({
            "pack_id": pack,
            "whose": whose_json,
            "home": home.to_string_lossy(),
            "from": source.to_string_lossy(),
            "entries": s.entries,
            "bytes": s.bytes,
        }))
    };
    let seeded = made.settle(
        hcp_store::tenant_admin::seed_with(&homes, &home, source, &authorize),
        hcp_store::tenant_admin::SeedError::code,
    );
    let seeded = seeded.map_err(|e| {
        let r = Refusal::new(e.code(), e.to_string());
        match e {
            hcp_store::tenant_admin::SeedError::Conflict { .. } => r.hint(format!(
                "remove that name from the home first, or the whole home with `hcp home rm {pack} {}`",
                flag(whose)
            )),
            hcp_store::tenant_admin::SeedError::Source { .. } => {
                r.hint("name a directory of the owner's; its entries are copied into the home")
            }
            hcp_store::tenant_admin::SeedError::Store(_) => r,
        }
    })?;
    Ok((home, seeded))
}

/// Removes `whose` home for `pack` (`hcp home rm`; `hcp_store::tenant_admin::remove`). An
/// act of authority. Returns the path and whether there was a home.
///
/// # Errors
/// As [`path`]; `store_io` when it cannot be removed.
pub fn remove(rt: &Runtime, pack: &str, whose: &Whose) -> Result<(PathBuf, bool), Refusal> {
    let (homes, home) = checked(rt, pack, whose)?;
    let existed = hcp_store::tenant_admin::remove(&homes, &home).map_err(|e| Refusal::store(&e))?;
    Ok((home, existed))
}

/// Removes every tenant home of `pack` (`hcp uninstall ID --purge`, after the uninstall;
/// `hcp_store::tenant_admin::purge`). An act of authority. Returns whether there were any.
///
/// # Errors
/// `bad_config`, `store_io`.
pub fn purge(rt: &Runtime, pack: &str) -> Result<bool, Refusal> {
    let homes = homes(rt)?;
    hcp_store::tenant_admin::purge(&homes, pack).map_err(|e| Refusal::store(&e))
}

/// `--principal P` or `--project J`, for hints.
pub fn flag(whose: &Whose) -> String {
    match whose {
        Whose::Principal(p) => format!("--principal {p}"),
        Whose::Project(j) => format!("--project {j}"),
    }
}
