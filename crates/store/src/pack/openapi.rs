//! The OpenAPI document of a `kind: openapi` pack (RUNTIME §1.3): read once at install,
//! refused when hcp cannot use it, pinned by digest and kept in the store; exec reads the
//! pinned copy, never the document's origin.
//!
//! ```text
//! packs/<id>/.hcp/openapi.document      the document's bytes, as read (JSON or YAML)
//! packs/<id>/.hcp/openapi.verbs.json    each verb's compiled operation
//! ```
//!
//! Both sit in the staged copy beside the install record, so they are swapped into place
//! with it; the record pins both digests ([`PinnedDocument`]). The compiled verbs are what
//! exec reads (a few kilobytes, whatever the document's size); a copy written by another
//! format of this crate is compiled again from the pinned document.

use super::record::{RECORD_DIR, sha256_tagged};
use super::{InstalledPack, PackError};
use crate::error::StoreError;
use hcp_model::{Kind, Manifest, SpecSource};
use hcp_openapi::{Document, Operation, OperationError, ServerUrl};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The pinned document's file name inside [`RECORD_DIR`].
pub const DOCUMENT_FILE: &str = "openapi.document";
/// The compiled verbs' file name inside [`RECORD_DIR`].
pub const VERBS_FILE: &str = "openapi.verbs.json";
/// How long install waits for a document at a URL: 30 s.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(30);
/// The format of [`VERBS_FILE`].
const VERBS_FORMAT: u32 = 1;

/// What install pinned of a pack's OpenAPI document (in the install record).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedDocument {
    /// `openapi.spec` as the manifest writes it.
    pub spec: String,
    /// Where it was read: the URL, or the absolute path of the file beside the pack.
    pub source: String,
    /// `sha256:<64 hex>` of the document's bytes.
    pub sha256: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The document's first server, resolved against `source` when it is a URL; `None`
    /// when the document names no absolute one (the operator's `server` is then needed).
    pub server: Option<String>,
    /// `sha256:<64 hex>` of [`VERBS_FILE`].
    pub verbs_sha256: String,
}

/// Why install refused a pack's OpenAPI document (RUNTIME §1.3). Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenapiRefusal {
    /// `bad_openapi`: the document cannot be read.
    #[error("cannot read the OpenAPI document `{spec}`: {reason}")]
    Unreadable {
        /// `openapi.spec`.
        spec: String,
        /// Why, lowercase.
        reason: String,
    },
    /// `bad_openapi`: the document, or the operation a verb calls, is refused.
    #[error("the OpenAPI document `{spec}` is refused{}: {message} (at `{}`)", verb.as_ref().map(|v| format!(" for verb `{v}`")).unwrap_or_default(), if pointer.is_empty() { "/" } else { pointer })]
    Bad {
        /// `openapi.spec`.
        spec: String,
        /// The verb whose operation is refused, when it is one operation.
        verb: Option<String>,
        /// The JSON pointer of the fault.
        pointer: String,
        /// Why, lowercase.
        message: String,
    },
    /// `unknown_operation`: a verb names no operation of the document.
    #[error("verb `{verb}`: {}", match operation { Some(o) => format!("the OpenAPI document has no operation `{o}`"), None => "it names no `operation`".to_owned() })]
    UnknownOperation {
        /// The verb key.
        verb: String,
        /// The `operation` it names, if any.
        operation: Option<String>,
    },
}

impl OpenapiRefusal {
    /// The stable code: `bad_openapi` or `unknown_operation`.
    pub fn code(&self) -> hcp_model::Code {
        match self {
            Self::Unreadable { .. } | Self::Bad { .. } => hcp_model::Code::BadOpenapi,
            Self::UnknownOperation { .. } => hcp_model::Code::UnknownOperation,
        }
    }
}

/// The OpenAPI document beside a pack, as the caller read it with the pack's files
/// (`hcp_lint::read_pack`: no symlink followed, at most 16 MiB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BesideDocument {
    /// Its path relative to the pack directory, as `openapi.spec` writes it.
    pub rel: String,
    /// Its bytes, or why they could not be read (lowercase).
    pub bytes: Result<Vec<u8>, String>,
}

