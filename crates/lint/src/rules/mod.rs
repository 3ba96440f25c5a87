//! The pack checks (docs/rules.md is generated from them), one module each, run in the order of [`RULES`].
//!
//! Each module's `//!` documentation says what it checks, why it matters and gives an
//! example; [`Rule::doc`] returns that text, and `cargo xtask generate` renders every
//! rule's into `docs/rules.md`.

use crate::context::Ctx;
use crate::diagnostic::{Diagnostic, Level};

/// One lint rule: a stable code, its level and its check.
#[derive(Clone, Copy)]
pub struct Rule {
    /// The stable code every diagnostic of this rule carries: its module's
    /// `CODE`, spelled as the module is named.
    pub code: hcp_model::Code,
    /// The level of its diagnostics.
    pub level: Level,
    /// One lowercase line saying what it finds.
    pub summary: &'static str,
    /// One lowercase line saying how to fix what it finds (`docs/packs.md`).
    pub fix: &'static str,
    run: fn(&Ctx<'_>, &mut Vec<Diagnostic>),
    source: &'static str,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("code", &self.code)
            .field("level", &self.level)
            .finish_non_exhaustive()
    }
}

impl Rule {
    /// The rule's documentation (its module's `//!` text, Markdown).
    pub fn doc(&self) -> String {
        let mut out = String::new();
        for line in self.source.lines() {
            let Some(rest) = line.strip_prefix("//!") else {
                if line.trim().is_empty() {
                    continue;
                }
                break;
            };
            out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            out.push('\n');
        }
        out
    }

    pub(crate) fn run(&self, cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
        (self.run)(cx, out);
    }
}

macro_rules! rules {
    ($($module:ident: $level:ident, $summary:literal, $fix:literal;)*) => {
        $(pub mod $module;)*

        /// Every rule, in the order [`crate::check`] runs them.
        pub static RULES: &[Rule] = &[$(
            Rule {
                code: $module::CODE,
                level: Level::$level,
                summary: $summary,
                fix: $fix,
                run: $module::run,
                source: include_str!(concat!(stringify!($module), ".rs")),
            },
        )*];
    };
}

rules! {
    missing_file: Error, "one of `surface.json`, `policy.json`, `HARNESS.md` is missing or unreadable",
        "add the missing file beside the others (`surface.json`, `policy.json`, `HARNESS.md`, exact names)";
    bad_json: Error, "a pack file is not well-formed JSON, or a value has the wrong type",
        "correct the JSON at the line and column named; each field's type is in `docs/packs.md`";
    duplicate_key: Error, "the same key twice in one JSON object",
        "keep one of the two keys";
    unknown_field: Error, "a field the format does not define",
        "remove the field, or correct its spelling (the message names the nearest field)";
    bad_version: Error, "`version` (policy) or `hcp` (manifest) is not `1`",
        "set `\"version\": 1` in policy.json and `\"hcp\": 1` (or nothing) in surface.json";
    bad_land: Error, "a land token other than `personal`, `brain`, `local`",
        "write `personal`, `brain` or `local` in `privacy.land`";
    bad_operation: Error, "an operation other than `read`, `write`",
        "write `read` or `write` in `operation`";
    bad_pack_id: Error, "the manifest `id` is not a valid pack id",
        "use lowercase letters, digits and single `-`, at most 64 characters";
    surface_id_mismatch: Error, "the policy's `surface_id` differs from the manifest `id`",
        "set the policy's `surface_id` to the manifest's `id`";
    missing_verb: Error, "a manifest verb without a policy entry",
        "add a policy entry for the verb under `verbs`, with its `operation` and `privacy.land`";
    extra_verb: Error, "a policy verb entry the manifest does not declare",
        "remove the policy entry, or declare the verb in `surface.json`";
    missing_stimulus: Error, "a stimulus trigger without a policy entry",
        "add a `read` entry for the trigger's `ref` under the policy's `stimuli`";
    extra_stimulus: Error, "a policy stimulus entry no trigger declares",
        "remove the entry, or declare the trigger in `stimulusTriggers`";
    write_stimulus: Error, "a stimulus entry whose operation is not `read`",
        "make the stimulus entry's `operation` `read`: a stimulus never writes";
    confirm_on_read: Error, "`confirm` on an entry that is not a write",
        "remove `confirm`, or make the entry a `write` if it changes state";
    connect_not_write: Error, "the connect verb is not a write",
        "make the connect verb's policy entry a `write`";
    cli_bin_mismatch: Error, "a verb's program cannot be determined, or `cli[0]` differs from `cliBin`",
        "start every `cli` of a `wrap` pack with `cliBin` (and give `wrap.bin`); a composite verb's `cli[0]` is its program";
    bad_placeholder: Error, "a malformed `{{placeholder}}` in a command template",
        "write a whole element `{{name}}` or `{{name?}}`, or `--flag={{name}}`";
    reserved_placeholder: Error, "a placeholder name the runtime keeps, or one that selects the tenant",
        "rename the placeholder; the tenant comes from the session (`{{@principal_id}}`, `{{@project_id}}`, `{{@workdir}}`)";
    exec_wrapper_bin: Error, "the program is a shell or runs its arguments as a command",
        "name the CLI itself as the program; each argument reaches it as one argv element, no shell";
    hcp_bin_reserved: Error, "a pack other than the bootstrap pack `hcp-cli` whose bin is `hcp`",
        "wrap another program: only the bootstrap pack `hcp-cli` may run `hcp`";
    code_running_cli: Warning, "the program is a CLI known to run commands named in its arguments or input",
        "prefer a verb whose `cli` fixes the subcommand and passes no code; a warning, the confinement still holds";
    secret_file: Error, "a `.env`, a `secrets/` directory or a private key in the pack",
        "remove it: credentials come from the binding (`hcp connect`), never from the pack";
    symlink_in_pack: Error, "a symbolic link inside the pack",
        "replace the link with the file itself: install follows no symlink";
    unsafe_path: Error, "an entry whose name holds `..`, a control character or an absolute path",
        "rename the entry: no `..`, control character or absolute path";
    bad_binding: Error, "a binding that does not fit the plane or names no usable connect verb",
        "use `mothership` only with `\"plane\": \"control\"`; give a `user` binding a `connect` verb (or a `binding.family`)";
    bad_openapi: Error, "the OpenAPI document, or how the manifest uses it, is refused",
        "fix the document at the JSON pointer named, or name a usable `openapi.spec`";
    unknown_operation: Error, "a verb of a `kind: openapi` pack names no operation of its document",
        "set the verb's `operation` to an `operationId` of the document";
    confirm_not_mirrored: Warning, "a confirmed write whose command lacks the `--confirm` or `--apply` flag its program takes",
        "add the CLI's own `--confirm` (or `--apply`) flag to the verb's `cli`";
    verb_count: Warning, "fewer than 5 or more than 12 commands (verbs and trigger commands)",
        "split or merge verbs so the pack has 5 to 12";
    skill_too_long: Warning, "`HARNESS.md` is longer than one screen (60 lines)",
        "shorten `HARNESS.md` to one screen: the lead, the hot-path table, the anti-patterns";
    skill_missing_section: Warning, "`HARNESS.md` lacks a title, a hot-path table or an anti-patterns section",
        "add a `# Title`, a hot-path table and an anti-patterns section to `HARNESS.md`";
    absolute_path_in_skill: Warning, "a host-absolute path in `HARNESS.md`",
        "write paths relative to the working directory, or as the program's own names";
    extra_file: Warning, "an entry beside the three pack files",
        "move it out of the pack: install copies only the three files";
    pass_through_present: Warning, "the manifest keeps the bootstrap `pass_through`",
        "run `hcp pack promote DIR` to write one named verb per subcommand, then remove `pass_through`";
    unsupported_kind: Warning, "a `kind` this runtime parses but does not execute",
        "use `wrap`, `composite` or `openapi`";
}

