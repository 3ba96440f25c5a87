//! The keyed MACs of the install records and the bindings (RUNTIME §3 "Install pins what
//! it will run", §8, §4 "Fault isolation"): the same MAC as the state files'
//! ([`super::STAMP_TAG`] under the chain key, field [`super::MAC_FIELD`]), on
//!
//! - each install record, `packs/<id>/.hcp/record.json`, bound to that name (its path below
//!   the store's root, [`record_name`]: the record is sealed in `staging/` under the name it
//!   will have once the copy is in place);
//! - each binding, `state/bindings/<principal>/<family>.json`, bound to its path below
//!   `state/` (`bindings/alice/mail.json`), as a state file is.
//!
//! So a record whose pins were re-pointed at another program (`bins[].path`, `sha256`), or
//! whose grant counts were lowered, and a binding copied to another principal's name with
//! its `principal` edited, are damaged; and since the state ledger lists both by their MAC
//! (`crate::ledger`, version 2 on), so is an older copy of either put back (a binding after
//! `hcp disconnect`, a record from before a reinstall), or one put back after hcp removed it ([`crate::StoreError::Damaged`], `store_damaged`):
//! the record refuses that pack alone, the binding that principal's binding alone; `hcp
//! doctor` lists both with their repair ([`crate::damage::scan`]). Whoever holds the chain
//! key can write a MAC that holds; only a witness's checkpoints catch what they do to the
//! trail (docs/DESIGN.md).
//!
//! A store of an earlier version has these files without `mac`: they are read as they are
//! until the store's first call or act of authority by this version, which stamps them
//! under the store lock ([`migrate`]) and records a `migrate` act whose `changed` holds
//! [`RECORDS_FIELD`]; a store this version made says so in its `init` record. From either
//! record on, such a file without `mac` is damage ([`keyed`]).

use super::{Ledgered, Opened, read_named, relative, seal_named, seal_named_mac, trail_says};
use crate::atomic::write_atomic;
use crate::error::{StoreError, StoreResult};
use crate::home::{Home, StoreDir};
use crate::lock::StoreLock;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The field of an `init` or `migrate` record's `changed` that says the store's install
/// records and bindings carry MACs from that record on (its value: [`RECORDS_VERSION`]).
pub const RECORDS_FIELD: &str = "record_macs";

/// The version of the MAC [`RECORDS_FIELD`] names.
pub const RECORDS_VERSION: u64 = 1;

/// What an install record's MAC binds it to: `packs/<id>/.hcp/record.json`.
pub fn record_name(id: &str) -> String {
    format!(
        "packs/{id}/{}/{}",
        crate::pack::record::RECORD_DIR,
        crate::pack::record::RECORD_FILE
    )
}

/// Whether the store's install records and bindings must carry a MAC: what its trail says
/// (an `init` or `migrate` record whose `changed` holds [`RECORDS_FIELD`]), read once per
/// process, and only for a file without one. A trail that cannot be read answers yes
/// (fails closed).
pub fn keyed(home: &Home) -> bool {
    if let Some(k) = home.records_keyed_known() {
        return k;
    }
    let k = trail_says(home, RECORDS_FIELD);
    home.set_records_keyed(k);
    k
}

/// Keeps for this process that the store's install records and bindings carry MACs (after
/// [`migrate`]'s record).
pub fn mark_keyed(home: &Home) {
    home.set_records_keyed(true);
}

/// The bytes of the install record of pack `id` holding `record`, with its MAC bound to
/// [`record_name`] wherever it is written (`path`, named in errors).
///
/// # Errors
/// As [`super::seal`].
pub fn seal_record<T: Serialize>(
    home: &Home,
    id: &str,
    path: &Path,
    record: &T,
) -> StoreResult<Vec<u8>> {
    seal_named(home, &record_name(id), path, record)
}

/// [`seal_record`], and the MAC it gave the record (what the state ledger keeps for it).
///
/// # Errors
/// As [`super::seal`].
pub fn seal_record_mac<T: Serialize>(
    home: &Home,
    id: &str,
    path: &Path,
    record: &T,
) -> StoreResult<(Vec<u8>, String)> {
    seal_named_mac(home, &record_name(id), path, record)
}

