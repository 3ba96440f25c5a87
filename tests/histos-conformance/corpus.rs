//! Where the Histos conformance corpus is, checked against its pins: the one helper every
//! reader of the corpus uses (the tests of `crates/histos`, `crates/runtime`, `crates/hcp`
//! and `cargo xtask bench gate` include this file with `#[path]`).
//!
//! The corpus is vendored byte-for-byte in the repository, at
//! `tests/histos-conformance/conformance/` (Apache-2.0 test data: see `NOTICE` and
//! `LICENSE` beside it). `HISTOS_CONFORMANCE_DIR` names another copy (the directory that
//! holds `manifest.json`). Either way every fixture the manifest lists is read and compared
//! with its sha256 pin: a modified, missing or extra-changed fixture is a different corpus,
//! and the reader fails instead of testing against it.
//!
//! Needs `sha2` and `serde_json` in the including crate.

use std::path::{Path, PathBuf};

/// The vendored corpus, relative to the workspace root.
const VENDORED: &str = "tests/histos-conformance/conformance";

/// The corpus directory (the one holding `manifest.json`), after every fixture the
/// manifest lists matched its sha256. The error names the directory or the fixture, and
/// what to do.
pub fn locate() -> Result<PathBuf, String> {
    let dir = match std::env::var_os("HISTOS_CONFORMANCE_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .map(|a| a.join(VENDORED))
            .find(|p| p.join("manifest.json").is_file())
            .ok_or_else(|| {
                format!(
                    "the Histos conformance corpus is not at `{VENDORED}` in any directory \
                     above `{}`; restore it from git (`git checkout -- {VENDORED}`) or set \
                     HISTOS_CONFORMANCE_DIR to a copy",
                    env!("CARGO_MANIFEST_DIR")
                )
            })?,
    };
    verify(&dir)?;
    Ok(dir)
}

/// Compares every fixture `manifest.json` lists under `corpora.*.cases` with its sha256,
/// and refuses a `.json` file in a corpus directory that the manifest does not list (the
/// readers list the directories).
pub fn verify(dir: &Path) -> Result<(), String> {
    use sha2::{Digest, Sha256};
    let manifest_path = dir.join("manifest.json");
    let text = std::fs::read(&manifest_path).map_err(|e| {
        format!(
            "the Histos conformance corpus is required: cannot read `{}` ({e}); set \
             HISTOS_CONFORMANCE_DIR to the directory holding manifest.json",
            manifest_path.display()
        )
    })?;
    let manifest: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| format!("`{}` does not parse: {e}", manifest_path.display()))?;
    let corpora = manifest["corpora"]
        .as_object()
        .ok_or_else(|| format!("`{}` lists no corpora", manifest_path.display()))?;
    let mut checked = 0usize;
    let mut listed = std::collections::BTreeSet::new();
    for (corpus, body) in corpora {
        let cases = body["cases"].as_array().ok_or_else(|| {
            format!(
                "`{}`: corpus `{corpus}` lists no cases",
                manifest_path.display()
            )
        })?;
        for case in cases {
            let (Some(file), Some(want)) = (case["file"].as_str(), case["sha256"].as_str()) else {
                return Err(format!(
                    "`{}`: a case of `{corpus}` has no file or sha256",
                    manifest_path.display()
                ));
            };
            let path = dir.join(file);
            let bytes = std::fs::read(&path)
                .map_err(|e| format!("cannot read fixture `{}`: {e}", path.display()))?;
            let got: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            if got != want {
                return Err(format!(
                    "fixture `{}` has sha256 {got}, its manifest pins {want}: a modified \
                     fixture is a different corpus (restore it byte-for-byte)",
                    path.display()
                ));
            }
            checked += 1;
            listed.insert(path);
        }
        let sub = dir.join(corpus);
        let entries = std::fs::read_dir(&sub)
            .map_err(|e| format!("cannot read corpus directory `{}`: {e}", sub.display()))?;
        for entry in entries {
            let path = entry
                .map_err(|e| format!("cannot read corpus directory `{}`: {e}", sub.display()))?
                .path();
            if path.extension().is_some_and(|x| x == "json") && !listed.contains(&path) {
                return Err(format!(
                    "fixture `{}` is not pinned in `{}`: an unlisted fixture is not part of \
                     the corpus (remove it)",
                    path.display(),
                    manifest_path.display()
                ));
            }
        }
    }
    if checked == 0 {
        return Err(format!("`{}` pins no fixture", manifest_path.display()));
    }
    Ok(())
}
