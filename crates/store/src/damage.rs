//! Damaged records of a file store, found without stopping at the first (RUNTIME §4
//! "Fault isolation"): a session, a grant file (damaged, or missing beside its count in an
//! install record), an approval, a counter, an install record, a binding ([`scan`]), a
//! tenant home ([`homes`], which takes the homes' directory, since `config.json` may put it
//! elsewhere).
//!
//! A damaged record refuses only the principal or pack it belongs to (`store_damaged`,
//! naming the file); [`scan`] and [`homes`] are what `hcp doctor` lists, each with the
//! command that repairs or removes it.

use crate::home::{Home, StoreDir};
use std::path::{Path, PathBuf};

/// One damaged record.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Damaged {
    /// What kind of record: `session`, `grants`, `approval`, `activation`, `ledger`,
    /// `counter`, `install record`, `binding`, `runtime policy`, `home`.
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
/// activation markers, the state ledger, counters, install records, bindings, each by
/// path. A directory that cannot be listed is itself
/// listed as damaged. Reads only; takes no lock.
pub fn scan(home: &Home) -> Vec<Damaged> {
    let mut out = dirs(home);
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
    for d in crate::grant::damaged(home) {
        let (refuses, repair) = match &d.principal {
            Some(p) => (
                format!(
                    "the calls of principal `{p}` alone; grant again after the repair with `hcp grant {p} PACK CAP…`"
                ),
                format!("hcp revoke {p} --all"),
            ),
            None => (
                "every principal's calls but the owner's (the grants of an earlier hcp, kept in one file); grant again after the repair with `hcp grant PRINCIPAL PACK CAP…`".to_owned(),
                format!("mv {} {}.damaged", d.path.display(), d.path.display()),
            ),
        };
        out.push(Damaged {
            kind: "grants",
            path: d.path,
            reason: d.reason,
            refuses,
            repair,
        });
    }
    let state = home.dir(StoreDir::State);
    match crate::approval::damaged(home) {
        Ok(list) => {
            for (path, reason) in list {
                out.push(Damaged {
                    kind: "approval",
                    repair: format!("rm {}", path.display()),
                    refuses: "the one call the approval was for alone (it asks again)".into(),
                    path,
                    reason,
                });
            }
        }
        Err(e) => out.push(unreadable("approval", &state.join("approvals"), &e)),
    }
    match crate::pack::damaged_markers(home) {
        Ok(list) => {
            for (id, path, reason) in list {
                out.push(Damaged {
                    kind: "activation",
                    repair: format!("hcp deactivate {id}"),
                    refuses: format!(
                        "the calls of pack `{id}` alone; activate it again after the repair with `hcp activate {id}`"
                    ),
                    path,
                    reason,
                });
            }
        }
        Err(e) => out.push(unreadable("activation", &state.join("active"), &e)),
    }
    if let Some(reason) = crate::ledger::unusable(home) {
        out.push(Damaged {
            kind: "ledger",
            path: crate::ledger::path(home),
            reason,
            refuses: "the calls of every principal, and every call of a pack, the owner's too (the owner's commands go on); run the repair once `hcp session list`, `hcp grant --list` and `hcp list` show only what should be there".into(),
            repair: "hcp state reledger".into(),
        });
    }
    if let Some(reason) = crate::ledger::stale(home) {
        out.push(Damaged {
            kind: "ledger",
            path: crate::ledger::path(home),
            reason,
            refuses: "nobody's calls by itself: the grants, sessions, approvals and activations it vouches for may be older copies put back with it".into(),
            repair: "check `hcp session list` and `hcp list`; `hcp revoke PRINCIPAL --all`, `hcp session end ID`, `hcp deactivate PACK` for what should not be there".into(),
        });
    }
    for (kind, dir, refuses) in [(
        "counter",
        state.join("counters"),
        "the calls of its principal and tool alone (`rate_limit`, `budget`)",
    )] {
        for (path, reason) in json_files(&dir) {
            out.push(Damaged {
                kind,
                // `-r`: a counter made a directory is removed the same way.
                repair: format!("rm -r {}", path.display()),
                refuses: refuses.into(),
                path,
                reason,
            });
        }
        // A counter's lock file (`<key>.lock`, empty) that is no regular file.
        for path in not_regular(&dir, "lock") {
            out.push(Damaged {
                kind: "counter lock",
                repair: format!("rm -r {}", path.display()),
                refuses: refuses.into(),
                reason: "it is not a regular file (a directory, a FIFO or a link)".into(),
                path,
            });
        }
    }
    out.extend(records(home));
    out.extend(bindings(home));
    // A ledger that cannot be believed makes every file it vouched for look damaged: the
    // ledger is the one record to repair (`hcp state reledger`), and the repairs of
    // those files (each an `rm` or a revoke) would throw authority away for nothing.
    if out.iter().any(|d| d.kind == "ledger") && crate::ledger::unusable(home).is_some() {
        out.retain(|d| d.kind == "ledger" || !d.reason.contains("`state/ledger.json`"));
    }
    out
}

