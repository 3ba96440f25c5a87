//! The documents hcp's messages and docs point at are documents of the repository.
//!
//! A hint (`hint:` of a refusal, of a lint finding, `Code::next_step`) may name a file
//! under `docs/`, `README.md` or a command; a user never has the contract or the seeds
//! beside the clone. These tests read the sources: every Markdown file under `docs/`
//! that a source file, the README or a doc names exists, and no hint names the contract
//! or the seeds.
//!
//! A section is named the way the docs name one, `FILE, "HEADING"` (`README.md, "Working
//! directories"`, `docs/DESIGN.md, "The audit trail"`, `BENCHMARKS.md, "Store"`, also
//! `README's "…"`), and linked as `[…](FILE#anchor)`: every such name in the Markdown of
//! the repository and in the strings of its sources (hints, messages) is a heading of that
//! file, or a heading less its trailing parenthetical (`The store (`$HCP_HOME`)` is
//! named `"The store"`), and every anchor is one a heading of that file makes.

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

    /// The Markdown of the repository: the README, BENCHMARKS.md, `docs/`, the crates'
    /// READMEs, the packs' teaching, the examples'.
    fn markdown() -> Vec<PathBuf> {
        let r = root();
        let mut out = vec![r.join("README.md"), r.join("BENCHMARKS.md")];
        for d in ["docs", "crates", "xtask", "examples", "packs"] {
            files(&r.join(d), &[".md"], &mut out);
        }
        out
    }

    /// The headings of a Markdown text (`#` to `######` outside fenced code), as written.
    fn headings(text: &str) -> Vec<String> {
        let mut fenced = false;
        let mut out = Vec::new();
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                continue;
            }
            if fenced {
                continue;
            }
            let hashes = line.chars().take_while(|c| *c == '#').count();
            if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
                out.push(line[hashes..].trim().to_owned());
            }
        }
        out
    }

    /// The names a heading is referred to by: itself, and itself less a trailing
    /// parenthetical (`Store (`hcp-store`)` is also `Store`).
    fn names_of(heading: &str) -> Vec<String> {
        let mut out = vec![heading.to_owned()];
        if heading.ends_with(')') {
            // The `(` that opens the last parenthetical, nesting counted.
            let mut depth = 0usize;
            for (i, c) in heading.char_indices().rev() {
                match c {
                    ')' => depth += 1,
                    '(' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            let short = heading[..i].trim_end();
                            if !short.is_empty() {
                                out.push(short.to_owned());
                            }
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
        out
    }

    /// GitHub's anchor of a heading: lowercase, spaces to `-`, punctuation but `-` and `_`
    /// dropped; a repeated one gets `-1`, `-2` ….
    fn anchors(text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut bases: Vec<String> = Vec::new();
        for h in headings(text) {
            let slug: String = h
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    '-' | '_' => Some(c),
                    c if c.is_alphanumeric() => Some(c),
                    _ => None,
                })
                .collect();
            let seen = bases.iter().filter(|b| **b == slug).count();
            bases.push(slug.clone());
            out.push(if seen == 0 {
                slug
            } else {
                format!("{slug}-{seen}")
            });
        }
        out
    }

    /// The file a reference names: `README`/`README.md` the root's, a path as it is
    /// (from the root), `DESIGN`, `packs.md` … the one under `docs/`.
    fn target_of(name: &str) -> PathBuf {
        let r = root();
        let file = if name.ends_with(".md") {
            name.to_owned()
        } else {
            format!("{name}.md")
        };
        if file.contains('/') || file == "README.md" || file == "BENCHMARKS.md" {
            r.join(file)
        } else {
            r.join("docs").join(file)
        }
    }

    /// The text where section names are looked for: a Markdown file whole; of a Rust
    /// file, the lines that are not comments (its strings: hints and messages), with `\"`
    /// read as `"`.
    fn searched(f: &Path) -> String {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        if f.extension().is_some_and(|e| e == "rs") {
            text.lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .map(|l| l.replace("\\\"", "\""))
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            text
        }
    }

    /// Each `FILE, "SECTION"` reference of the Markdown and the sources, with where.
    fn section_references() -> Vec<(String, String, PathBuf)> {
        let re = regex::Regex::new(
            r#"(?:^|[\s(`\[])((?:[A-Za-z0-9_.-]+/)*(?:README|BENCHMARKS|DESIGN|packs|config|rules)(?:\.md)?)(?:'s)?,?\s+(?:section\s+)?["“]([^"”\n]+(?:\n[^"”\n]+)?)["”]"#,
        )
        .unwrap();
        let mut files = markdown();
        files.extend(
            sources()
                .into_iter()
                .filter(|f| f.extension().is_some_and(|e| e == "rs")),
        );
        let mut out = Vec::new();
        for f in files {
            let text = searched(&f);
            for c in re.captures_iter(&text) {
                let file = &c[1];
                // `packs.md` and its kin name a section only with `.md` or `docs/`.
                let bare = ["packs", "config", "rules"].contains(&file);
                if bare {
                    continue;
                }
                let name = c[2].split_whitespace().collect::<Vec<_>>().join(" ");
                // A `format!` argument (`"`{}`"`) is named at run time, by a test of its own.
                if name.contains('{') {
                    continue;
                }
                out.push((file.to_owned(), name, f.clone()));
            }
        }
        out
    }

    #[test]
    fn every_named_section_is_a_heading() {
        let r = root();
        let refs = section_references();
        assert!(
            refs.iter()
                .any(|(f, n, _)| f == "README.md" && n == "Working directories"),
            "the `bad_workdir` hint names README.md, \"Working directories\": {refs:#?}"
        );
        let mut bad = Vec::new();
        for (file, name, from) in &refs {
            let target = target_of(file);
            let Ok(text) = std::fs::read_to_string(&target) else {
                bad.push(format!(
                    "{}: {file} \"{name}\": no such file",
                    from.strip_prefix(&r).unwrap_or(from).display()
                ));
                continue;
            };
            let known: Vec<String> = headings(&text).iter().flat_map(|h| names_of(h)).collect();
            if !known.contains(name) {
                bad.push(format!(
                    "{}: {file} \"{name}\" is no heading of {}",
                    from.strip_prefix(&r).unwrap_or(from).display(),
                    target.strip_prefix(&r).unwrap_or(&target).display()
                ));
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }

    /// A Markdown file's own sections named `see "SECTION"` / `under "SECTION"`: each is a
    /// heading of the file (less its trailing parenthetical) or a bullet's bold lead-in
    /// (`- **Checkpoints of a fleet.**`), as the docs name their parts.
    #[test]
    fn every_section_a_doc_names_of_itself_is_there() {
        let r = root();
        let re =
            regex::Regex::new(r#"\b(?:see|under)\s+["“]([^"”\n]+(?:\n[^"”\n]+)?)["”]"#).unwrap();
        let bold = regex::Regex::new(r"(?m)^\s*- \*\*([^*]+)\*\*").unwrap();
        let mut bad = Vec::new();
        for f in markdown() {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let mut known: Vec<String> = headings(&text).iter().flat_map(|h| names_of(h)).collect();
            known.extend(
                bold.captures_iter(&text)
                    .map(|c| c[1].trim_end_matches('.').to_owned()),
            );
            for c in re.captures_iter(&text) {
                let name = c[1].split_whitespace().collect::<Vec<_>>().join(" ");
                if !known.contains(&name) {
                    bad.push(format!(
                        "{}: \"{name}\" is no section of it",
                        f.strip_prefix(&r).unwrap_or(&f).display()
                    ));
                }
            }
        }
        assert!(bad.is_empty(), "{bad:#?}");
    }

    #[test]
    fn every_anchor_is_a_heading() {
        let r = root();
        let re = regex::Regex::new(r"\]\(([^)\s#]*)#([^)\s]+)\)").unwrap();
        let mut bad = Vec::new();
        let mut seen = 0;
        for f in markdown() {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            for c in re.captures_iter(&text) {
                let (file, anchor) = (&c[1], &c[2]);
                if file.starts_with("http") {
                    continue;
                }
                let target = if file.is_empty() {
                    f.clone()
                } else {
                    f.parent().unwrap_or(r.as_path()).join(file)
                };
                let Ok(t) = std::fs::read_to_string(&target) else {
                    continue; // a missing file is `every_named_doc_exists`'s
                };
                seen += 1;
                if !anchors(&t).iter().any(|a| a == anchor) {
                    bad.push(format!(
                        "{}: ({file}#{anchor}) is no heading's anchor",
                        f.strip_prefix(&r).unwrap_or(&f).display()
                    ));
                }
            }
        }
        assert!(seen > 10, "the docs link sections by anchor");
        assert!(bad.is_empty(), "{bad:#?}");
    }

    #[test]
    fn sections_and_anchors_are_read_as_the_docs_write_them() {
        assert_eq!(
            names_of("The store (`$HCP_HOME`, §3)"),
            vec!["The store (`$HCP_HOME`, §3)", "The store"]
        );
        assert_eq!(names_of("Working directories"), vec!["Working directories"]);
        assert_eq!(
            anchors(
                "# Writing a pack\n```\n# not one\n```\n## `bad_json`\n## HARNESS.md\n## A b\n## A b\n"
            ),
            vec!["writing-a-pack", "bad_json", "harnessmd", "a-b", "a-b-1"]
        );
    }
}
