//! What the crates this one wires must agree on. (Every library's error returns a
//! `hcp_model::Code`, and the Histos engine's codes come in through the exhaustive
//! conversions of `hcp_model::code::histos`: the compiler keeps the code table whole.)

#[test]
fn the_lint_and_store_read_the_same_largest_pack_file() {
    assert_eq!(
        hcp_lint::source::MAX_FILE_BYTES,
        hcp_model::MAX_PACK_FILE_BYTES
    );
}
