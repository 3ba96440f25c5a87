//! `hcp pack promote DIR` (RUNTIME §1.3): a `pass_through` pack rewritten in place into
//! one named verb per allowed subcommand, each with a policy row, so that policy, grants,
//! audit and the skill can speak about each command.
//!
//! [`plan`] is pure: from the two JSON texts to the new texts and what the author must
//! still decide. [`promote`] reads the directory, keeps a backup of the three files in a
//! sibling directory (`DIR.bak`, else `DIR.bak.2` …), and replaces `surface.json` and
//! `policy.json` (each written to a temporary file, synced, renamed into place).
//!
//! Each subcommand `SUB` becomes verb `SUB` (lowercased, characters other than `a-z`,
//! `0-9`, `_`, `-` as `_`) with `cli: [BIN, SUB, "--", "{{args?}}"]` — `BIN` being
//! `cliBin`, else `wrap.bin`, else the one `cli[0]` every composite verb shares — and the
//! policy row `{"operation": "write", "privacy": {"land": L}}`, `L` being the land every
//! existing verb has, else `personal`. `write` is the safe default: the gate asks for
//! `verb.exec.write`, never less. A subcommand that starts with `-`, is empty, or whose
//! verb key already exists is left out and said so.

use hcp_model::{Kind, Land, Manifest, Operation, PolicyEntry, PolicyFile, Privacy, VerbSpec};
use std::path::{Path, PathBuf};

/// One verb written by a promotion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotedVerb {
    /// The new verb key.
    pub key: String,
    /// The subcommand it runs.
    pub subcommand: String,
    /// Its `cli`.
    pub cli: Vec<String>,
    /// Its policy row's land.
    pub land: Land,
}

/// What a promotion writes and says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Promotion {
    /// The new `surface.json` (pretty JSON, trailing newline).
    pub surface: String,
    /// The new `policy.json`.
    pub policy: String,
    /// The verbs added, in `allowedSubcommands` order.
    pub verbs: Vec<PromotedVerb>,
    /// Subcommands left out, with why.
    pub skipped: Vec<(String, String)>,
    /// What the author must still decide, one line each.
    pub decide: Vec<String>,
}

