//! The documents hcp's messages and docs point at are documents of the repository.
//!
//! A hint (`hint:` of a refusal, of a lint finding, `Code::next_step`) may name a file
//! under `docs/`, `README.md` or a command; a user never has the contract or the seeds
//! beside the clone. These tests read the sources: every Markdown file under `docs/`
//! that a source file, the README or a doc names exists, and no hint names the contract
//! or the seeds.

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        crate::repo_root()
    }

    /// Every file under `dir` whose name ends with one of `exts`, `target/` left out.
    fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name();
            if name == "target" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                files(&p, exts, out);
            } else if exts.iter().any(|x| name.to_string_lossy().ends_with(x)) {
                out.push(p);
            }
        }
    }

    fn sources() -> Vec<PathBuf> {
        let r = root();
        let mut out = Vec::new();
        for d in ["crates", "xtask", "examples", "docs"] {
            files(&r.join(d), &[".rs", ".md"], &mut out);
        }
        out.push(r.join("README.md"));
        out
    }

    /// Each Markdown file of `docs/` named in a source (also with an `#anchor`), with
    /// where; a path that merely ends in `docs/…` (`../docs/x.md` in an example) is not
    /// one.
    fn named_docs() -> Vec<(String, PathBuf)> {
        let re = regex::Regex::new(r#"(?:^|[\s(`"'\[,])docs/([A-Za-z0-9_.-]+\.md)"#).unwrap();
        let mut out = Vec::new();
        for f in sources() {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            for c in re.captures_iter(&text) {
                out.push((c[1].to_owned(), f.clone()));
            }
        }
        out
    }

    #[test]
    fn every_named_doc_exists() {
        let r = root();
        let named = named_docs();
        assert!(
            named.iter().any(|(d, _)| d == "packs.md")
                && named.iter().any(|(d, _)| d == "config.md"),
            "the sources name docs/packs.md and docs/config.md"
        );
        let absent: Vec<String> = named
            .iter()
            .filter(|(d, _)| !r.join("docs").join(d).is_file())
            .map(|(d, f)| {
                format!(
                    "docs/{d} (named in {})",
                    f.strip_prefix(&r).unwrap_or(f).display()
                )
            })
            .collect();
        assert!(absent.is_empty(), "{absent:#?}");
    }

    #[test]
    fn the_readme_links_both_references() {
        let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
        for d in ["docs/packs.md", "docs/config.md"] {
            assert!(readme.contains(&format!("]({d}")), "README.md links {d}");
        }
    }

    /// The hints of refusals and of lint findings: `.hint("…")`, `.hint(format!("…"`,
    /// `hint: "…"` and the arms of `Code::next_step`.
    #[test]
    fn no_hint_names_the_contract_or_the_seeds() {
        let re = regex::Regex::new(
            r#"(?s)(?:\.hint\(\s*(?:format!\(\s*)?|hint:\s*(?:Some\()?)"((?:[^"\\]|\\.)*)""#,
        )
        .unwrap();
        let mut bad = Vec::new();
        let r = root();
        for f in sources()
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "rs"))
        {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            for c in re.captures_iter(&text) {
                let h = &c[1];
                if h.contains("RUNTIME") || h.contains("seeds") {
                    bad.push(format!(
                        "{}: {h}",
                        f.strip_prefix(&r).unwrap_or(f).display()
                    ));
                }
            }
        }
        for code in hcp_model::Code::ALL {
            let h = code.next_step();
            if h.contains("RUNTIME") || h.contains("seeds") {
                bad.push(format!("{code}: {h}"));
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }
}