/// What install stages for an openapi pack.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub pin: PinnedDocument,
    pub document: Vec<u8>,
    pub verbs: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct VerbsFile {
    format: u32,
    verbs: BTreeMap<String, Operation>,
}

/// Reads, checks and compiles the document of `manifest` (for `kind: openapi`; `None` for
/// the other kinds). `document` is the file beside the pack as lint read it (the same
/// bytes), `source_dir` the pack directory. Writes nothing.
pub(crate) fn prepare(
    manifest: &Manifest,
    document: Option<&BesideDocument>,
    source_dir: &Path,
) -> Result<Option<Prepared>, OpenapiRefusal> {
    if manifest.kind != Kind::Openapi {
        return Ok(None);
    }
    let unreadable = |spec: &str, reason: String| OpenapiRefusal::Unreadable {
        spec: spec.to_owned(),
        reason,
    };
    let Some(r) = &manifest.openapi else {
        return Err(unreadable("", "the manifest has no `openapi.spec`".into()));
    };
    let spec = r.spec.as_str();
    let (bytes, source, base) = match r.source().map_err(|e| unreadable(spec, e))? {
        SpecSource::Url(u) => {
            let limits = hcp_openapi::Limits {
                timeout: FETCH_TIMEOUT,
                body_cap: hcp_openapi::MAX_DOCUMENT_BYTES,
            };
            let bytes = hcp_openapi::fetch(u, &limits).map_err(|e| unreadable(spec, e))?;
            (bytes, u.to_owned(), url::Url::parse(u).ok())
        }
        SpecSource::Path(rel) => {
            let d = document
                .filter(|d| d.rel == rel)
                .ok_or_else(|| unreadable(spec, "it was not read with the pack".into()))?;
            let bytes = d.bytes.clone().map_err(|e| unreadable(spec, e))?;
            (bytes, source_dir.join(rel).display().to_string(), None)
        }
    };
    let bad = |verb: Option<&str>, b: hcp_openapi::BadOpenapi| OpenapiRefusal::Bad {
        spec: spec.to_owned(),
        verb: verb.map(str::to_owned),
        pointer: b.pointer,
        message: b.message,
    };
    let doc = Document::parse(&bytes).map_err(|b| bad(None, b))?;
    let mut verbs = BTreeMap::new();
    for (key, v) in &manifest.verbs {
        let Some(id) = &v.operation else {
            return Err(OpenapiRefusal::UnknownOperation {
                verb: key.clone(),
                operation: None,
            });
        };
        match doc.operation(id) {
            Ok(op) => {
                verbs.insert(key.clone(), op);
            }
            Err(OperationError::Unknown(_)) => {
                return Err(OpenapiRefusal::UnknownOperation {
                    verb: key.clone(),
                    operation: Some(id.clone()),
                });
            }
            Err(OperationError::Bad(b)) => return Err(bad(Some(key), b)),
        }
    }
    let server = doc
        .server(base.as_ref())
        .map_err(|b| bad(None, b))?
        .map(|s| s.as_str().to_owned());
    let mut verbs_bytes = serde_json::to_vec_pretty(&VerbsFile {
        format: VERBS_FORMAT,
        verbs,
    })
    .unwrap_or_default();
    verbs_bytes.push(b'\n');
    Ok(Some(Prepared {
        pin: PinnedDocument {
            spec: spec.to_owned(),
            source,
            sha256: sha256_tagged(&bytes),
            bytes: bytes.len() as u64,
            server,
            verbs_sha256: sha256_tagged(&verbs_bytes),
        },
        document: bytes,
        verbs: verbs_bytes,
    }))
}

impl From<OpenapiRefusal> for PackError {
    fn from(e: OpenapiRefusal) -> Self {
        PackError::Openapi(Box::new(e))
    }
}

fn damaged(pack: &InstalledPack, name: &str, reason: String) -> PackError {
    StoreError::Damaged {
        path: pack.dir.join(RECORD_DIR).join(name),
        reason,
    }
    .into()
}

