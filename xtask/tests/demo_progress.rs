//! `cargo xtask demo` shows the build's progress (README, quick start): the `xtask` alias
//! of `.cargo/config.toml` quiets no cargo output, so a cold build of xtask and of the bins
//! the demo builds prints cargo's progress instead of minutes of silence.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn the_xtask_alias_keeps_cargos_progress() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    let config = std::fs::read_to_string(root.join(".cargo/config.toml")).unwrap();
    let alias = config
        .lines()
        .find(|l| l.trim_start().starts_with("xtask ="))
        .expect("an `xtask` alias in .cargo/config.toml");
    let words: Vec<&str> = alias
        .split(['"', ' ', '[', ']', ','])
        .filter(|w| !w.is_empty())
        .collect();
    assert!(
        words.contains(&"run") && words.contains(&"xtask"),
        "not the alias that runs xtask: {alias}"
    );
    assert!(
        !words.iter().any(|w| *w == "--quiet" || *w == "-q"),
        "the alias quiets cargo: {alias}"
    );
}