/// The install record of pack `id` read from `path` (its `bytes`), its MAC checked: the
/// object without `mac`. One HMAC.
///
/// # Errors
/// [`StoreError::Damaged`] when it is not a JSON object, or its MAC is missing (in a store
/// whose records are keyed) or does not hold; [`StoreError::Io`] naming the chain key when
/// the MAC cannot be checked here.
pub(crate) fn open_record(home: &Home, id: &str, path: &Path, bytes: &[u8]) -> StoreResult<Value> {
    match read_named::<Value>(
        home,
        path,
        &record_name(id),
        bytes,
        || keyed(home),
        "install record",
        Ledgered::Record,
    ) {
        Ok(o) => unfaulted(path, o),
        // A reader that cannot read the chain key — the bootstrap pack's `hcp show` in a
        // call's read-only view, where the key is not — reads the record as it is: it can
        // run nothing by it, since no call runs without its intent, which needs the key.
        Err(StoreError::Io { .. }) => match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(mut m)) => {
                m.remove(super::MAC_FIELD);
                Ok(Value::Object(m))
            }
            _ => Err(StoreError::Damaged {
                path: path.to_path_buf(),
                reason: super::typed_error::<Value>(bytes),
            }),
        },
        Err(e) => Err(e),
    }
}

/// The bytes of the binding file at `path` holding `credential`, with its MAC.
///
/// # Errors
/// As [`super::seal`].
pub(crate) fn seal_binding<T: Serialize>(
    home: &Home,
    path: &Path,
    credential: &T,
) -> StoreResult<Vec<u8>> {
    seal_binding_mac(home, path, credential).map(|(bytes, _)| bytes)
}

/// [`seal_binding`], and the MAC it gave the file (what the state ledger keeps for it).
///
/// # Errors
/// As [`super::seal`].
pub(crate) fn seal_binding_mac<T: Serialize>(
    home: &Home,
    path: &Path,
    credential: &T,
) -> StoreResult<(Vec<u8>, String)> {
    seal_named_mac(home, &relative(home, path), path, credential)
}

/// The binding file at `path` (its `bytes`) as a `T`, its MAC checked first. One HMAC.
///
/// # Errors
/// As [`open_record`], and [`StoreError::Damaged`] when it is not a `T`.
pub(crate) fn open_binding<T: DeserializeOwned>(
    home: &Home,
    path: &Path,
    bytes: &[u8],
) -> StoreResult<T> {
    let o = read_named::<T>(
        home,
        path,
        &relative(home, path),
        bytes,
        || keyed(home),
        "binding file",
        Ledgered::Record,
    )?;
    let v = unfaulted(path, o)?;
    serde_json::from_value(v).map_err(|_| StoreError::Damaged {
        path: path.to_path_buf(),
        reason: "not a credential record".into(),
    })
}

fn unfaulted(path: &Path, o: Opened) -> StoreResult<Value> {
    match o.fault {
        Some(reason) => Err(StoreError::Damaged {
            path: path.to_path_buf(),
            reason,
        }),
        None => Ok(o.value),
    }
}

/// How many install records and bindings [`migrate`] gave their MAC.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stamped {
    /// Install records.
    pub records: usize,
    /// Binding files.
    pub bindings: usize,
}

/// Every install record (`packs/<id>/.hcp/record.json` of a valid pack id), with its id.
pub(crate) fn record_files(home: &Home) -> Vec<(String, PathBuf)> {
    let Ok(ids) = crate::pack::installed_ids(home) else {
        return Vec::new();
    };
    ids.into_iter()
        .map(|id| {
            let path = crate::pack::pack_dir(home, id.as_str())
                .join(crate::pack::record::RECORD_DIR)
                .join(crate::pack::record::RECORD_FILE);
            (id.to_string(), path)
        })
        .collect()
}

/// Every binding file (`state/bindings/<principal>/<family>.json` whose names can be a
/// binding's), sorted.
pub(crate) fn binding_files(home: &Home) -> Vec<PathBuf> {
    let root = home.dir(StoreDir::State).join("bindings");
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(&root) else {
        return out;
    };
    for p in rd.flatten() {
        if !p
            .file_name()
            .to_str()
            .is_some_and(crate::binding::safe_component)
        {
            continue;
        }
        let Ok(inner) = std::fs::read_dir(p.path()) else {
            continue;
        };
        for f in inner.flatten() {
            let name = f.file_name();
            if name
                .to_str()
                .and_then(|n| n.strip_suffix(".json"))
                .is_some_and(crate::binding::safe_component)
            {
                out.push(f.path());
            }
        }
    }
    out.sort();
    out
}

/// The object in the file at `path` when it is one without `mac` (what [`migrate`]
/// stamps); `None` for anything else (damage either way, or stamped already).
fn unstamped(path: &Path) -> Option<Value> {
    let bytes = crate::atomic::read_record(path).ok()??;
    match serde_json::from_slice::<Value>(&bytes).ok()? {
        Value::Object(m) if !m.contains_key(super::MAC_FIELD) => Some(Value::Object(m)),
        _ => None,
    }
}

