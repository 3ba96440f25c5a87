//! Unit tests of the pipeline against a temporary home.
