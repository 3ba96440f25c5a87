//! What the rules look at: the pack source with its files parsed once.

use crate::diagnostic::Diagnostic;
use crate::source::PackSource;
use hcp_model::{
    MANIFEST_FILE, Manifest, POLICY_FILE, ParseCode, ParseError, PolicyFile, SKILL_FILE,
};

/// One JSON file of the pack, as far as it got.
#[derive(Debug)]
pub(crate) enum Parsed<T> {
    /// Not read (absent, not a regular file, too large); `missing_file` reports it.
    Absent,
    /// Read but refused; the parse rules report it and the rules that need it skip.
    Failed(ParseError),
    /// Parsed strictly.
    Ok {
        /// The text, for locating values.
        text: String,
        /// The value.
        value: T,
    },
}

impl<T> Parsed<T> {
    fn read(bytes: Option<&[u8]>, parse: fn(&str) -> Result<T, ParseError>) -> Self {
        let Some(bytes) = bytes else {
            return Self::Absent;
        };
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let loc = hcp_model::span::Location::of_offset(
                    &String::from_utf8_lossy(&bytes[..e.valid_up_to()]),
                    e.valid_up_to(),
                );
                return Self::Failed(ParseError {
                    code: ParseCode::BadJson,
                    message: "the file is not valid UTF-8".into(),
                    line: loc.line,
                    column: loc.column,
                    path: String::new(),
                });
            }
        };
        match parse(text) {
            Ok(value) => Self::Ok {
                text: text.to_owned(),
                value,
            },
            Err(e) => Self::Failed(e),
        }
    }

    /// The parsed value with its text.
    pub(crate) fn ok(&self) -> Option<(&T, &str)> {
        match self {
            Self::Ok { text, value } => Some((value, text)),
            _ => None,
        }
    }

    /// The parse failure.
    pub(crate) fn error(&self) -> Option<&ParseError> {
        match self {
            Self::Failed(e) => Some(e),
            _ => None,
        }
    }
}

/// The pack as the rules see it.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    /// The walked directory.
    pub source: &'a PackSource,
    /// `surface.json`.
    pub manifest: Parsed<Manifest>,
    /// `policy.json`.
    pub policy: Parsed<PolicyFile>,
    /// `HARNESS.md`, lossily UTF-8, when read.
    pub skill: Option<String>,
    /// The OpenAPI document beside a `kind: openapi` pack, loaded (RUNTIME §1.3).
    pub document: Option<Loaded>,
}

/// The OpenAPI document beside the pack, as far as it got.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// Its path in the pack.
    pub rel: String,
    /// Its text when it is UTF-8 (for locating pointers).
    pub text: Option<String>,
    /// The document, or why it cannot be used.
    pub doc: Result<hcp_openapi::Document, DocFault>,
}

/// Why the document beside the pack cannot be used.
#[derive(Debug)]
pub(crate) enum DocFault {
    /// It could not be read.
    Unreadable(String),
    /// It was read and refused.
    Refused(hcp_openapi::BadOpenapi),
}

impl Loaded {
    fn new(d: &crate::source::SpecDocument) -> Self {
        let (text, doc) = match &d.bytes {
            Err(e) => (None, Err(DocFault::Unreadable(e.clone()))),
            Ok(b) => (
                std::str::from_utf8(b).ok().map(str::to_owned),
                hcp_openapi::Document::parse(b).map_err(DocFault::Refused),
            ),
        };
        Self {
            rel: d.rel.clone(),
            text,
            doc,
        }
    }

    /// Places `d` in the document at JSON `pointer` (line and column when the document
    /// is JSON and the pointer is found).
    pub(crate) fn at(&self, d: Diagnostic, pointer: &str) -> Diagnostic {
        let d = d.in_file(self.rel.clone());
        let tokens: Vec<String> = pointer
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let path: Vec<&str> = tokens.iter().map(String::as_str).collect();
        match self
            .text
            .as_deref()
            .filter(|t| t.trim_start().starts_with('{'))
            .and_then(|t| hcp_model::span::locate(t, &path))
        {
            Some(loc) if !path.is_empty() => d.at(loc.line, loc.column),
            _ => d,
        }
    }
}

impl<'a> Ctx<'a> {
    /// Reads and parses the pack files of `source`.
    pub(crate) fn new(source: &'a PackSource) -> Self {
        Self {
            source,
            manifest: Parsed::read(source.file(MANIFEST_FILE), hcp_model::parse_manifest),
            policy: Parsed::read(source.file(POLICY_FILE), hcp_model::parse_policy),
            skill: source
                .file(SKILL_FILE)
                .map(|b| String::from_utf8_lossy(b).into_owned()),
            document: source.document.as_ref().map(Loaded::new),
        }
    }

    /// The manifest and its text, when it parsed.
    pub(crate) fn manifest(&self) -> Option<(&Manifest, &str)> {
        self.manifest.ok()
    }

    /// The policy and its text, when it parsed.
    pub(crate) fn policy(&self) -> Option<(&PolicyFile, &str)> {
        self.policy.ok()
    }
}

