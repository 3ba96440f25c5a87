//! Tests of sessions: ids, tokens, ttl, the files.

use super::*;
use crate::home::Home;
use pretty_assertions::assert_eq;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A store (its chain key keys the session files).
fn home() -> (tempfile::TempDir, Home) {
    let d = tempfile::tempdir().unwrap();
    crate::made::init(&d.path().join("hcp"), crate::audit::Actor::owner(), None).unwrap();
    let h = Home::open(d.path().join("hcp")).unwrap();
    (d, h)
}

fn alice() -> NewSession {
    NewSession {
        principal: "alice".into(),
        ..NewSession::default()
    }
}

#[test]
fn principal_ids_are_conservative_and_owner_is_reserved() {
    for ok in [
        "alice",
        "a",
        "bot-1",
        "x.y_z@example.com",
        "7",
        &"a".repeat(128),
    ] {
        assert!(PrincipalId::parse(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "-a",
        ".a",
        "a b",
        "a/b",
        "a:b",
        "ä",
        "a\n",
        &"a".repeat(129),
        "owner",
        "OWNER",
        "Owner",
    ] {
        let e = PrincipalId::parse(bad).unwrap_err();
        assert_eq!(e.code(), "bad_principal", "{bad}");
    }
}

#[test]
fn ttl_units_and_bounds() {
    assert_eq!(parse_ttl("30s").unwrap(), SignedDuration::from_secs(30));
    assert_eq!(parse_ttl("15m").unwrap(), SignedDuration::from_mins(15));
    assert_eq!(parse_ttl("8h").unwrap(), SignedDuration::from_hours(8));
    assert_eq!(parse_ttl("7d").unwrap(), SignedDuration::from_hours(7 * 24));
    assert_eq!(parse_ttl("1s").unwrap(), MIN_TTL);
    assert_eq!(parse_ttl("365d").unwrap(), MAX_TTL);
    for bad in [
        "",
        "8",
        "h",
        "0s",
        "-1s",
        "1.5h",
        "8H",
        "8 h",
        "366d",
        "1w",
        "99999999999999999999d",
    ] {
        assert_eq!(parse_ttl(bad).unwrap_err().code(), "bad_ttl", "{bad}");
    }
}

#[test]
fn tokens_have_their_shape_and_are_distinct() {
    let a = Token::generate().unwrap();
    let b = Token::generate().unwrap();
    assert!(is_token_shape(a.as_str()), "{}", a.as_str());
    assert_ne!(a, b);
    assert_eq!(format!("{a:?}"), "Token(hcps_…)");
    for bad in [
        "",
        "hcps_",
        &format!("hcps_{}", "A".repeat(64)),
        &format!("hcps_{}", "a".repeat(63)),
        &format!("hcps_{}", "a".repeat(65)),
        &format!("hcpx_{}", "a".repeat(64)),
        &format!(" hcps_{}", "a".repeat(64)),
    ] {
        assert!(!is_token_shape(bad), "{bad}");
    }
}

#[test]
fn start_stores_only_the_digest_and_resolve_finds_it() {
    let (_d, h) = home();
    let now = t("2026-01-01T00:00:00Z");
    let wd = tempfile::tempdir().unwrap();
    let new = NewSession {
        principal: "alice".into(),
        role: Some("analyst".into()),
        projects: vec!["p1".into(), "p2".into(), "p1".into()],
        attributes: vec!["team=blue".into(), "region=eu west".into()],
        can_view: vec!["pii".into()],
        workdir: Some(wd.path().to_path_buf()),
        ttl: Some(SignedDuration::from_mins(15)),
    };
    let (token, s) = start(&h, &new, now).unwrap();
    let digest = token_digest(token.as_str());
    let file = sessions_dir(&h).join(format!("{digest}.json"));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains(token.as_str()));
    assert_eq!(
        s,
        Session {
            token_sha256: format!("sha256:{digest}"),
            principal: PrincipalId::parse("alice").unwrap(),
            role: Some("analyst".into()),
            projects: vec!["p1".into(), "p2".into()],
            attributes: [
                ("region".to_owned(), "eu west".to_owned()),
                ("team".to_owned(), "blue".to_owned())
            ]
            .into(),
            can_view: vec!["pii".into()],
            workdir: Some(wd.path().canonicalize().unwrap()),
            created_at: now,
            expires_at: t("2026-01-01T00:15:00Z"),
            ended_at: None,
        }
    );
    assert_eq!(s.project(), Some("p1"));
    assert_eq!(resolve(&h, token.as_str(), now).unwrap(), s);
    assert_eq!(list(&h).unwrap(), vec![s]);
}

#[test]
fn bad_tokens_are_distinct_reasons_of_one_code() {
    let (_d, h) = home();
    let now = t("2026-01-01T00:00:00Z");
    let ttl = Some(SignedDuration::from_secs(1));
    let (live, _) = start(&h, &NewSession { ttl, ..alice() }, now).unwrap();
    let (ended, _) = start(&h, &alice(), now).unwrap();
    let end_time = t("2026-01-01T00:00:00.5Z");
    end(&h, ended.as_str(), end_time).unwrap();
    let unknown = format!("hcps_{}", "0".repeat(64));

    let reason = |tok: &str, at: &str| match resolve(&h, tok, t(at)) {
        Err(SessionError::Bad(b)) => {
            assert_eq!(SessionError::Bad(b.clone()).code(), BAD_SESSION);
            Ok(b)
        }
        Err(e) => panic!("{tok}: {e}"),
        Ok(s) => Err(s),
    };
    assert_eq!(
        reason("garbage", "2026-01-01T00:00:00Z"),
        Ok(BadSession::Malformed)
    );
    assert_eq!(
        reason("", "2026-01-01T00:00:00Z"),
        Ok(BadSession::Malformed)
    );
    assert_eq!(
        reason(&unknown, "2026-01-01T00:00:00Z"),
        Ok(BadSession::Unknown)
    );
    assert_eq!(
        reason(ended.as_str(), "2026-01-01T00:00:00.6Z"),
        Ok(BadSession::Ended { ended_at: end_time })
    );
    // Valid until the last instant before `expires_at`, refused from it on.
    assert!(reason(live.as_str(), "2026-01-01T00:00:00.999Z").is_err());
    assert_eq!(
        reason(live.as_str(), "2026-01-01T00:00:01Z"),
        Ok(BadSession::Expired {
            expires_at: t("2026-01-01T00:00:01Z")
        })
    );
    assert_eq!(
        BadSession::Expired {
            expires_at: t("2026-01-01T00:00:01Z")
        }
        .to_string(),
        "the session expired at `2026-01-01T00:00:01.000Z`"
    );
}

#[test]
fn a_session_file_under_another_name_is_damaged_not_valid() {
    let (_d, h) = home();
    let now = t("2026-01-01T00:00:00Z");
    let (token, _) = start(&h, &alice(), now).unwrap();
    let other = format!("hcps_{}", "1".repeat(64));
    let from = sessions_dir(&h).join(format!("{}.json", token_digest(token.as_str())));
    let to = sessions_dir(&h).join(format!("{}.json", token_digest(&other)));
    std::fs::copy(from, to).unwrap();
    assert_eq!(
        resolve(&h, &other, now).unwrap_err().code(),
        "store_damaged"
    );
}

#[test]
fn end_is_idempotent_and_end_principal_ends_only_theirs() {
    let (_d, h) = home();
    let now = t("2026-01-01T00:00:00Z");
    let (a1, _) = start(&h, &alice(), now).unwrap();
    let (a2, _) = start(&h, &alice(), t("2026-01-01T00:00:01Z")).unwrap();
    let bob = NewSession {
        principal: "bob".into(),
        ..NewSession::default()
    };
    let (b, _) = start(&h, &bob, now).unwrap();
    let later = t("2026-01-01T01:00:00Z");
    let (s, changed) = end(&h, a1.as_str(), later).unwrap();
    assert!(changed);
    assert_eq!(s.state(later), SessionState::Ended);
    assert!(!end(&h, a1.as_str(), t("2026-01-01T02:00:00Z")).unwrap().1);
    let alice_id = PrincipalId::parse("alice").unwrap();
    let ended = end_principal(&h, &alice_id, later).unwrap();
    assert_eq!(ended.len(), 1);
    assert!(resolve(&h, a2.as_str(), later).is_err());
    assert!(resolve(&h, b.as_str(), later).is_ok());
    assert_eq!(
        end(&h, "nope", later).unwrap_err().code(),
        BAD_SESSION,
        "a malformed token cannot be ended"
    );
}

#[test]
fn start_refuses_bad_input() {
    let (_d, h) = home();
    let now = t("2026-01-01T00:00:00Z");
    let file = tempfile::NamedTempFile::new().unwrap();
    let cases: Vec<(NewSession, &str)> = vec![
        (
            NewSession {
                principal: "owner".into(),
                ..alice()
            },
            "bad_principal",
        ),
        (
            NewSession {
                role: Some("a b".into()),
                ..alice()
            },
            "bad_value",
        ),
        (
            NewSession {
                projects: vec!["../x".into()],
                ..alice()
            },
            "bad_value",
        ),
        (
            NewSession {
                attributes: vec!["noequals".into()],
                ..alice()
            },
            "bad_value",
        ),
        (
            NewSession {
                attributes: vec!["k=1".into(), "k=2".into()],
                ..alice()
            },
            "bad_value",
        ),
        (
            NewSession {
                attributes: vec!["k=a\u{7}".into()],
                ..alice()
            },
            "bad_value",
        ),
        (
            NewSession {
                workdir: Some("/definitely/not/here".into()),
                ..alice()
            },
            "bad_workdir",
        ),
        (
            NewSession {
                workdir: Some(file.path().to_path_buf()),
                ..alice()
            },
            "bad_workdir",
        ),
    ];
    for (new, code) in cases {
        assert_eq!(start(&h, &new, now).unwrap_err().code(), code, "{new:?}");
    }
    assert_eq!(list(&h).unwrap(), vec![]);
}
