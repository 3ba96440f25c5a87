//! Refusal codes and the step that raises each: the code table of `hcp-model`
//! ([`hcp_model::code`]), re-exported for the gate's callers.

pub use hcp_model::code::{Code, Step};