/// Gives the install records and bindings of a store of an earlier version their MACs
/// (RUNTIME §4 "Stores are made on purpose"), under the store lock the caller holds: each
/// one that is a JSON object without `mac` is rewritten with it (a binding keeps mode
/// 0600). Answers `None`, writing nothing, when the trail says they are keyed already.
/// Otherwise the caller records the `migrate` act with [`RECORDS_FIELD`] and what was
/// stamped, then [`mark_keyed`]. As [`super::migrate`], the files are stamped before that
/// record: stamping changes no authority, and a process killed between the two leaves the
/// rest to the next call.
///
/// # Errors
/// [`StoreError`] when the chain key cannot be read or a file cannot be rewritten.
pub fn migrate(home: &Home, _lock: &StoreLock) -> StoreResult<Option<Stamped>> {
    if trail_says(home, RECORDS_FIELD) {
        home.set_records_keyed(true);
        return Ok(None);
    }
    let mut stamped = Stamped::default();
    for (id, path) in record_files(home) {
        let Some(v) = unstamped(&path) else {
            continue;
        };
        write_atomic(&path, &seal_record(home, &id, &path, &v)?)?;
        stamped.records += 1;
    }
    for path in binding_files(home) {
        let Some(v) = unstamped(&path) else {
            continue;
        };
        // `write_atomic`'s temporary file is 0600, and so the file it renames into place.
        write_atomic(&path, &seal_binding(home, &path, &v)?)?;
        stamped.bindings += 1;
    }
    Ok(Some(stamped))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, Home) {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("hcp");
        crate::made::init(&root, crate::audit::Actor::owner(), None).unwrap();
        let h = Home::open(&root).unwrap();
        (d, h)
    }

    #[test]
    fn a_record_is_bound_to_its_pack_and_a_binding_to_its_principal() {
        let (_d, h) = store();
        let v = json!({"pack_id": "a", "bins": []});
        let staged = h.root().join("staging/a.1/.hcp/record.json");
        let bytes = seal_record(&h, "a", &staged, &v).unwrap();
        let at = h.root().join("packs/a/.hcp/record.json");
        assert_eq!(open_record(&h, "a", &at, &bytes).unwrap(), v);
        let e = open_record(&h, "b", &at, &bytes).unwrap_err();
        assert!(e.to_string().contains("does not hold"), "{e}");
        let alice = h.dir(StoreDir::State).join("bindings/alice/mail.json");
        let bob = h.dir(StoreDir::State).join("bindings/bob/mail.json");
        let c = json!({"principal": "alice"});
        let bytes = seal_binding(&h, &alice, &c).unwrap();
        assert_eq!(open_binding::<Value>(&h, &alice, &bytes).unwrap(), c);
        let e = open_binding::<Value>(&h, &bob, &bytes).unwrap_err();
        assert_eq!(e.code(), "store_damaged");
        // A store this version made: a file without `mac` is damage.
        let e = open_record(&h, "a", &at, b"{\"pack_id\": \"a\"}").unwrap_err();
        assert!(e.to_string().contains("carries no `mac`"), "{e}");
    }

    #[test]
    fn an_earlier_store_is_stamped_once() {
        let (_d, h) = store();
        let log = crate::audit::AuditLog::new(&h);
        let text = std::fs::read_to_string(log.path()).unwrap();
        assert!(text.contains(RECORDS_FIELD), "the init record says so");
        std::fs::write(log.path(), text.replace(RECORDS_FIELD, "other")).unwrap();
        let h = Home::open(h.root()).unwrap();
        let record = h.root().join("packs/a/.hcp/record.json");
        let binding = h.dir(StoreDir::State).join("bindings/alice/mail.json");
        for p in [&record, &binding] {
            write_atomic(p, b"{\"x\": 1}").unwrap();
        }
        assert_eq!(
            open_record(&h, "a", &record, b"{\"x\": 1}").unwrap(),
            json!({"x": 1})
        );
        let lock = StoreLock::acquire(&h).unwrap();
        let s = migrate(&h, &lock).unwrap().unwrap();
        assert_eq!(
            s,
            Stamped {
                records: 1,
                bindings: 1
            }
        );
        let bytes = std::fs::read(&record).unwrap();
        assert_eq!(
            open_record(&h, "a", &record, &bytes).unwrap(),
            json!({"x": 1})
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&binding).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(migrate(&h, &lock).unwrap().unwrap(), Stamped::default());
    }
}