/// The store's directories (and `state/`'s) that are links or not directories: what is
/// written there would land wherever a link points, so each is damage, whose repair
/// removes the link (never what it points to; hcp makes the directory again).
fn dirs(home: &Home) -> Vec<Damaged> {
    use crate::home::StoreDir;
    let state = home.dir(StoreDir::State);
    let mut places: Vec<PathBuf> = [
        StoreDir::State,
        StoreDir::Packs,
        StoreDir::Skills,
        StoreDir::Audit,
    ]
    .into_iter()
    .map(|d| home.dir(d))
    .collect();
    for sub in [
        "sessions",
        "grants",
        "approvals",
        "counters",
        "active",
        "bindings",
    ] {
        places.push(state.join(sub));
    }
    let mut out = Vec::new();
    for p in places {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let reason = if m.file_type().is_symlink() {
            "it is a symbolic link, not a directory of the store"
        } else if !m.is_dir() {
            "it is not a directory"
        } else {
            continue;
        };
        out.push(Damaged {
            kind: "store directory",
            repair: format!("rm {}", p.display()),
            refuses: "what is kept in it: the calls and acts that read or write it".into(),
            path: p,
            reason: reason.into(),
        });
    }
    out
}

/// Every install record that does not parse or whose MAC is missing or does not hold
/// (`crate::stamp::records`), by pack id: each refuses its pack alone.
fn records(home: &Home) -> Vec<Damaged> {
    let Ok(ids) = crate::pack::installed_ids(home) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for id in ids {
        let path = crate::pack::pack_dir(home, id.as_str())
            .join(crate::pack::record::RECORD_DIR)
            .join(crate::pack::record::RECORD_FILE);
        let reason = match crate::atomic::read_record(&path) {
            Ok(Some(b)) => match crate::pack::InstallRecord::open(home, id.as_str(), &path, &b) {
                Ok(_) => continue,
                Err(crate::StoreError::Damaged { reason, .. }) => reason,
                Err(e) => e.to_string(),
            },
            Ok(None) => "cannot be read: it does not exist".to_owned(),
            Err(crate::StoreError::Damaged { reason, .. }) => reason,
            Err(e) => format!("cannot be read: {e}"),
        };
        out.push(Damaged {
            kind: "install record",
            repair: "hcp install --force DIR".into(),
            refuses: format!(
                "every call of pack `{id}` alone (DIR: the pack's source; `hcp uninstall {id}` removes it instead)"
            ),
            path,
            reason,
        });
    }
    out
}

/// Every binding file that does not parse or whose MAC is missing or does not hold
/// (`crate::stamp::records`): each refuses that principal's binding of its family alone.
fn bindings(home: &Home) -> Vec<Damaged> {
    let mut out = Vec::new();
    let root = home.dir(StoreDir::State).join("bindings");
    for (principal, family, _) in crate::binding::list(home) {
        let path = root.join(&principal).join(format!("{family}.json"));
        let reason = match crate::atomic::read_record(&path) {
            Ok(Some(bytes)) => {
                match crate::stamp::records::open_binding::<crate::binding::Credential>(
                    home, &path, &bytes,
                ) {
                    Ok(c) if c.principal == principal && c.family == family => continue,
                    Ok(_) => "the record names another principal or family".to_owned(),
                    Err(crate::StoreError::Damaged { reason, .. }) => reason,
                    Err(e) => e.to_string(),
                }
            }
            Ok(None) | Err(crate::StoreError::Io { .. }) => continue,
            Err(crate::StoreError::Damaged { reason, .. }) => reason,
            Err(e) => e.to_string(),
        };
        out.push(Damaged {
            kind: "binding",
            repair: format!("rm {}", path.display()),
            refuses: format!(
                "the binding of principal `{principal}` for family `{family}` alone (then `hcp connect PACK` by `{principal}` stores a new one)"
            ),
            path,
            reason,
        });
    }
    out
}

