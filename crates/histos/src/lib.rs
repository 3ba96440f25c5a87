//! A Histos Policy Format 0.1 engine: strict loading, content_hash, the pre-gate and post-gate (HISTOS-ENGINE).