/// Why a pack cannot be promoted.
#[derive(Debug, thiserror::Error)]
pub enum PromoteError {
    /// `bad_pack_dir`: the directory cannot be read as a pack directory at all, as `hcp
    /// lint` says of it ([`crate::bad_pack_dir`]).
    #[error("{}", .0.message)]
    BadDir(crate::BadPackDir),
    /// `pack_unreadable`: one of the directory's files cannot be read or written.
    #[error("cannot {action} `{}`", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The code of the parse failure (`bad_json`, `unknown_field` …): a pack file does
    /// not parse; `hcp lint DIR` says where.
    #[error("`{file}` does not parse: {message} (line {line}, column {column})")]
    Parse {
        /// The file.
        file: &'static str,
        /// The parse code.
        code: hcp_model::Code,
        /// Why.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
    /// `nothing_to_promote`: the manifest has no `pass_through`.
    #[error("the manifest has no `pass_through`; there is nothing to promote")]
    NothingToPromote,
    /// `nothing_to_promote`: which program the new verbs would run cannot be told
    /// (`kind: openapi`, or composite verbs with different programs).
    #[error("cannot tell which program the promoted verbs would run: {0}")]
    NoProgram(String),
}

impl PromoteError {
    /// The stable code.
    pub fn code(&self) -> hcp_model::Code {
        match self {
            Self::BadDir(_) => hcp_model::Code::BadPackDir,
            Self::Io { .. } => hcp_model::Code::PackUnreadable,
            Self::Parse { code, .. } => *code,
            Self::NothingToPromote | Self::NoProgram(_) => hcp_model::Code::NothingToPromote,
        }
    }
}

fn verb_key(sub: &str) -> String {
    sub.chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn parse_err(file: &'static str, e: hcp_model::ParseError) -> PromoteError {
    PromoteError::Parse {
        file,
        code: e.code.code(),
        message: e.message,
        line: e.line,
        column: e.column,
    }
}

/// Plans the promotion of a pack whose files are `surface` and `policy`. Pure.
///
/// # Errors
/// [`PromoteError::Parse`], [`PromoteError::NothingToPromote`],
/// [`PromoteError::NoProgram`].
pub fn plan(surface: &str, policy: &str) -> Result<Promotion, PromoteError> {
    let mut m: Manifest =
        hcp_model::parse_manifest(surface).map_err(|e| parse_err(hcp_model::MANIFEST_FILE, e))?;
    let mut p: PolicyFile =
        hcp_model::parse_policy(policy).map_err(|e| parse_err(hcp_model::POLICY_FILE, e))?;
    let Some(pt) = m.pass_through.take() else {
        return Err(PromoteError::NothingToPromote);
    };
    let bin = match m.kind {
        Kind::Wrap => m
            .cli_bin
            .clone()
            .or_else(|| m.wrap.as_ref().map(|w| w.bin.clone()))
            .ok_or_else(|| PromoteError::NoProgram("a `wrap` pack without `wrap.bin`".into()))?,
        Kind::Composite => {
            let mut firsts = m
                .verbs
                .iter()
                .filter_map(|(_, v)| v.cli.as_ref().and_then(|c| c.first()).cloned());
            let first = firsts.next().ok_or_else(|| {
                PromoteError::NoProgram(
                    "a composite pack with no verb to take its program from".into(),
                )
            })?;
            if firsts.any(|o| o != first) {
                return Err(PromoteError::NoProgram(
                    "the composite verbs run different programs".into(),
                ));
            }
            first
        }
        Kind::Openapi => {
            return Err(PromoteError::NoProgram(
                "a `kind: openapi` pack runs no program".into(),
            ));
        }
    };
    let mut lands = p.verbs.iter().map(|(_, e)| e.privacy.land);
    let land = match lands.next() {
        Some(first) if lands.all(|l| l == first) => first,
        _ => Land::Personal,
    };
    let mut verbs = Vec::new();
    let mut skipped = Vec::new();
    for sub in &pt.allowed_subcommands {
        let key = verb_key(sub);
        let why = if sub.is_empty() {
            Some("it is empty".to_owned())
        } else if sub.starts_with('-') {
            Some("it looks like a flag".to_owned())
        } else if sub.chars().any(char::is_control) || sub.contains("{{") || sub.contains("}}") {
            Some("it holds a control character or a placeholder".to_owned())
        } else if m.verbs.contains_key(&key) || p.verbs.contains_key(&key) {
            Some(format!("verb `{key}` already exists"))
        } else {
            None
        };
        if let Some(why) = why {
            skipped.push((sub.clone(), why));
            continue;
        }
        let cli = vec![bin.clone(), sub.clone(), "--".into(), "{{args?}}".into()];
        m.verbs.0.insert(
            key.clone(),
            VerbSpec {
                description: format!("Run `{bin} {sub}` (promoted from `pass_through`)."),
                cli: Some(cli.clone()),
                operation: None,
            },
        );
        p.verbs.0.insert(
            key.clone(),
            PolicyEntry {
                operation: Operation::Write,
                privacy: Privacy { land },
                confirm: None,
            },
        );
        verbs.push(PromotedVerb {
            key,
            subcommand: sub.clone(),
            cli,
            land,
        });
    }
    let keys: Vec<String> = verbs.iter().map(|v| format!("`{}`", v.key)).collect();
    let mut decide = Vec::new();
    if !verbs.is_empty() {
        decide.push(format!(
            "each new verb ({}) is `write`: make those that change nothing `read` in `policy.json`",
            keys.join(", ")
        ));
        decide.push(
            "a write that is hard to undo wants `\"confirm\": true` and the CLI's own `--confirm` in its `cli`"
                .into(),
        );
        decide.push(format!(
            "the land of each is `{land}`: check it (`personal`, `brain` for shared project data, `local` for a workspace)"
        ));
        decide.push(
            "`{{args?}}` passes one argument after `--`; name the arguments each command takes as placeholders"
                .into(),
        );
        decide.push("say what each verb does in its `description` and in the hot-path table of `HARNESS.md`".into());
    }
    let n = m.verbs.len();
    if !(5..=12).contains(&n) {
        decide.push(format!(
            "the pack now has {n} verbs; a pack of 5 to 12 teaches best (`verb_count`)"
        ));
    }
    let pretty = |v: serde_json::Result<String>| {
        let mut s = v.unwrap_or_default();
        s.push('\n');
        s
    };
    Ok(Promotion {
        surface: pretty(serde_json::to_string_pretty(&m)),
        policy: pretty(serde_json::to_string_pretty(&p)),
        verbs,
        skipped,
        decide,
    })
}

/// What [`promote`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Promoted {
    /// The plan that was written.
    pub promotion: Promotion,
    /// Where the three files were backed up.
    pub backup: PathBuf,
}

/// Promotes the pack in `dir` in place (see the module documentation).
///
/// # Errors
/// [`PromoteError`] before anything is written (unreadable files, a parse failure,
/// nothing to promote), or [`PromoteError::Io`] when the backup or a write fails (the
/// backup is complete before either file is replaced).
pub fn promote(dir: &Path) -> Result<Promoted, PromoteError> {
    let src =
        crate::read_pack(dir).map_err(|e| PromoteError::BadDir(crate::bad_pack_dir(dir, &e)))?;
    let text = |name: &'static str| -> Result<String, PromoteError> {
        let bytes = src.file(name).ok_or_else(|| PromoteError::Io {
            action: "read",
            path: dir.join(name),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "missing, not a regular file, or larger than 1 MiB",
            ),
        })?;
        String::from_utf8(bytes.to_vec()).map_err(|e| {
            let valid = &bytes[..e.utf8_error().valid_up_to()];
            let at =
                hcp_model::span::Location::of_offset(&String::from_utf8_lossy(valid), valid.len());
            PromoteError::Parse {
                file: name,
                code: hcp_model::Code::BadJson,
                message: "the file is not UTF-8".into(),
                line: at.line,
                column: at.column,
            }
        })
    };
    let promotion = plan(
        &text(hcp_model::MANIFEST_FILE)?,
        &text(hcp_model::POLICY_FILE)?,
    )?;
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| PromoteError::Io {
            action,
            path,
            source,
        }
    };
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "pack".into());
    let parent = dir.parent().unwrap_or(Path::new("."));
    let mut backup = parent.join(format!("{name}.bak"));
    let mut n = 2;
    while std::fs::symlink_metadata(&backup).is_ok() {
        backup = parent.join(format!("{name}.bak.{n}"));
        n += 1;
    }
    std::fs::create_dir(&backup).map_err(io("create", &backup))?;
    for f in hcp_model::PACK_FILES {
        if let Some(bytes) = src.file(f) {
            write_synced(&backup.join(f), bytes).map_err(io("write", &backup.join(f)))?;
        }
    }
    for (f, body) in [
        (hcp_model::POLICY_FILE, &promotion.policy),
        (hcp_model::MANIFEST_FILE, &promotion.surface),
    ] {
        let tmp = dir.join(format!(".{f}.promote"));
        write_synced(&tmp, body.as_bytes()).map_err(io("write", &tmp))?;
        std::fs::rename(&tmp, dir.join(f)).map_err(io("replace", &dir.join(f)))?;
    }
    Ok(Promoted { promotion, backup })
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const SURFACE: &str = include_str!("../tests/fixtures/pass_through_present/surface.json");
    const POLICY: &str = include_str!("../tests/fixtures/pass_through_present/policy.json");

    #[test]
    fn each_allowed_subcommand_becomes_a_write_verb() {
        let p = plan(SURFACE, POLICY).unwrap();
        let keys: Vec<&str> = p.verbs.iter().map(|v| v.key.as_str()).collect();
        assert_eq!(keys, Vec::<&str>::new(), "list and show are already verbs");
        assert_eq!(p.skipped.len(), 2);
        let s = SURFACE.replace(
            "[\"list\", \"show\"]",
            "[\"log\", \"Diff\", \"--exec\", \"list\"]",
        );
        let p = plan(&s, POLICY).unwrap();
        let got: Vec<(&str, &[String])> = p
            .verbs
            .iter()
            .map(|v| (v.key.as_str(), v.cli.as_slice()))
            .collect();
        let cli = |sub: &str| {
            vec![
                "sample".to_owned(),
                sub.to_owned(),
                "--".into(),
                "{{args?}}".into(),
            ]
        };
        assert_eq!(
            got,
            vec![
                ("log", cli("log").as_slice()),
                ("diff", cli("Diff").as_slice())
            ]
        );
        assert_eq!(
            p.skipped,
            vec![
                ("--exec".to_owned(), "it looks like a flag".to_owned()),
                ("list".to_owned(), "verb `list` already exists".to_owned())
            ]
        );
        let m = hcp_model::parse_manifest(&p.surface).unwrap();
        assert!(m.pass_through.is_none());
        let pol = hcp_model::parse_policy(&p.policy).unwrap();
        assert_eq!(pol.verbs.get("log").unwrap().operation, Operation::Write);
        // The promoted pack lints without errors.
        let src = crate::testing::source(&p.surface, &p.policy, crate::testing::SKILL, &[]);
        let r = crate::check(&src);
        assert!(!r.has_errors(), "{}", crate::render::concise(&r));
        assert!(
            !r.diagnostics
                .iter()
                .any(|d| d.code == "pass_through_present")
        );
    }

    #[test]
    fn nothing_to_promote() {
        let s = SURFACE.replace(
            "\"pass_through\": { \"allowedSubcommands\": [\"list\", \"show\"] },",
            "",
        );
        assert_eq!(
            plan(&s, POLICY).unwrap_err().code(),
            hcp_model::Code::NothingToPromote
        );
    }
}
