//! Pack checks of RUNTIME §2: one rule per module, diagnostics as data with concise and JSON renderers.
