//! Install policy (RUNTIME §2, §3): what may enter the store. For now the store's own
//! install, which lints; the lint moves here in a later step.

pub use hcp_store::pack::{InstallOptions, InstallStep, Installed, Removed, install, uninstall};
