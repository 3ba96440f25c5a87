//! `cargo xtask`: chores of the hcp workspace.
fn main() {}