fn read_pinned(
    pack: &InstalledPack,
    name: &str,
    want: &str,
    limit: u64,
) -> Result<Vec<u8>, PackError> {
    let dir = pack.dir.join(RECORD_DIR);
    let fd = super::fsops::open_dir(&dir).map_err(|e| StoreError::io("open", &dir, e))?;
    let bytes = super::fsops::read_at(&fd, name, limit)
        .map_err(|e| StoreError::io("read", dir.join(name), e))?;
    let got = sha256_tagged(&bytes);
    if got != want {
        return Err(damaged(
            pack,
            name,
            format!("its digest is `{got}` but the install record says `{want}`"),
        ));
    }
    Ok(bytes)
}

/// The pinned copy of an installed openapi pack's document, checked against its digest
/// (RUNTIME §1.3: the copy install read, never the document's origin).
///
/// # Errors
/// [`StoreError::Damaged`] when the pack is not an openapi pack with a pin, or the copy
/// differs from its digest; [`StoreError::Io`] when it cannot be read.
pub fn pinned_document(pack: &InstalledPack) -> Result<Vec<u8>, PackError> {
    let Some(pin) = &pack.record.openapi else {
        return Err(damaged(
            pack,
            DOCUMENT_FILE,
            "the install record pins no document".into(),
        ));
    };
    read_pinned(
        pack,
        DOCUMENT_FILE,
        &pin.sha256,
        hcp_openapi::MAX_DOCUMENT_BYTES as u64,
    )
}

/// The compiled operation verb `verb_key` of an installed openapi pack calls, from the
/// pinned copy (checked against its digest). A copy of another format is compiled again
/// from the pinned document.
///
/// # Errors
/// [`OpenapiRefusal::UnknownOperation`] when the pack has no such verb; as
/// [`pinned_document`] otherwise.
pub fn pinned_operation(pack: &InstalledPack, verb_key: &str) -> Result<Operation, PackError> {
    let Some(pin) = &pack.record.openapi else {
        return Err(damaged(
            pack,
            VERBS_FILE,
            "the install record pins no document".into(),
        ));
    };
    let bytes = read_pinned(pack, VERBS_FILE, &pin.verbs_sha256, 64 * 1024 * 1024)?;
    let unknown = || {
        PackError::from(OpenapiRefusal::UnknownOperation {
            verb: verb_key.to_owned(),
            operation: pack.manifest.operation_id(verb_key).map(str::to_owned),
        })
    };
    match serde_json::from_slice::<VerbsFile>(&bytes) {
        Ok(f) if f.format == VERBS_FORMAT => f.verbs.get(verb_key).cloned().ok_or_else(unknown),
        _ => {
            let doc = Document::parse(&pinned_document(pack)?)
                .map_err(|b| damaged(pack, DOCUMENT_FILE, b.to_string()))?;
            let id = pack.manifest.operation_id(verb_key).ok_or_else(unknown)?;
            doc.operation(id)
                .map_err(|e| damaged(pack, DOCUMENT_FILE, e.to_string()))
        }
    }
}

/// The server an installed openapi pack's requests go to: the operator's `server` when
/// given (RUNTIME §1.3, `config.json` `"packs": {"ID": {"server": URL}}`), else the
/// document's first server as install resolved it.
///
/// # Errors
/// `bad_openapi` ([`hcp_openapi::BadOpenapi`]) when the operator's URL is not an
/// `http(s)` origin, or when there is neither.
pub fn server(
    pack: &InstalledPack,
    operator: Option<&str>,
) -> Result<ServerUrl, hcp_openapi::BadOpenapi> {
    if let Some(s) = operator {
        return ServerUrl::parse(s);
    }
    match pack
        .record
        .openapi
        .as_ref()
        .and_then(|p| p.server.as_deref())
    {
        Some(s) => ServerUrl::parse(s),
        None => Err(hcp_openapi::BadOpenapi::at(
            "/servers",
            format!(
                "the document names no absolute server URL; set `packs.{}.server` in `config.json`",
                pack.id
            ),
        )),
    }
}
