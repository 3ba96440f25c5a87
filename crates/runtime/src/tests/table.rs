//! The code table knows every code the crates that keep their own spellings can raise.

use hcp_model::{Code, Step};

#[test]
fn every_histos_refusal_and_policy_code_is_in_the_table() {
    // Rules that allow or describe output are not refusal codes.
    let not_codes = [
        "allow",
        "confirmed",
        "escalated",
        "post_redaction",
        "exception_redaction",
        "output_schema",
    ];
    for r in histos::Rule::ALL {
        let s = r.as_str();
        if not_codes.contains(&s) {
            continue;
        }
        let c = Code::parse(s).unwrap_or_else(|| panic!("histos rule `{s}`"));
        assert_eq!(c.step(), Step::RuntimePolicy, "{s}");
        assert_eq!(c.exit_status(), 77, "{s}");
    }
    use histos::PolicyCode::*;
    // An exhaustive match: a new POLICY code fails to compile here until it is listed.
    let listed = |p: histos::PolicyCode| match p {
        DuplicateKey | InvalidBinding | InvalidGrant | NotAnObject | NotFound
        | ToolsNotAMapping | UnknownKey | Unparseable | UnsafePattern | UnsupportedFeature
        | UnsupportedVersion | PolicyInvalid | InvalidField | InvalidContract | InvalidCanary
        | MissingKey | NotAList | NotAMapping | PolicyTooLarge | InvalidImport => p,
    };
    for p in [
        DuplicateKey,
        InvalidBinding,
        InvalidGrant,
        NotAnObject,
        NotFound,
        ToolsNotAMapping,
        UnknownKey,
        Unparseable,
        UnsafePattern,
        UnsupportedFeature,
        UnsupportedVersion,
        PolicyInvalid,
        InvalidField,
        InvalidContract,
        InvalidCanary,
        MissingKey,
        NotAList,
        NotAMapping,
        PolicyTooLarge,
        InvalidImport,
    ]
    .map(listed)
    {
        let c = Code::parse(p.as_str()).unwrap_or_else(|| panic!("POLICY `{}`", p.as_str()));
        // in a call: refused by the gate; in `hcp policy check`: refused (1)
        assert_eq!((c.exit_status(), c.command_exit_status()), (77, 1), "{c}");
    }
}

#[test]
fn every_adapter_and_audit_code_is_in_the_table() {
    for s in [
        "bin_missing",
        "bin_not_executable",
        "bin_changed",
        "arg_missing",
        "arg_invalid",
        "arg_looks_like_flag",
        "project_required",
        "env_refused",
        "spawn_failed",
        "supervise_failed",
        "sandbox_unavailable",
        "sandbox_failed",
        "audit_damaged",
        "audit_bad_entry",
    ] {
        assert!(Code::parse(s).is_some(), "{s}");
    }
    // the adapter's own statuses are the table's
    let e = hcp_adapter::AdapterError::BinMissing {
        path: "/x".into(),
        source: None,
    };
    assert_eq!(
        crate::refusal::code_of(e.code()).exit_status(),
        e.exit_status()
    );
}

#[test]
fn the_lint_and_store_read_the_same_largest_pack_file() {
    assert_eq!(
        hcp_lint::source::MAX_FILE_BYTES,
        hcp_model::MAX_PACK_FILE_BYTES
    );
}