/// The rule with `code`.
pub fn rule(code: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.code == code)
}

/// Reports the parse failure of either JSON file when its code is `code` (the rules
/// `bad_json`, `duplicate_key`, `unknown_field`, `bad_version`, `bad_land`,
/// `bad_operation` share this).
pub(crate) fn parse_failure(
    cx: &Ctx<'_>,
    code: hcp_model::ParseCode,
    hint: fn(&hcp_model::ParseError) -> Option<String>,
    out: &mut Vec<Diagnostic>,
) {
    let errors = [
        (hcp_model::MANIFEST_FILE, cx.manifest.error()),
        (hcp_model::POLICY_FILE, cx.policy.error()),
    ];
    for (file, e) in errors {
        let Some(e) = e.filter(|e| e.code == code) else {
            continue;
        };
        let mut d = Diagnostic::error(code.code(), e.message.clone())
            .in_file(file)
            .at(e.line, e.column);
        if let Some(h) = hint(e) {
            d = d.hint(h);
        }
        out.push(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_documented_with_the_three_parts() {
        for r in RULES {
            let doc = r.doc();
            for part in ["## What it does", "## Why is this bad?", "## Example"] {
                assert!(doc.contains(part), "rule `{}` lacks `{part}`", r.code);
            }
        }
    }

    #[test]
    fn each_rule_module_names_its_own_code() {
        for r in RULES {
            let doc = r.doc();
            assert!(
                doc.starts_with(&format!("`{}` (", r.code)),
                "rule `{}`: {doc}",
                r.code
            );
        }
    }

    #[test]
    fn codes_are_the_ones_of_runtime_section_2() {
        let codes: Vec<&str> = RULES.iter().map(|r| r.code.as_str()).collect();
        let errors = [
            "missing_file",
            "bad_json",
            "duplicate_key",
            "unknown_field",
            "bad_pack_id",
            "surface_id_mismatch",
            "bad_version",
            "bad_land",
            "bad_operation",
            "missing_verb",
            "extra_verb",
            "missing_stimulus",
            "extra_stimulus",
            "write_stimulus",
            "confirm_on_read",
            "connect_not_write",
            "cli_bin_mismatch",
            "bad_placeholder",
            "reserved_placeholder",
            "exec_wrapper_bin",
            "secret_file",
            "symlink_in_pack",
            "unsafe_path",
            "bad_binding",
            "bad_openapi",
            "unknown_operation",
            // Issue 23: only the bootstrap pack sees the store.
            "hcp_bin_reserved",
        ];
        let warnings = [
            "confirm_not_mirrored",
            "verb_count",
            "skill_too_long",
            "skill_missing_section",
            "absolute_path_in_skill",
            "extra_file",
            "pass_through_present",
            "unsupported_kind",
            // Issue 12 (RUNTIME §4's "the owner is never reachable"): defence in depth.
            "code_running_cli",
        ];
        assert_eq!(codes.len(), errors.len() + warnings.len());
        for c in errors {
            assert_eq!(rule(c).map(|r| r.level), Some(Level::Error), "{c}");
        }
        for c in warnings {
            assert_eq!(rule(c).map(|r| r.level), Some(Level::Warning), "{c}");
        }
    }
}