/// Every damaged tenant home below `homes` (RUNTIME §4 "Fault isolation", §5.2): a
/// `PACK/principal/ID` or `PACK/project/ID` entry that is not a directory of this user
/// (a file, a symlink), or a directory on the way that is not one. Each refuses the calls
/// of its tenant on its pack alone. Reads only.
pub fn homes(homes: &Path) -> Vec<Damaged> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let why = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) if m.file_type().is_symlink() => Some("it is a symlink".to_owned()),
        Ok(m) if !m.is_dir() => Some("it is not a directory".to_owned()),
        Ok(m) if m.uid() != uid => Some(format!("it is owned by uid {}", m.uid())),
        Ok(_) => None,
        Err(e) => Some(format!("cannot be read: {e}")),
    };
    let entries = |d: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(d)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.retain(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.'))
        });
        v.sort();
        v
    };
    let mut out = Vec::new();
    // The directory of every home itself: a link (to `/`, say) or anything but a
    // directory of this user's is one damaged record, and nothing through it is read.
    if std::fs::symlink_metadata(homes).is_ok()
        && let Some(reason) = why(homes)
    {
        out.push(Damaged {
            kind: "homes directory",
            repair: format!("rm {}", homes.display()),
            refuses: "the calls of every tenant of every pack in `personal` and `brain` land (removing it removes a link or file, never what a link points to; hcp makes the directory again)".into(),
            path: homes.to_path_buf(),
            reason,
        });
        return out;
    }
    for pack in entries(homes) {
        let pack_id = pack.file_name().map(|n| n.to_string_lossy().into_owned());
        let pack_id = pack_id.unwrap_or_default();
        if let Some(reason) = why(&pack) {
            out.push(Damaged {
                kind: "home",
                repair: format!("hcp uninstall {pack_id} --purge, or rm {}", pack.display()),
                refuses: format!(
                    "the calls of every tenant of pack `{pack_id}` in `personal` and `brain` land"
                ),
                path: pack,
                reason,
            });
            continue;
        }
        for kind in ["principal", "project"] {
            let dir = pack.join(kind);
            if !dir.exists() && std::fs::symlink_metadata(&dir).is_err() {
                continue;
            }
            if let Some(reason) = why(&dir) {
                out.push(Damaged {
                    kind: "home",
                    repair: format!("rm {}", dir.display()),
                    refuses: format!("the calls of every {kind} of pack `{pack_id}` in its land"),
                    path: dir,
                    reason,
                });
                continue;
            }
            for home in entries(&dir) {
                let Some(reason) = why(&home) else {
                    continue;
                };
                let id = home.file_name().map(|n| n.to_string_lossy().into_owned());
                let id = id.unwrap_or_default();
                out.push(Damaged {
                    kind: "home",
                    repair: format!("hcp home rm {pack_id} --{kind} {id}"),
                    refuses: format!("the calls of {kind} `{id}` on pack `{pack_id}` alone"),
                    path: home,
                    reason,
                });
            }
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
/// The entries of `dir` named `*.EXT` that are not regular files (by `lstat`: a link
/// counts as what it is), sorted.
fn not_regular(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == ext))
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_file()))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

fn json_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, String)> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| {
            let why = match crate::atomic::read_record(&p) {
                Ok(Some(b)) => match serde_json::from_slice::<serde_json::Value>(&b) {
                    Ok(serde_json::Value::Object(_)) => return None,
                    Ok(_) => "it is not a JSON object".to_owned(),
                    Err(e) => e.to_string(),
                },
                Ok(None) => return None,
                Err(crate::StoreError::Damaged { reason, .. }) => reason,
                Err(e) => format!("cannot be read: {e}"),
            };
            Some((p, why))
        })
        .collect();
    out.sort();
    out
}
