//! `reserved_placeholder` (error): a placeholder name the runtime keeps, or one that
//! selects the tenant.
//!
//! ## What it does
//! Reports a placeholder named `confirm`, `apply`, `json` or `timeout` (the runtime's own
//! flags) or `project`, `project_id`, `tenant`, `tenant_id`, `principal`,
//! `principal_id`, `workdir`, `session` (names that would let an argument choose the
//! tenant) in any command template.
//!
//! ## Why is this bad?
//! `--confirm` answers the confirm gate: if it were also an argument the wrapped
//! CLI received, an agent could pass the gate and the CLI's own confirmation in one go.
//! Tenant comes from the session, never from arguments; use `{{@project_id}}`,
//! `{{@principal_id}}` or `{{@workdir}}`, which the runtime fills. An argument so named
//! is refused at exec too (`tenant_in_args`).
//!
//! ## Example
//! ```json
//! "cli": ["ledger", "post", "--project={{project_id}}", "{{confirm?}}"]
//! ```

use crate::context::{Ctx, in_manifest_at, written};
use crate::diagnostic::Diagnostic;
use hcp_model::template::{TemplateError, parse_element};

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::ReservedPlaceholder;

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let Some((m, text)) = cx.manifest() else {
        return;
    };
    for w in written(m) {
        for (i, el) in w.template() {
            if let Err(TemplateError::Reserved(why)) = parse_element(el) {
                out.push(
                    in_manifest_at(
                        Diagnostic::error(CODE, format!("{}: {why}", w.owner)),
                        text,
                        &w.element_path(i),
                    )
                    .hint("rename the placeholder; session values are `{{@principal_id}}`, `{{@project_id}}`, `{{@workdir}}`"),
                );
            }
        }
    }
}
