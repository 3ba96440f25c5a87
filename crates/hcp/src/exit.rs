//! Exit statuses of `hcp`: the named constants of the code table (`hcp_model::exit`).

pub use hcp_model::exit::*;
