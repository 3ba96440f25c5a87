//! The `cargo xtask bench gate` measurement, runnable on its own:
//! `cargo bench -p histos --bench gate [-- --json]`.

// `to_argv` serves `cargo xtask` only.
#[allow(dead_code)]
#[path = "../../../xtask/src/bench_gate.rs"]
mod bench_gate;

fn main() -> anyhow::Result<()> {
    let json = std::env::args().any(|a| a == "--json");
    bench_gate::run(&bench_gate::Args {
        json,
        python: "python3".into(),
        ..Default::default()
    })
}
