//! Runs a wrapped CLI: argv rendering, clean environment, process group, time and output bounds (RUNTIME §5).