/// Places `d` in `file` at the JSON `path` of `text` (the key of a member, the start of an
/// element); without a location when the path is not found.
pub(crate) fn at_path(d: Diagnostic, file: &str, text: &str, path: &[&str]) -> Diagnostic {
    let d = d.in_file(file);
    match hcp_model::span::locate(text, path) {
        Some(loc) => d.at(loc.line, loc.column),
        None => d,
    }
}

/// Places `d` in `surface.json` at `path`.
pub(crate) fn in_manifest(d: Diagnostic, text: &str, path: &[&str]) -> Diagnostic {
    at_path(d, MANIFEST_FILE, text, path)
}

/// Places `d` in `policy.json` at `path`.
pub(crate) fn in_policy(d: Diagnostic, text: &str, path: &[&str]) -> Diagnostic {
    at_path(d, POLICY_FILE, text, path)
}

/// A user value for a message: in backticks, control characters escaped so a value can
/// never forge a line of output.
pub(crate) fn tick(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('`');
    for c in value.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    out
}

/// One command array written in the manifest: a verb's or trigger's `cli`, or
/// `wrap.argv_template`.
#[derive(Debug)]
pub(crate) struct Written<'m> {
    /// Its JSON path in `surface.json`.
    pub path: Vec<String>,
    /// What it belongs to, for messages: ``verb `find` ``.
    pub owner: String,
    /// The elements as written.
    pub elements: &'m [String],
    /// Whether `elements[0]` is the program or CLI name (a `cli`) rather than a template
    /// element (`argv_template`).
    pub has_program: bool,
}

impl Written<'_> {
    /// The JSON path of element `index`.
    pub(crate) fn element_path(&self, index: usize) -> Vec<String> {
        let mut p = self.path.clone();
        p.push(index.to_string());
        p
    }

    /// The template elements with their indices in `elements`.
    pub(crate) fn template(&self) -> impl Iterator<Item = (usize, &String)> {
        let skip = usize::from(self.has_program);
        self.elements.iter().enumerate().skip(skip)
    }
}

/// Every command array of `m`, in document order: verbs' `cli`, triggers' `cli`, then
/// `wrap.argv_template`.
pub(crate) fn written(m: &Manifest) -> Vec<Written<'_>> {
    let mut out = Vec::new();
    for (key, v) in &m.verbs {
        if let Some(cli) = &v.cli {
            out.push(Written {
                path: vec!["verbs".into(), key.clone(), "cli".into()],
                owner: format!("verb {}", tick(key)),
                elements: cli,
                has_program: true,
            });
        }
    }
    for (i, t) in m.stimulus_triggers.iter().enumerate() {
        if let Some(cli) = &t.cli {
            out.push(Written {
                path: vec!["stimulusTriggers".into(), i.to_string(), "cli".into()],
                owner: format!("trigger {}", tick(&t.reference)),
                elements: cli,
                has_program: true,
            });
        }
    }
    if let Some(t) = m.wrap.as_ref().and_then(|w| w.argv_template.as_ref()) {
        out.push(Written {
            path: vec!["wrap".into(), "argv_template".into()],
            owner: "`wrap.argv_template`".into(),
            elements: t,
            has_program: false,
        });
    }
    out
}

/// [`in_manifest`] with an owned path.
pub(crate) fn in_manifest_at(d: Diagnostic, text: &str, path: &[String]) -> Diagnostic {
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    in_manifest(d, text, &path)
}

/// Reports each program the pack runs for which `reason` has something to say, as `make`
/// builds the diagnostic (an error or a warning of one rule), with `hint`: `wrap.bin`
/// with every template it runs (each command array, without `cli[0]` — the CLI name),
/// located at `wrap.bin`; or, in a `composite` pack, each verb's and trigger's `cli[0]`
/// with the rest of its array, located there. `kind: openapi` runs no program.
pub(crate) fn program_findings(
    cx: &Ctx<'_>,
    make: fn(hcp_model::Code, String) -> Diagnostic,
    code: hcp_model::Code,
    hint: &str,
    reason: impl Fn(&str, &[&[String]]) -> Option<String>,
    out: &mut Vec<Diagnostic>,
) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    let all = written(m);
    match m.kind {
        hcp_model::Kind::Wrap => {
            let Some(wrap) = &m.wrap else { return };
            let templates: Vec<&[String]> = all
                .iter()
                .map(|w| {
                    if w.has_program {
                        w.elements.get(1..).unwrap_or(&[])
                    } else {
                        w.elements
                    }
                })
                .collect();
            if let Some(why) = reason(&wrap.bin, &templates) {
                out.push(in_manifest(make(code, why), text, &["wrap", "bin"]).hint(hint));
            }
        }
        hcp_model::Kind::Composite => {
            for w in all.iter().filter(|w| w.has_program) {
                let Some(program) = w.elements.first() else {
                    continue;
                };
                let rest = w.elements.get(1..).unwrap_or(&[]);
                if let Some(why) = reason(program, &[rest]) {
                    out.push(
                        in_manifest_at(
                            make(code, format!("{}: {why}", w.owner)),
                            text,
                            &w.element_path(0),
                        )
                        .hint(hint),
                    );
                }
            }
        }
        hcp_model::Kind::Openapi => {}
    }
}
