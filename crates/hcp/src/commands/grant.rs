//! `hcp grant`, `hcp grant --list` and `hcp revoke` (RUNTIME §4), owner only.

use super::session::{print, require_owner, session_error, store_error, table};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::{Capability, Code};
use hcp_store::grant::{Grant, PackScope};
use hcp_store::session::{PrincipalId, Timestamp, format_ts};
use hcp_store::state::State;

/// Arguments of `hcp grant`.
#[derive(Debug, clap::Args)]
pub struct GrantArgs {
    /// List every grant instead of granting.
    #[arg(long, conflicts_with_all = ["principal", "pack", "caps"])]
    list: bool,
    /// With `--list`: print a JSON array.
    #[arg(long, requires = "list")]
    json: bool,
    /// The principal id.
    #[arg(required_unless_present = "list", value_name = "PRINCIPAL")]
    principal: Option<String>,
    /// A pack id, or `*` for every pack.
    #[arg(required_unless_present = "list", value_name = "PACK")]
    pack: Option<String>,
    /// `verb.exec.read`, `verb.exec.write`, `pack.connect`, `sense.enable`.
    #[arg(required_unless_present = "list", value_name = "CAP")]
    caps: Vec<String>,
}

/// Arguments of `hcp revoke`.
#[derive(Debug, clap::Args)]
pub struct RevokeArgs {
    /// Take back every grant of PRINCIPAL, on every pack and `*`; also the repair of its
    /// damaged or missing grant file (moved aside, its counts zeroed).
    #[arg(long, conflicts_with_all = ["pack", "caps"])]
    all: bool,
    /// The principal id.
    #[arg(value_name = "PRINCIPAL")]
    principal: String,
    /// The pack id, or `*`, exactly as granted.
    #[arg(required_unless_present = "all", value_name = "PACK")]
    pack: Option<String>,
    /// The capabilities to take back; none: all of them on `PACK`.
    #[arg(value_name = "CAP")]
    caps: Vec<String>,
}

