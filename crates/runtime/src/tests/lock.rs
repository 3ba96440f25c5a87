//! Tool locks at step 7 (RUNTIME §7, issue 16): while `tools.lock.json` exists, a
//! session's call of a verb that no longer matches its entry, or has none, is refused
//! (`tool_drift`); a lock that does not read, or names a verb its pack no longer has, is
//! refused with its own code; the owner's calls are not checked.

use super::{TP, World, code};
use crate::policy::{contracts, lock};
use hcp_model::Capability;
use pretty_assertions::assert_eq;
use serde_json::json;

fn locked() -> (World, crate::Caller) {
    let w = World::new();
    let c = w.session("agent", None, &[]);
    w.grant(
        "agent",
        "*",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    write_lock(&w);
    (w, c)
}

fn write_lock(w: &World) {
    let packs = contracts::active_packs(w.home(), &[]).unwrap();
    let sources = lock::sources(&packs).unwrap();
    lock::write(w.home(), &lock::build(&sources, None)).unwrap();
}

fn lock_file(w: &World) -> std::path::PathBuf {
    lock::lock_path(w.home())
}

#[test]
fn a_verb_that_matches_its_lock_runs() {
    let (w, c) = locked();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
}

#[test]
fn a_changed_verb_is_tool_drift_until_the_owner_locks_again() {
    let (w, c) = locked();
    // the same verbs, `say` now a write: its declared schema moved
    let mut verbs = TP.to_vec();
    verbs[0] = ("say", "write", "personal", false, &["say", "{{text}}"]);
    w.install_pack("tp", "public", &verbs, true);
    w.grant(
        "agent",
        "*",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    let a = w.say(&c, "x");
    assert_eq!(code(&a), (Some("tool_drift"), 77));
    assert!(a.result.error.as_deref().unwrap().contains("schema_sha256"));
    assert_eq!(w.last_record()["rule"], json!("tool_drift"));
    // another verb of the pack is unchanged
    let j = w.exec(&c, "tp.json", &[("text", super::s("1"))]);
    assert_eq!(code(&j), (None, 0));
    // the owner is not checked; a new lock lifts it
    assert_eq!(code(&w.say(&w.owner(), "x")), (None, 0));
    write_lock(&w);
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
}

#[test]
fn a_verb_the_lock_does_not_cover_is_tool_drift() {
    let (w, c) = locked();
    w.install_pack("tq", "public", &TP[..1], false);
    let a = w.exec(&c, "tq.say", &[("text", super::s("x"))]);
    assert_eq!(code(&a), (Some("tool_drift"), 77));
    assert!(
        a.result
            .error
            .as_deref()
            .unwrap()
            .contains("not in the tool lock")
    );
}

#[test]
fn a_lock_naming_a_verb_its_pack_no_longer_has_is_lock_stale() {
    let (w, c) = locked();
    w.install_pack("tp", "public", &TP[..3], true);
    w.grant(
        "agent",
        "*",
        &[Capability::VerbExecRead, Capability::VerbExecWrite],
    );
    let a = w.say(&c, "x");
    assert_eq!(code(&a), (Some("lock_stale"), 77));
    assert!(a.result.error.as_deref().unwrap().contains("`tp.sleep`"));
    // the full check names every stale entry
    let packs = contracts::active_packs(w.home(), &[]).unwrap();
    let current = lock::sources(&packs).unwrap();
    let l = lock::read(w.home()).unwrap().unwrap();
    assert_eq!(
        lock::check_all(&l, &current).missing,
        vec!["tp.exit".to_owned(), "tp.json".into(), "tp.sleep".into()]
    );
}

#[test]
fn a_lock_that_does_not_read_refuses_every_session_call_with_its_code() {
    let (w, c) = locked();
    let good = std::fs::read_to_string(lock_file(&w)).unwrap();
    for (text, want) in [
        ("{not json".to_owned(), "lock_unparseable"),
        (String::new(), "lock_unparseable"),
        (
            good.replacen("\"lock_version\": 2", "\"lock_version\": 3", 1),
            "lock_unsupported_version",
        ),
        (
            good.replacen(
                "\"lock_version\": 2",
                "\"lock_version\": 2, \"lock_version\": 2",
                1,
            ),
            "lock_duplicate_key",
        ),
        ("{\"lock_version\": 2}".to_owned(), "lock_invalid"),
        (
            good.replacen(
                "\"contract_sha256\": \"sha256:",
                "\"contract_sha256\": \"md5:",
                1,
            ),
            "lock_invalid",
        ),
    ] {
        std::fs::write(lock_file(&w), &text).unwrap();
        let a = w.say(&c, "x");
        assert_eq!(code(&a), (Some(want), 77), "{text:.60}");
        assert!(
            a.result
                .hint
                .as_deref()
                .unwrap()
                .contains("hcp policy lock")
        );
        // the owner's own calls are not checked against the lock
        assert_eq!(code(&w.say(&w.owner(), "x")), (None, 0));
    }
    std::fs::write(lock_file(&w), good).unwrap();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
}

#[test]
fn the_lock_index_is_only_a_speed_up() {
    let (w, c) = locked();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    let index = w.home().root().join("cache/lock.index");
    let good = std::fs::read_to_string(&index).unwrap();
    assert!(good.starts_with("hcp-lock-index 1 "), "{good}");
    // an entry's hash edited in the index (its body digest no longer matches): ignored,
    // the lock is read again and the call decides as before
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    let last = lines[1].pop().unwrap();
    lines[1].push(if last == '0' { '1' } else { '0' });
    let tampered = format!("{}\n", lines.join("\n"));
    for bad in [
        tampered,
        good[..good.len() / 2].to_owned(),
        String::from("x"),
    ] {
        std::fs::write(&index, &bad).unwrap();
        assert_eq!(code(&w.say(&c, "x")), (None, 0));
        assert_eq!(std::fs::read_to_string(&index).unwrap(), good);
    }
    // the index of another lock is not used: a changed lock is read
    let l = lock_file(&w);
    let text = std::fs::read_to_string(&l).unwrap();
    std::fs::write(&l, text.replace("\"tp.say\"", "\"tp.sax\"")).unwrap();
    assert_eq!(code(&w.say(&c, "x")), (Some("lock_stale"), 77));
}
