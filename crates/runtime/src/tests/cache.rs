//! The compiled policy cache (issue 14): keyed by the policy file's content digest, used
//! only when whole and this hcp's, rebuilt otherwise, skipped when it cannot be written,
//! never a source of another decision, never keeping a broken policy alive.

use super::{World, code};
use crate::policy::source::{self, CACHE_DIR, CACHE_FILE, CacheUse};
use hcp_model::Capability;
use pretty_assertions::assert_eq;

const ALLOW: &str = "schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args: {text: {type: string}}\nroles:\n  agent:\n    allow: [tp.say]\n";
/// The same size as [`ALLOW`], granting another role.
const OTHER: &str = "schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args: {text: {type: string}}\nroles:\n  other:\n    allow: [tp.say]\n";

fn world() -> (World, crate::Caller) {
    let w = World::new();
    w.policy(ALLOW);
    let c = w.session("agent", Some("agent"), &[]);
    w.grant("agent", "tp", &[Capability::VerbExecRead]);
    (w, c)
}

fn cache_use(w: &World) -> CacheUse {
    source::load(w.home()).unwrap().unwrap().cache
}

fn entry(w: &World) -> std::path::PathBuf {
    w.home().root().join(CACHE_DIR).join(CACHE_FILE)
}

#[test]
fn an_unchanged_policy_is_compiled_once() {
    let (w, c) = world();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    assert_eq!(cache_use(&w), CacheUse::Hit);
    let cached = source::load(w.home()).unwrap().unwrap();
    let fresh = source::load_uncached(w.home()).unwrap().unwrap();
    assert_eq!(cached.hash(), fresh.hash());
}

#[test]
fn an_edit_of_the_same_size_in_the_same_second_is_seen() {
    let (w, c) = world();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    let path = w.home().root().join("policy.yaml");
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    assert_eq!(ALLOW.len(), OTHER.len());
    std::fs::write(&path, OTHER).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(before)
        .unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(code(&w.say(&c, "x")), (Some("rbac"), 77));
}

#[test]
fn a_damaged_or_foreign_entry_is_refused_rebuilt_and_noted() {
    let (w, c) = world();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    let good = std::fs::read(entry(&w)).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    let header = 8 + 1 + version.len() + 1 + "policy.yaml".len();
    let mut flipped = good.clone();
    let n = flipped.len();
    flipped[n - 20] ^= 0x40;
    let mut other_hcp = b"HCPPOLC1".to_vec();
    other_hcp.push(5);
    other_hcp.extend_from_slice(b"0.0.0");
    other_hcp.extend_from_slice(&good[8 + 1 + version.len()..]);
    let mut other_file = good[..8 + 1 + version.len()].to_vec();
    other_file.push(11);
    other_file.extend_from_slice(b"policy.json");
    other_file.extend_from_slice(&good[header..]);
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (good[..good.len() / 2].to_vec(), "cache_truncated"),
        (good[..5].to_vec(), "cache_truncated"),
        (flipped, "cache_corrupted"),
        (b"garbage, not a cache".to_vec(), "cache_not_a_cache"),
        (other_hcp, "cache_other_hcp"),
        (other_file, "cache_other_file"),
    ];
    for (bytes, reason) in cases {
        std::fs::write(entry(&w), &bytes).unwrap();
        // the call decides as from source…
        assert_eq!(code(&w.say(&c, "x")), (None, 0), "{reason}");
        // …and rebuilt the entry, with a note for `hcp doctor`
        assert_eq!(std::fs::read(entry(&w)).unwrap(), good, "{reason}");
        assert_eq!(source::last_rebuild(w.home()).unwrap().1, reason);
        assert_eq!(cache_use(&w), CacheUse::Hit);
    }
    // an entry of another policy's source: refused (its digest is not this file's)
    w.policy(OTHER);
    let other_policy = source::load(w.home()).unwrap().unwrap();
    assert_eq!(
        other_policy.cache,
        CacheUse::Rebuilt {
            reason: "cache_other_source".into()
        }
    );
}

#[test]
fn a_cache_that_cannot_be_written_is_skipped_with_the_same_decision() {
    let (w, c) = world();
    // The cache directory's place is a file: no process, root included, writes in it.
    std::fs::write(w.home().root().join(CACHE_DIR), b"").unwrap();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    assert!(
        matches!(cache_use(&w), CacheUse::Skipped { .. }),
        "{:?}",
        cache_use(&w)
    );
    w.policy(OTHER);
    assert_eq!(code(&w.say(&c, "x")), (Some("rbac"), 77));
    let mut problems = Vec::new();
    let h = crate::policy::health::examine(w.home(), &mut problems);
    assert!(h.cache.unwrap().starts_with("cannot be written"));
    assert!(
        problems.is_empty(),
        "a skipped cache is a note, not a fault: {problems:?}"
    );
}

#[test]
fn a_broken_policy_is_refused_whatever_the_cache_holds() {
    let (w, c) = world();
    assert_eq!(code(&w.say(&c, "x")), (None, 0));
    assert!(entry(&w).is_file());
    w.policy("schema_version: histos.policy/0.1\ntools:\n  tp.say:\n    args: {text: {type: string, maxLength: 5}}\n");
    let a = w.say(&c, "x");
    assert_eq!(code(&a), (Some("unknown_key"), 77));
    assert!(
        a.result
            .hint
            .as_deref()
            .unwrap_or("")
            .starts_with("did you mean `max_length`?"),
        "{:?}",
        a.result.hint
    );
    // the owner's calls too (fail closed)
    assert_eq!(code(&w.say(&w.owner(), "x")), (Some("unknown_key"), 77));
}