fn parse(principal: &str, pack: &str, caps: &[String]) -> Result<Parsed, CliError> {
    let principal = PrincipalId::parse(principal).map_err(|e| session_error(&e))?;
    let pack = PackScope::parse(pack).map_err(|m| {
        CliError::new(Code::BadPackId, m).hint("give a pack id, or `*` for every pack")
    })?;
    let caps = caps
        .iter()
        .map(|c| {
            c.parse::<Capability>()
                .map_err(|e| CliError::new(Code::BadCapability, e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Parsed {
        principal,
        pack,
        caps,
    })
}

struct Parsed {
    principal: PrincipalId,
    pack: PackScope,
    caps: Vec<Capability>,
}

/// The capabilities `p.principal` holds on exactly `p.pack` (its own grants on that scope,
/// not the `*` ones on a pack), in grant order.
fn held_exactly(state: &dyn State, p: &Parsed) -> Result<Vec<Capability>, CliError> {
    Ok(state
        .grants_list()
        .map_err(|e| store_error(&e))?
        .into_iter()
        .filter(|g| g.principal == p.principal && g.pack == p.pack)
        .map(|g| g.capability)
        .collect())
}

fn names<'a>(caps: impl IntoIterator<Item = &'a Capability>) -> String {
    caps.into_iter()
        .map(|c| format!("`{c}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `hcp grant`.
pub fn run_grant(a: GrantArgs) -> CliResult {
    require_owner("grant")?;
    let rt = super::exec::runtime()?;
    if a.list {
        return list(&rt, a.json);
    }
    let p = parse(
        a.principal.as_deref().unwrap_or_default(),
        a.pack.as_deref().unwrap_or_default(),
        &a.caps,
    )?;
    installed_first(&rt, &p.pack)?;
    damaged_first(&rt, &p.principal)?;
    // A grant always changes the store: it adds each capability, or renews one already
    // held (`granted_at`, which lifts a rug-pull suspension, RUNTIME §3); `renewed` names
    // those, when there are any.
    let held = held_exactly(rt.state(), &p)?;
    let mut changed = serde_json::json!({
        "principal": p.principal.to_string(),
        "pack": p.pack.to_string(),
        "capabilities": p.caps.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    let renewed: Vec<String> = p
        .caps
        .iter()
        .filter(|c| held.contains(c))
        .map(ToString::to_string)
        .collect();
    if !renewed.is_empty() {
        changed["renewed"] = serde_json::json!(renewed);
    }
    let act = super::authority::record(&rt, "grant", changed)?;
    let written = act
        .settle(
            rt.state()
                .grant(&p.principal, &p.pack, &p.caps, Timestamp::now()),
            hcp_store::StoreError::code,
        )
        .map_err(|e| store_error(&e))?;
    print(&format!(
        "granted {} to `{}` on `{}`\n",
        names(written.iter().map(|g| &g.capability)),
        p.principal,
        p.pack
    ));
    Ok(exit::OK)
}

/// Runs `hcp revoke`.
pub fn run_revoke(a: RevokeArgs) -> CliResult {
    require_owner("revoke")?;
    let rt = super::exec::runtime()?;
    if a.all {
        return revoke_all(&rt, &a.principal);
    }
    let p = parse(&a.principal, a.pack.as_deref().unwrap_or_default(), &a.caps)?;
    damaged_first(&rt, &p.principal)?;
    // A revoke that takes nothing back changes nothing: it is not made, and records
    // nothing (as a `session end` of no open session).
    let held = held_exactly(rt.state(), &p)?;
    let taking: Vec<Capability> = if p.caps.is_empty() {
        held.clone()
    } else {
        p.caps
            .iter()
            .copied()
            .filter(|c| held.contains(c))
            .collect()
    };
    let removed = if taking.is_empty() {
        Vec::new()
    } else {
        let act = super::authority::record(
            &rt,
            "revoke",
            serde_json::json!({
                "principal": p.principal.to_string(),
                "pack": p.pack.to_string(),
                "capabilities": taking.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "all": p.caps.is_empty(),
            }),
        )?;
        act.settle(
            rt.state().revoke(&p.principal, &p.pack, &taking),
            hcp_store::StoreError::code,
        )
        .map_err(|e| store_error(&e))?
    };
    if removed.is_empty() {
        print(&format!(
            "nothing to revoke: `{}` holds no such grant on `{}`\n",
            p.principal, p.pack
        ));
    } else {
        print(&format!(
            "revoked {} from `{}` on `{}`\n",
            names(removed.iter().map(|g| &g.capability)),
            p.principal,
            p.pack
        ));
    }
    Ok(exit::OK)
}

/// A grant names an installed pack, or `*` (RUNTIME §4: each install record counts the
/// grants made on its pack): on the file store, a grant on a pack that is not installed is
/// refused (`not_installed`, 66, with the nearest installed ids) before its act is
/// recorded — a typo'd id would otherwise grant nothing anyone can call. A fleet's grants
/// (RUNTIME §9) are every machine's, and its packs may be installed on another machine
/// first: there a pack not installed here is said on stderr, and granted.
fn installed_first(rt: &hcp_runtime::Runtime, scope: &PackScope) -> Result<(), CliError> {
    let PackScope::Pack(id) = scope else {
        return Ok(());
    };
    let ids = hcp_store::pack::installed_ids(rt.home()).map_err(|e| store_error(&e))?;
    if ids.contains(id) {
        return Ok(());
    }
    match rt.backend() {
        hcp_runtime::Backend::File => Err(CliError::command(hcp_runtime::target::not_installed(
            rt.home(),
            id.as_str(),
        ))),
        _ => {
            eprintln!(
                "note: pack `{id}` is not installed on this machine; the fleet's grant holds on every machine where it is"
            );
            Ok(())
        }
    }
}

/// On the file store, a damaged grant file of `principal` refuses a grant or a revoke
/// before its act is recorded (`store_damaged`, naming the file and `hcp revoke PRINCIPAL
/// --all`), so the trail holds no act that did not happen.
fn damaged_first(rt: &hcp_runtime::Runtime, principal: &PrincipalId) -> Result<(), CliError> {
    if rt.state().backend() != "file" {
        return Ok(());
    }
    hcp_store::grant::Grants::load_principal(rt.home(), principal)
        .map(|_| ())
        .map_err(|e| {
            let legacy = hcp_store::grant::legacy_path(rt.home());
            let hint = match &e {
                hcp_store::StoreError::Damaged { path, .. } if *path == legacy => format!(
                    "move it aside (`mv {0} {0}.damaged`), then grant again",
                    legacy.display()
                ),
                _ => format!("repair it with `hcp revoke {principal} --all`, then grant again"),
            };
            store_error(&e).hint(hint)
        })
}

/// `hcp revoke PRINCIPAL --all`: every grant of the principal taken back; on the file
/// store, also the repair of its damaged grant file (RUNTIME §4 "Fault isolation").
fn revoke_all(rt: &hcp_runtime::Runtime, principal: &str) -> CliResult {
    let principal = PrincipalId::parse(principal).map_err(|e| session_error(&e))?;
    // A revoke that takes nothing back and repairs nothing is not made and records nothing.
    if nothing_to_revoke_all(rt, &principal)? {
        print(&format!(
            "nothing to revoke: `{principal}` holds no grant\n"
        ));
        return Ok(exit::OK);
    }
    let act = super::authority::record(
        rt,
        "revoke",
        serde_json::json!({
            "principal": principal.to_string(),
            "pack": "*",
            "capabilities": Vec::<String>::new(),
            "all": true,
            "every_pack": true,
        }),
    )?;
    if rt.state().backend() != "file" {
        // One change, settled once: every scope of the principal's grants taken back.
        let removed = act
            .settle(
                rt.state().grants_list().and_then(|grants| {
                    let mut scopes: Vec<&PackScope> = grants
                        .iter()
                        .filter(|g| g.principal == principal)
                        .map(|g| &g.pack)
                        .collect();
                    scopes.dedup();
                    let mut removed = 0;
                    for scope in scopes {
                        removed += rt.state().revoke(&principal, scope, &[])?.len();
                    }
                    Ok(removed)
                }),
                hcp_store::StoreError::code,
            )
            .map_err(|e| store_error(&e))?;
        print(&format!("revoked {removed} grant(s) from `{principal}`\n"));
        return Ok(exit::OK);
    }
    let done = act.settle(
        hcp_store::grant::revoke_all(rt.home(), &principal),
        hcp_store::StoreError::code,
    );
    match done.map_err(|e| store_error(&e))? {
        hcp_store::grant::RevokedAll::Grants(g) => {
            print(&format!(
                "revoked {} grant(s) from `{principal}`\n",
                g.len()
            ));
        }
        hcp_store::grant::RevokedAll::Repaired { moved_to } => {
            let moved = moved_to
                .map(|p| format!(" (the damaged file is now `{}`)", p.display()))
                .unwrap_or_default();
            print(&format!(
                "`{principal}` holds no grant now{moved}; grant again with `hcp grant {principal} PACK CAP…`\n"
            ));
        }
    }
    Ok(exit::OK)
}

/// Whether `hcp revoke PRINCIPAL --all` would change nothing: no grant of the principal
/// is listed and, on the file store, it has no grant file, damaged or not.
fn nothing_to_revoke_all(
    rt: &hcp_runtime::Runtime,
    principal: &PrincipalId,
) -> Result<bool, CliError> {
    let grants = rt.state().grants_list().map_err(|e| store_error(&e))?;
    if grants.iter().any(|g| &g.principal == principal) {
        return Ok(false);
    }
    if rt.state().backend() != "file" {
        return Ok(true);
    }
    let file = hcp_store::grant::grant_file(rt.home(), principal);
    let damaged = hcp_store::grant::damaged(rt.home())
        .iter()
        .any(|d| d.principal.as_ref().is_none_or(|p| p == principal));
    Ok(!damaged && std::fs::symlink_metadata(&file).is_err())
}

fn list(rt: &hcp_runtime::Runtime, json: bool) -> CliResult {
    let state: &dyn State = rt.state();
    let grants = state.grants_list().map_err(|e| store_error(&e))?;
    if state.backend() == "file" {
        for d in hcp_store::grant::damaged(rt.home()) {
            eprintln!(
                "warning: damaged grant file `{}`: {}; its grants are not listed (`hcp doctor` names the repair)",
                d.path.display(),
                d.reason
            );
        }
    }
    if json {
        let text = serde_json::to_string(&grants)
            .map_err(|e| CliError::new(Code::StoreIo, "cannot encode the grants").cause(e))?;
        print(&format!("{text}\n"));
        return Ok(exit::OK);
    }
    if grants.is_empty() {
        print("no grants\n");
        return Ok(exit::OK);
    }
    let mut rows = vec![
        ["PRINCIPAL", "PACK", "CAPABILITY", "GRANTED"]
            .map(String::from)
            .to_vec(),
    ];
    rows.extend(grants.iter().map(|g: &Grant| {
        vec![
            g.principal.to_string(),
            g.pack.to_string(),
            g.capability.to_string(),
            format_ts(g.granted_at),
        ]
    }));
    print(&table(&rows));
    Ok(exit::OK)
}
