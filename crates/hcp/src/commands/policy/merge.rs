//! `hcp policy init --merge FILE [PACK…] [--role ROLE] [--json]`: the tools of the active
//! packs that FILE does not name, added to it in place (RUNTIME §7;
//! `hcp_runtime::policy::merge`). Owner only, an act of authority (RUNTIME §6): under the
//! store lock FILE is read and merged, the act (`policy init --merge`, with the file, the
//! tools added, the role and the new text's digest) recorded, and only then FILE replaced,
//! atomically and with its mode kept (`hcp_runtime::authority::edit_file`). Nothing added:
//! nothing recorded, nothing written. On any error nothing is written.

use super::store::InitArgs;
use crate::commands::session::{require_owner, store_error};
use crate::error::{CliError, CliResult};
use crate::exit;
use hcp_model::Code;
use hcp_runtime::policy::contracts;
use hcp_runtime::policy::merge::{self, Format, Merged};
use std::io::{Read, Write};
use std::path::Path;

/// Runs `hcp policy init --merge FILE`.
pub(super) fn run(a: &InitArgs, file: &Path) -> CliResult {
    require_owner("policy init --merge")?;
    let rt = crate::commands::exec::runtime()?;
    let packs = contracts::active_packs(rt.home(), &a.packs).map_err(CliError::command)?;
    let shown = file.display().to_string();
    let format = if file
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
    {
        Format::Json
    } else {
        Format::Yaml
    };
    // A hand edit of the store's files made before this one is recorded as such first
    // (RUNTIME §6).
    hcp_runtime::authority::note_files(&rt).map_err(|e| store_error(&e))?;
    let mut report_of: Option<Merged> = None;
    // Read, merged, recorded and written under the store lock: no other `hcp` changes the
    // file in between; nothing added is nothing recorded and nothing written.
    hcp_runtime::authority::edit_file(
        &rt,
        "policy init --merge",
        || -> Result<Option<(serde_json::Value, String)>, Fail> {
            let text = read(file, &shown)?;
            let merged = merge::merge(&shown, &text, format, &packs, a.role.as_deref())
                .map_err(|r| Fail(CliError::command(r)))?;
            let out = (!merged.added.is_empty()).then(|| {
                let changed = serde_json::json!({
                    "file": shown,
                    "added": merged.added,
                    "role": merged.role,
                    "digest": hcp_store::digest::sha256_tagged(merged.text.as_bytes()),
                });
                (changed, merged.text.clone())
            });
            report_of = Some(merged);
            Ok(out)
        },
        |text| replace(file, &text),
    )
    .map_err(|Fail(e)| e)?;
    if let Some(m) = &report_of {
        report(a.json, &shown, m);
    }
    Ok(exit::OK)
}

/// A refusal while merging, or the store's (the record that could not be made).
struct Fail(CliError);

impl From<hcp_store::StoreError> for Fail {
    fn from(e: hcp_store::StoreError) -> Self {
        Fail(store_error(&e))
    }
}

/// FILE's text: a regular file of at most the policy size limit, in UTF-8.
fn read(file: &Path, shown: &str) -> Result<String, Fail> {
    let cannot = |e: std::io::Error| {
        let code = if e.kind() == std::io::ErrorKind::NotFound {
            Code::NotFound
        } else {
            Code::Unparseable
        };
        CliError::new(code, format!("cannot read policy `{shown}`: {e}"))
            .hint("give the policy file to merge into; `hcp policy init > policy.yaml` writes a first one")
    };
    let cannot = |e| Fail(cannot(e));
    let f = std::fs::File::open(file).map_err(cannot)?;
    let md = f.metadata().map_err(cannot)?;
    if !md.is_file() {
        return Err(cannot(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is not a regular file",
        )));
    }
    let limit = histos::MAX_POLICY_BYTES as u64;
    let mut buf = Vec::new();
    f.take(limit + 1).read_to_end(&mut buf).map_err(cannot)?;
    if buf.len() as u64 > limit {
        return Err(Fail(CliError::new(
            Code::PolicyTooLarge,
            format!("policy `{shown}` is larger than {limit} bytes"),
        )));
    }
    String::from_utf8(buf).map_err(|e| {
        let valid =
            std::str::from_utf8(&e.as_bytes()[..e.utf8_error().valid_up_to()]).unwrap_or_default();
        let at = histos::outline::pos_of(valid, valid.len());
        Fail(
            CliError::new(
                Code::Unparseable,
                format!(
                    "{shown}:{}:{}: policy does not load: it is not valid UTF-8",
                    at.line, at.col
                ),
            )
            .hint("save the file as UTF-8, then merge again"),
        )
    })
}

/// Replaces FILE with `text`: a temporary file beside it with FILE's mode, synced,
/// renamed over it, the directory synced. A symlink is followed: the file it names is the
/// one replaced.
fn replace(file: &Path, text: &str) -> Result<(), hcp_store::StoreError> {
    use hcp_store::StoreError;
    use std::os::unix::fs::PermissionsExt;
    let path = std::fs::canonicalize(file).map_err(|e| StoreError::io("resolve", file, e))?;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let mode = std::fs::metadata(&path)
        .map_err(|e| StoreError::io("read", &path, e))?
        .permissions()
        .mode();
    let mut tmp = tempfile::Builder::new()
        .prefix(".hcp-merge-")
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("write beside", &path, e))?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
        .and_then(|()| tmp.write_all(text.as_bytes()))
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| StoreError::io("write beside", &path, e))?;
    tmp.persist(&path)
        .map_err(|e| StoreError::io("rename into", &path, e.error))?;
    hcp_store::atomic::sync_dir(dir)
}

fn report(json: bool, shown: &str, m: &Merged) {
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({
            "ok": true,
            "file": shown,
            "added": m.added,
            "role": m.role,
            "written": !m.added.is_empty(),
            "skipped": m.skipped,
        });
        let _ = writeln!(out, "{v}");
        return;
    }
    if m.added.is_empty() {
        let _ = writeln!(
            out,
            "policy `{shown}` already names every tool of the active packs: nothing added, nothing written"
        );
    } else {
        let _ = writeln!(
            out,
            "added {} tools to `{shown}`{}:",
            m.added.len(),
            match &m.role {
                Some(r) => format!(", allowed for role `{r}`"),
                None => String::new(),
            }
        );
        for n in &m.added {
            let _ = writeln!(out, "  {n}");
        }
        if m.role.is_none() {
            let _ = writeln!(
                out,
                "no role is granted them yet: add them to a role's `allow` (or merge with `--role ROLE`)"
            );
        }
        let _ = writeln!(
            out,
            "next: review them, `hcp policy check {shown}`, then `hcp policy lock` to pin the verbs"
        );
    }
    if !m.skipped.is_empty() {
        let _ = writeln!(
            out,
            "not added (not a Histos tool name; sessions are refused them): {}",
            m.skipped.join(", ")
        );
    }
}
