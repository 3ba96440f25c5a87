//! The exporter's cursor, kept in the store (RUNTIME §11):
//! `$HCP_HOME/state/export/<first 16 hex digits of the SHA-256 of the URL>.json`, one per
//! collector, replaced whole (temporary file, sync, rename).
//!
//! It says where each chain's export stands — after the last record whose spans the
//! collector acknowledged — and holds the calls read whose outcome has not come yet (their
//! intent records, so that a resume never reads back before its position). `sending`
//! names the batch in flight, written before it is sent and cleared with the position
//! after the collector took it: a resume that finds it says that batch goes again, and
//! that the collector may already hold its spans (with the same ids).

use crate::error::ExportError;
use hcp_store::audit::ChainPos;
use hcp_store::{Home, StoreDir};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The cursor file's `format`.
pub const FORMAT: &str = "hcp-export-cursor/1";

/// How many intents sent as `interrupted` are remembered, so that a late outcome is sent
/// as such.
pub const INTERRUPTED_KEPT: usize = 4096;

/// A batch sent and not yet acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sending {
    /// Records it covers, from the cursor's position.
    pub records: u64,
    /// Spans in it.
    pub spans: u64,
}

/// An intent sent as `interrupted`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SentInterrupted {
    /// The intent's `id` (the call's `audit_id`).
    pub id: String,
    /// Its chain hash: the span id of the interrupted span.
    pub hash: String,
}

/// The cursor (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cursor {
    /// [`FORMAT`].
    pub format: String,
    /// The collector's URL.
    pub url: String,
    /// Where each chain stands: after the last record acknowledged.
    pub chains: Vec<ChainPos>,
    /// Intents read whose outcome has not come, as read.
    pub held: Vec<Map<String, Value>>,
    /// Intents sent as `interrupted`, newest last, at most [`INTERRUPTED_KEPT`].
    pub interrupted: Vec<SentInterrupted>,
    /// The batch in flight, if any.
    pub sending: Option<Sending>,
}

impl Cursor {
    /// A cursor before every record, for `url`.
    pub fn new(url: &str) -> Self {
        Self {
            format: FORMAT.to_owned(),
            url: url.to_owned(),
            chains: Vec::new(),
            held: Vec::new(),
            interrupted: Vec::new(),
            sending: None,
        }
    }

    /// The file of `url`'s cursor in `home`.
    pub fn path(home: &Home, url: &str) -> PathBuf {
        let digest = hex::encode(Sha256::digest(url.as_bytes()));
        home.dir(StoreDir::State)
            .join("export")
            .join(format!("{}.json", &digest[..16]))
    }

    /// Reads `url`'s cursor; a new one when there is none.
    ///
    /// # Errors
    /// [`ExportError::Cursor`] when the file cannot be read, does not parse or is
    /// another URL's.
    pub fn load(home: &Home, url: &str) -> Result<Self, ExportError> {
        let path = Self::path(home, url);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::new(url)),
            Err(e) => {
                return Err(ExportError::Cursor {
                    path,
                    reason: format!("cannot read it: {e}"),
                });
            }
        };
        let c: Self = serde_json::from_slice(&bytes).map_err(|e| ExportError::Cursor {
            path: path.clone(),
            reason: format!("it does not parse: {e}"),
        })?;
        if c.format != FORMAT || c.url != url {
            return Err(ExportError::Cursor {
                path,
                reason: format!(
                    "it is a cursor of format `{}` for `{}`, not of `{FORMAT}` for `{url}`",
                    c.format, c.url
                ),
            });
        }
        Ok(c)
    }

    /// Writes the cursor (atomically, synced).
    ///
    /// # Errors
    /// [`ExportError::Store`].
    pub fn save(&self, home: &Home) -> Result<(), ExportError> {
        let path = Self::path(home, &self.url);
        let bytes = serde_json::to_vec(self).map_err(|e| ExportError::Cursor {
            path: path.clone(),
            reason: format!("cannot encode it: {e}"),
        })?;
        Ok(hcp_store::atomic::write_atomic(&path, &bytes)?)
    }

    /// Records read so far, all chains together.
    pub fn records(&self) -> u64 {
        self.chains.iter().map(|c| c.seq).sum()
    }

    /// Remembers that `id` (chain hash `hash`) was sent as interrupted.
    pub fn note_interrupted(&mut self, id: &str, hash: &str) {
        self.interrupted.push(SentInterrupted {
            id: id.to_owned(),
            hash: hash.to_owned(),
        });
        if self.interrupted.len() > INTERRUPTED_KEPT {
            let extra = self.interrupted.len() - INTERRUPTED_KEPT;
            self.interrupted.drain(..extra);
        }
    }
}
