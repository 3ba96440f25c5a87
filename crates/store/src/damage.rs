//! Damaged records of a file store, found without stopping at the first (RUNTIME §4
//! "Fault isolation"): a session, the grants, an approval, a counter. (A damaged install
//! record is found by the pack listing, `crate::pack::list`.)
//!
//! A damaged record refuses only the principal or pack it belongs to (`store_damaged`,
//! naming the file); [`scan`] is what `hcp doctor` lists, each with the command that
//! repairs or removes it.

use crate::home::{Home, StoreDir};
use std::path::{Path, PathBuf};

/// One damaged record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Damaged {
    /// What kind of record: `session`, `grants`, `approval`, `counter`.
    pub kind: &'static str,
    /// The file.
    pub path: PathBuf,
    /// Why it is damaged (the parser's message), without the path.
    pub reason: String,
    /// Who it refuses while it is damaged.
    pub refuses: String,
    /// The command that repairs or removes it.
    pub repair: String,
}

/// Every damaged record of `home`'s file state, in the order sessions, grants, approvals,
/// counters, each by path. A directory that cannot be listed is itself
/// listed as damaged. Reads only; takes no lock.
pub fn scan(home: &Home) -> Vec<Damaged> {
    let mut out = Vec::new();
    match crate::session::damaged(home) {
        Ok(list) => {
            for (path, reason) in list {
                out.push(Damaged {
                    kind: "session",
                    repair: format!("rm {}", path.display()),
                    refuses: "the holder of that session's token alone (`hcp session start` gives a new one)"
                        .into(),
                    path,
                    reason,
                });
            }
        }
        Err(e) => out.push(unreadable(
            "session",
            &crate::session::sessions_dir(home),
            &e,
        )),
    }
    if let Err(e) = crate::grant::Grants::load(home) {
        let path = crate::grant::grants_path(home);
        out.push(Damaged {
            kind: "grants",
            refuses: "every principal's calls but the owner's (grants are kept in one file); grant again after the repair with `hcp grant PRINCIPAL PACK CAP…`".into(),
            repair: format!("mv {} {}.damaged", path.display(), path.display()),
            path,
            reason: match e {
                crate::StoreError::Damaged { reason, .. } => reason,
                other => other.to_string(),
            },
        });
    }
    let state = home.dir(StoreDir::State);
    for (kind, dir, refuses) in [
        (
            "approval",
            state.join("approvals"),
            "the one call the approval was for alone (it asks again)",
        ),
        (
            "counter",
            state.join("counters"),
            "the calls of its principal and tool alone (`rate_limit`, `budget`)",
        ),
    ] {
        for (path, reason) in json_files(&dir) {
            out.push(Damaged {
                kind,
                repair: format!("rm {}", path.display()),
                refuses: refuses.into(),
                path,
                reason,
            });
        }
    }
    out
}

fn unreadable(kind: &'static str, dir: &Path, e: &crate::StoreError) -> Damaged {
    Damaged {
        kind,
        path: dir.to_owned(),
        reason: e.to_string(),
        refuses: "every record kept there".into(),
        repair: format!("fix the permissions of {}", dir.display()),
    }
}

/// The `*.json` files of `dir` that do not parse as JSON, by path.
fn json_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, String)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let why = match std::fs::read(&p) {
                Ok(b) => match serde_json::from_slice::<serde_json::Value>(&b) {
                    Ok(serde_json::Value::Object(_)) => return None,
                    Ok(_) => "it is not a JSON object".to_owned(),
                    Err(e) => e.to_string(),
                },
                Err(e) => format!("cannot be read: {e}"),
            };
            Some((p, why))
        })
        .collect();
    out.sort();
    out
}
