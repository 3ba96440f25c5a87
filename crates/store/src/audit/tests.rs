use super::anchor::{self, AnchorState};
use super::*;
use crate::counter::{Counters, Limits, Verdict};
use hcp_model::{ArgValue, Land, Operation};
use pretty_assertions::assert_eq;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// A new store's trail: its record 1 is the store's `init`.
fn log() -> (tempfile::TempDir, AuditLog) {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("hcp");
    crate::made::init(&root, Actor::owner(), None).unwrap();
    let h = Home::open(&root).unwrap();
    let l = AuditLog::new(&h);
    (d, l)
}

fn entry(i: u64) -> Entry {
    let v = ArgValue::String(format!("value {i}"));
    Entry {
        principal: "alice".into(),
        project: Some("p1".into()),
        pack_id: Some("mail".into()),
        verb_key: "mail.send".into(),
        operation: Some(Operation::Write),
        land: Some(Land::Personal),
        decision: if i.is_multiple_of(2) {
            Decision::Allow
        } else {
            Decision::Deny
        },
        code: (!i.is_multiple_of(2)).then_some(hcp_model::Code::MissingGrant),
        args_digest: args_digest([("to", &v)]),
        exit_code: i.is_multiple_of(2).then_some(0),
        duration_ms: i,
        extra: BTreeMap::new(),
    }
}

fn intent(principal: &str) -> Intent {
    Intent {
        principal: principal.into(),
        project: None,
        pack_id: "transit".into(),
        verb_key: "find".into(),
        operation: Operation::Read,
        land: Some(Land::Local),
        args_digest: DigestKey::from_bytes([7; 32]).args_digest([]),
        extra: BTreeMap::new(),
    }
}

fn admission(principal: &str, counters: Vec<CounterSpend>) -> Admission {
    Admission {
        intent: intent(principal),
        counters,
        approvals: vec![],
    }
}

fn outcome(of: &Admitted) -> Outcome {
    Outcome {
        intent: of.id.clone(),
        principal: "alice".into(),
        pack_id: "transit".into(),
        verb_key: "find".into(),
        code: None,
        exit_code: Some(0),
        duration_ms: 3,
        stdout_bytes: 12,
        stderr_bytes: 0,
        truncated: false,
        extra: BTreeMap::new(),
    }
}

fn lines(l: &AuditLog) -> Vec<String> {
    std::fs::read_to_string(l.path())
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn write_lines(l: &AuditLog, lines: &[String]) {
    let text = if lines.is_empty() {
        String::new()
    } else {
        lines.join("\n") + "\n"
    };
    std::fs::write(l.path(), text).unwrap();
}

fn id_of(line: &str) -> Option<String> {
    let v: Value = serde_json::from_str(line).unwrap();
    v["id"].as_str().map(str::to_owned)
}

fn filled(l: &AuditLog, n: u64) {
    for i in 0..n {
        l.append_at(&entry(i), t("2026-01-01T00:00:00Z")).unwrap();
    }
}

fn fault(l: &AuditLog) -> Option<(Fault, u64)> {
    l.verify().unwrap().broken.map(|b| (b.fault, b.line))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Rewrites the anchor with `f` applied (tests stand in for a crash or another boot).
fn edit_anchor(l: &AuditLog, f: impl FnOnce(&mut Anchor)) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(l.anchor_path())
        .unwrap();
    let key = l.chain_key().unwrap();
    let AnchorState::Valid(mut a) = anchor::read(&file, Some(&key)).unwrap() else {
        panic!("no anchor")
    };
    f(&mut a);
    std::os::unix::fs::FileExt::write_all_at(&file, &anchor::initial_bytes(&a, &key), 0).unwrap();
}

#[test]
fn a_new_store_holds_its_keyed_init_record() {
    let (_d, l) = log();
    let r = l.verify().unwrap();
    assert_eq!((r.records, r.broken, r.keyed_from), (1, None, Some(1)));
    assert_eq!(r.chain, ChainCheck::Checked);
    assert!(r.head.starts_with(key::KEYED_PREFIX), "{}", r.head);
    let (tail, torn) = l.tail(10).unwrap();
    let TailLine::Record(init) = &tail[0] else {
        panic!("{tail:?}")
    };
    assert_eq!(
        (init.kind(), init.prev.as_str(), torn),
        (Kind::Authority, GENESIS, 0)
    );
    assert_eq!(init.extra.get("act"), Some(&Value::from("init")));
    assert_eq!(init.extra.get("actor"), Some(&Value::from("owner")));
}

#[test]
fn records_hold_seq_kind_and_the_entry_and_chain_from_genesis() {
    let (_d, l) = log();
    let ts = t("2026-01-01T12:00:00.123456Z");
    let a = l.append_at(&entry(0), ts).unwrap();
    let b = l.append_at(&entry(1), ts).unwrap();
    assert_eq!((a.seq, b.seq), (2, 3));
    let (tail, torn) = l.tail(10).unwrap();
    assert_eq!(torn, 0);
    let TailLine::Record(r) = &tail[2] else {
        panic!("{tail:?}")
    };
    assert_eq!(r.ts, "2026-01-01T12:00:00.123Z");
    assert_eq!(
        (r.seq, r.kind, r.kind()),
        (Some(3), Some(Kind::Refusal), Kind::Refusal)
    );
    assert_eq!(r.code.as_deref(), Some("missing_grant"));
    assert_eq!(
        (r.prev.as_str(), r.hash.as_str()),
        (a.hash.as_str(), b.hash.as_str())
    );
    let TailLine::Record(first) = &tail[1] else {
        panic!()
    };
    assert_eq!(first.kind(), Kind::Event);
    assert_eq!(uuid::Uuid::parse_str(&a.id).unwrap().get_version_num(), 7);
    let r = l.verify().unwrap();
    assert_eq!((r.records, r.head, r.broken), (3, b.hash, None));
    assert_eq!(r.anchor.map(|a| (a.count, a.lag)), Some((3, 0)));
    // A line is the canonical encoding of its record, and holds no raw argument value.
    let text = lines(&l);
    let v: Value = serde_json::from_str(&text[1]).unwrap();
    assert_eq!(String::from_utf8(canonical_json(&v)).unwrap(), text[1]);
    assert!(!text[1].contains("value 0"));
}

#[test]
fn files_are_owner_only() {
    let (_d, l) = log();
    l.append(&entry(0)).unwrap();
    assert_eq!(mode(l.dir()), 0o700);
    assert_eq!(mode(l.path()), 0o600);
    assert_eq!(mode(&l.anchor_path()), 0o600);
    checkpoint::sign(&l, 1, GENESIS, Timestamp::now()).unwrap();
    assert_eq!(mode(&l.dir().join(checkpoint::KEY_FILE)), 0o600);
}

#[test]
fn extra_fields_are_additive_and_covered_by_the_hash() {
    let (_d, l) = log();
    let mut e = entry(0);
    e.extra
        .insert("policy_hash".into(), Value::String("sha256:ab".into()));
    l.append(&e).unwrap();
    assert!(l.verify().unwrap().is_clean());
    let mut text = lines(&l);
    text[1] = text[1].replace("sha256:ab", "sha256:cd");
    write_lines(&l, &text);
    assert_eq!(fault(&l), Some((Fault::HashMismatch, 2)));
}

#[test]
fn a_reserved_extra_field_is_refused() {
    let (_d, l) = log();
    for key in ["prev", "seq", "kind", "spends", "truncated"] {
        let mut e = entry(0);
        e.extra.insert(key.into(), Value::Null);
        assert_eq!(l.append(&e).unwrap_err().code(), "audit_bad_entry");
    }
    assert_eq!(lines(&l).len(), 1, "nothing but the init record");
}

#[test]
fn an_edited_record_is_a_hash_mismatch_at_its_line() {
    let (_d, l) = log();
    filled(&l, 5);
    let mut text = lines(&l);
    let id = id_of(&text[3]);
    text[3] = text[3].replace("\"decision\":\"allow\"", "\"decision\":\"deny\"");
    write_lines(&l, &text);
    let r = l.verify().unwrap();
    assert_eq!(r.records, 3);
    let b = r.broken.unwrap();
    assert_eq!((b.line, b.id, b.fault), (4, id, Fault::HashMismatch));
}

#[test]
fn a_deleted_record_is_a_prev_mismatch_and_two_swapped_too() {
    let (_d, l) = log();
    filled(&l, 5);
    let mut text = lines(&l);
    text.remove(2);
    write_lines(&l, &text);
    assert_eq!(fault(&l), Some((Fault::PrevMismatch, 3)));
    let (_d, l) = log();
    filled(&l, 5);
    let mut text = lines(&l);
    text.swap(1, 2);
    write_lines(&l, &text);
    assert_eq!(fault(&l), Some((Fault::PrevMismatch, 2)));
}

#[test]
fn a_cut_tail_is_truncated_and_stops_appends() {
    for cut in [1usize, 5] {
        let (_d, l) = log();
        filled(&l, 8);
        let text = lines(&l);
        write_lines(&l, &text[..9 - cut]);
        let b = l.verify().unwrap().broken.unwrap();
        assert_eq!(
            (b.fault, b.line),
            (Fault::Truncated, 10 - cut as u64),
            "cut {cut}"
        );
        assert_eq!(b.expected.as_deref(), Some("9 records"));
        let e = l.append(&entry(9)).unwrap_err();
        assert_eq!(
            (e.code().as_str(), e.cause_code().as_str()),
            ("audit_unavailable", "truncated")
        );
        assert_eq!(lines(&l).len(), 9 - cut, "the evidence is not written over");
    }
}

#[test]
fn a_deleted_or_emptied_trail_is_caught_by_its_anchor() {
    let (_d, l) = log();
    filled(&l, 3);
    std::fs::remove_file(l.path()).unwrap();
    assert_eq!(fault(&l), Some((Fault::MissingLog, 1)));
    assert_eq!(l.append(&entry(3)).unwrap_err().cause_code(), "missing_log");
    assert!(
        !l.path().exists(),
        "an append does not start a new trail over it"
    );
    let (_d, l) = log();
    filled(&l, 3);
    std::fs::write(l.path(), b"").unwrap();
    assert_eq!(fault(&l), Some((Fault::Truncated, 1)));
    assert_eq!(l.ensure_writable().unwrap_err().cause_code(), "truncated");
}

#[test]
fn a_deleted_or_damaged_anchor_is_a_fault_and_stops_appends() {
    let (_d, l) = log();
    filled(&l, 3);
    std::fs::remove_file(l.anchor_path()).unwrap();
    assert_eq!(fault(&l), Some((Fault::MissingAnchor, 5)));
    assert_eq!(
        l.append(&entry(3)).unwrap_err().cause_code(),
        "missing_anchor"
    );
    assert!(!l.anchor_path().exists());
    let (_d, l) = log();
    filled(&l, 3);
    std::fs::write(l.anchor_path(), b"{}").unwrap();
    assert_eq!(fault(&l).map(|f| f.0), Some(Fault::BadAnchor));
    assert_eq!(l.append(&entry(3)).unwrap_err().cause_code(), "bad_anchor");
}

#[test]
fn a_replaced_trail_is_an_anchor_mismatch() {
    let (_d, l) = log();
    filled(&l, 4);
    let (_d2, other) = log();
    filled(&other, 4);
    std::fs::copy(other.path(), l.path()).unwrap();
    // Another store's trail is chained under another key: its very first record fails.
    assert_eq!(fault(&l), Some((Fault::HashMismatch, 1)));
}

#[test]
fn an_older_copy_of_trail_and_anchor_passes_alone_and_fails_a_checkpoint() {
    let (d, l) = log();
    filled(&l, 3);
    let old = d.path().join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::copy(l.path(), old.join("log")).unwrap();
    std::fs::copy(l.anchor_path(), old.join("anchor")).unwrap();
    filled(&l, 2);
    let r = l.verify().unwrap();
    let cp = checkpoint::sign(&l, r.records, &r.head, Timestamp::now()).unwrap();
    let cp = checkpoint::Checkpoint::parse(&cp.to_line()).unwrap();
    assert_eq!(l.verify_against(&cp).unwrap().checkpoint, Some(6));
    std::fs::copy(old.join("log"), l.path()).unwrap();
    std::fs::copy(old.join("anchor"), l.anchor_path()).unwrap();
    assert!(
        l.verify().unwrap().is_clean(),
        "a consistent older pair looks sound alone"
    );
    let b = l.verify_against(&cp).unwrap().broken.unwrap();
    assert_eq!((b.fault, b.line), (Fault::Rollback, 5));
    // The trail then grows again past the checkpoint's count, with other records.
    filled(&l, 3);
    let b = l.verify_against(&cp).unwrap().broken.unwrap();
    assert_eq!((b.fault, b.line), (Fault::CheckpointMismatch, 6));
}

#[test]
fn checkpoints_are_signed_and_bound_to_the_store_key() {
    let (_d, l) = log();
    filled(&l, 2);
    let r = l.verify().unwrap();
    let cp = checkpoint::sign(&l, r.records, &r.head, t("2026-01-01T00:00:00Z")).unwrap();
    let line = cp.to_line();
    assert_eq!(checkpoint::Checkpoint::parse(&line).unwrap(), cp);
    let forged = line.replace("\"count\":3", "\"count\":1");
    assert_eq!(
        checkpoint::Checkpoint::parse(&forged)
            .unwrap_err()
            .to_string(),
        checkpoint::CheckpointError::BadSignature.to_string()
    );
    assert!(checkpoint::Checkpoint::parse("{}").is_err());
    // Another store's checkpoint, validly signed by its key.
    let (_d2, other) = log();
    filled(&other, 2);
    let theirs = checkpoint::sign(&other, 2, &r.head, Timestamp::now()).unwrap();
    let b = l.verify_against(&theirs).unwrap().broken.unwrap();
    assert_eq!((b.fault, b.line), (Fault::CheckpointMismatch, 0));
    // The same store's key signs every checkpoint.
    let again = checkpoint::sign(&l, 2, &r.head, Timestamp::now()).unwrap();
    assert_eq!(again.key, cp.key);
}

#[test]
fn a_torn_tail_is_a_crash_then_recovered_and_recorded() {
    let (_d, l) = log();
    filled(&l, 2);
    let good_len = std::fs::metadata(l.path()).unwrap().len();
    let head = l.verify().unwrap().head;
    let torn = b"{\"args_digest\":\"sha256:12";
    OpenOptions::new()
        .append(true)
        .open(l.path())
        .unwrap()
        .write_all(torn)
        .unwrap();
    let r = l.verify().unwrap();
    assert_eq!(
        (r.records, r.torn_tail, r.broken),
        (3, Some(torn.len() as u64), None)
    );
    assert_eq!(l.tail(5).unwrap().1, torn.len() as u64);

    let a = l.append(&entry(2)).unwrap();
    let repair = Repair {
        offset: good_len,
        bytes: torn.len() as u64,
        sha256: sha256_tagged(torn),
        saved_as: format!(
            "torn-{good_len}-{}.bin",
            &sha256_tagged(torn)["sha256:".len()..][..12]
        ),
    };
    assert_eq!(a.repair.as_ref(), Some(&repair));
    assert_eq!(a.seq, 5, "the recovery is record 4");
    assert_eq!(std::fs::read(l.dir().join(&repair.saved_as)).unwrap(), torn);
    let r = l.verify().unwrap();
    assert_eq!((r.records, r.broken, r.torn_tail), (5, None, None));
    assert_eq!(r.repairs.len(), 1);
    assert_eq!((r.repairs[0].line, &r.repairs[0].repair), (4, &repair));
    let (tail, _) = l.tail(2).unwrap();
    let TailLine::Record(rec) = &tail[0] else {
        panic!()
    };
    assert_eq!(
        (rec.kind(), rec.prev.as_str()),
        (Kind::Recovery, head.as_str())
    );
}

#[test]
fn a_torn_tail_longer_than_its_recovery_is_cut_after_it() {
    let (_d, l) = log();
    filled(&l, 1);
    let torn = vec![b'x'; 5000];
    OpenOptions::new()
        .append(true)
        .open(l.path())
        .unwrap()
        .write_all(&torn)
        .unwrap();
    l.ensure_writable().unwrap();
    let r = l.verify().unwrap();
    assert_eq!((r.records, r.torn_tail, r.repairs.len()), (3, None, 1));
}

#[test]
fn a_record_cut_in_half_under_its_anchor_is_truncated_not_a_crash() {
    let (_d, l) = log();
    filled(&l, 3);
    let text = std::fs::read(l.path()).unwrap();
    std::fs::write(l.path(), &text[..text.len() - 40]).unwrap();
    assert_eq!(fault(&l), Some((Fault::Truncated, 4)));
}

#[test]
fn a_trail_cut_to_a_torn_first_line_is_truncated() {
    // The init record is written whole with the keys: a trail holding only a torn line
    // was cut, not crashed.
    let (_d, l) = log();
    std::fs::write(l.path(), b"{\"ts\"").unwrap();
    assert_eq!(fault(&l), Some((Fault::Truncated, 1)));
    assert_eq!(l.append(&entry(0)).unwrap_err().cause_code(), "truncated");
}

#[test]
fn a_complete_line_that_is_not_a_record_stops_appends() {
    let (_d, l) = log();
    filled(&l, 2);
    OpenOptions::new()
        .append(true)
        .open(l.path())
        .unwrap()
        .write_all(b"not json\n")
        .unwrap();
    let e = l.append(&entry(3)).unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.cause_code().as_str()),
        ("audit_unavailable", "unparseable")
    );
    assert_eq!(fault(&l), Some((Fault::Unparseable, 4)));
    assert_eq!(lines(&l).len(), 4, "nothing was appended");
}

#[test]
fn calls_without_an_outcome_are_interrupted_not_damage() {
    let (_d, l) = log();
    let a = l.admit(&admission("alice", vec![])).unwrap();
    let b = l.admit(&admission("bob", vec![])).unwrap();
    l.outcome(&outcome(&a)).unwrap();
    l.append(&entry(1)).unwrap();
    let r = l.verify().unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.interrupted.len(), 1);
    assert_eq!(
        (
            r.interrupted[0].id.as_str(),
            r.interrupted[0].principal.as_deref()
        ),
        (b.id.as_str(), Some("bob"))
    );
    let (tail, _) = l.tail(10).unwrap();
    let kinds: Vec<Kind> = tail
        .iter()
        .map(|x| match x {
            TailLine::Record(r) => r.kind(),
            TailLine::Unparseable { .. } => panic!(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            Kind::Authority,
            Kind::Intent,
            Kind::Intent,
            Kind::Outcome,
            Kind::Refusal
        ]
    );
    let TailLine::Record(o) = &tail[3] else {
        panic!()
    };
    assert_eq!(o.intent.as_deref(), Some(a.id.as_str()));
    assert_eq!(o.extra.get("truncated"), Some(&Value::Bool(false)));
    assert_eq!(o.extra.get("stdout_bytes"), Some(&Value::from(12)));
    // An outcome of no intent (forged, chain recomputed) is a fault.
    let (_d, m) = log();
    let mut o = outcome(&a);
    o.intent = "nope".into();
    m.outcome(&o).unwrap();
    assert_eq!(fault(&m), Some((Fault::OrphanOutcome, 2)));
}

#[test]
fn an_anchor_that_lags_after_a_kill_is_not_damage() {
    let (_d, l) = log();
    filled(&l, 2);
    let before = std::fs::read(l.anchor_path()).unwrap();
    filled(&l, 1);
    // As if killed after the record and before the anchor moved.
    std::fs::write(l.anchor_path(), &before).unwrap();
    let r = l.verify().unwrap();
    assert_eq!((r.broken, r.anchor.map(|a| a.lag)), (None, Some(1)));
    l.append(&entry(3)).unwrap();
    let r = l.verify().unwrap();
    assert_eq!(
        (r.records, r.broken, r.anchor.map(|a| a.lag)),
        (5, None, Some(0))
    );
}

#[test]
fn after_a_reboot_only_synced_records_are_vouched_for() {
    let (_d, l) = log();
    let a = l.admit(&admission("alice", vec![])).unwrap();
    l.outcome(&outcome(&a)).unwrap();
    // A power cut lost the unsynced outcome; the anchor's page reached the disk.
    let text = lines(&l);
    write_lines(&l, &text[..2]);
    assert_eq!(
        fault(&l),
        Some((Fault::Truncated, 3)),
        "the same boot: a cut"
    );
    edit_anchor(&l, |a| a.boot = "another-boot".into());
    let r = l.verify().unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(r.interrupted.len(), 1);
    l.append(&entry(1)).unwrap();
    assert!(l.verify().unwrap().is_clean());
}

#[test]
fn a_trail_from_before_anchors_is_migrated_at_the_stores_first_use() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("hcp");
    let h = Home::open(&root).unwrap();
    let l = AuditLog::new(&h);
    std::fs::create_dir_all(l.dir()).unwrap();
    // Two records in the oldest format: no seq, no kind, no anchor, no keys.
    let mut prev = GENESIS.to_owned();
    let mut text = String::new();
    for i in 0..2 {
        let mut m = serde_json::Map::new();
        m.insert("ts".into(), "2026-01-01T00:00:00.000Z".into());
        m.insert("id".into(), format!("old-{i}").into());
        m.insert("principal".into(), "owner".into());
        m.insert("verb_key".into(), "x".into());
        m.insert("decision".into(), "allow".into());
        m.insert("args_digest".into(), "sha256:00".into());
        m.insert("duration_ms".into(), 1.into());
        m.insert("prev".into(), prev.clone().into());
        let h = record_hash(&m);
        m.insert("hash".into(), h.clone().into());
        text.push_str(&String::from_utf8(canonical_json(&Value::Object(m))).unwrap());
        text.push('\n');
        prev = h;
    }
    std::fs::write(l.path(), text).unwrap();
    std::fs::set_permissions(l.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = l.verify().unwrap();
    assert_eq!(
        (r.records, r.legacy, r.broken, r.chain),
        (2, 2, None, ChainCheck::Legacy)
    );
    crate::made::open(&root).unwrap();
    let r = l.verify().unwrap();
    assert_eq!(
        (r.records, r.legacy, r.keyed_from, r.broken, r.chain),
        (3, 2, Some(3), None, ChainCheck::Checked)
    );
    let last: Value = serde_json::from_str(&lines(&l)[2]).unwrap();
    assert_eq!(
        (last["act"].as_str(), last["prev"].as_str()),
        (Some("migrate"), Some(prev.as_str()))
    );
    assert_eq!(last["changed"]["records"], Value::from(2));
    let a = l.append(&entry(0)).unwrap();
    assert_eq!(a.seq, 4);
    assert!(l.verify().unwrap().is_clean());
    assert_eq!(mode(l.path()), 0o600);
    assert!(crate::made::Marker::read(&root).unwrap().is_some());
}

#[test]
fn concurrent_appenders_in_one_process_keep_one_chain() {
    let (_d, l) = log();
    let l = l.durable(false);
    std::thread::scope(|s| {
        for th in 0..8 {
            let l = l.clone();
            s.spawn(move || {
                for i in 0..50 {
                    l.append(&entry(th * 1000 + i)).unwrap();
                }
            });
        }
    });
    let r = l.verify().unwrap();
    assert_eq!((r.records, r.broken), (401, None));
    let mut seen: Vec<u64> = l
        .tail(400)
        .unwrap()
        .0
        .into_iter()
        .map(|x| match x {
            TailLine::Record(r) => r.duration_ms.unwrap(),
            TailLine::Unparseable { reason } => panic!("{reason}"),
        })
        .collect();
    seen.sort();
    let mut want: Vec<u64> = (0..8)
        .flat_map(|th| (0..50).map(move |i| th * 1000 + i))
        .collect();
    want.sort();
    assert_eq!(seen, want);
}

fn limited(rate: Option<u64>, budget: Option<u64>) -> CounterSpend {
    CounterSpend {
        identity: "agent".into(),
        tool: "transit.find".into(),
        limits: Limits {
            rate_limit: rate,
            budget,
            window_ms: 1_000,
        },
    }
}

#[test]
fn admit_takes_counter_slots_exactly_and_refusals_write_nothing() {
    let (_d, l) = log();
    let home = l.home().clone();
    let at = |ms: i64| Timestamp::from_millisecond(1_800_000_000_000 + ms).unwrap();
    let spend = || admission("agent", vec![limited(Some(2), Some(3))]);
    l.admit_at(&spend(), at(0)).unwrap();
    l.admit_at(&spend(), at(1)).unwrap();
    let e = l.admit_at(&spend(), at(2)).unwrap_err();
    assert_eq!(e.code(), "rate_limit");
    assert_eq!(lines(&l).len(), 3, "a refused admission writes no record");
    // The window rolls; then the budget of 3 is spent.
    l.admit_at(&spend(), at(1_500)).unwrap();
    let e = l.admit_at(&spend(), at(5_000)).unwrap_err();
    assert_eq!(e.code(), "budget");
    // The dry check reads the cache the admissions keep.
    let c = Counters::new(&home);
    let lim = limited(None, Some(3)).limits;
    assert_eq!(
        c.check("agent", "transit.find", lim, 1_800_000_010_000)
            .unwrap(),
        Verdict::Budget
    );
    assert!(l.verify().unwrap().is_clean());
}

#[test]
fn a_kill_between_the_intent_and_its_caches_still_counts_the_slot() {
    let (_d, l) = log();
    let spend = || admission("agent", vec![limited(None, Some(2))]);
    l.admit(&spend()).unwrap();
    let hook: StepHook = Arc::new(|s| {
        if s == AuditStep::Synced(Kind::Intent) {
            panic!("killed");
        }
    });
    let dying = l.clone().step_hook(hook);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dying.admit(&spend())));
    assert!(r.is_err());
    assert_eq!(lines(&l).len(), 3, "the intent is written");
    // The cache still says 1; the next admission counts the second intent first.
    let e = l.admit(&spend()).unwrap_err();
    assert_eq!(e.code(), "budget");
    assert_eq!(lines(&l).len(), 3);
}

#[test]
fn caches_are_rebuilt_from_the_trail_after_a_reboot_or_damage() {
    let (_d, l) = log();
    let home = l.home().clone();
    let spend = || admission("agent", vec![limited(None, Some(2))]);
    l.admit(&spend()).unwrap();
    l.admit(&spend()).unwrap();
    let (path, _) = Counters::new(&home).paths("agent", "transit.find");
    // A power cut lost the cache's last write; the machine rebooted.
    std::fs::remove_file(&path).unwrap();
    edit_anchor(&l, |a| a.boot = "another-boot".into());
    assert_eq!(l.admit(&spend()).unwrap_err().code(), "budget");
    // A cache that does not parse is rebuilt too.
    std::fs::write(&path, b"{garbage").unwrap();
    assert_eq!(l.admit(&spend()).unwrap_err().code(), "budget");
    let rec = Counters::read(&path).unwrap();
    assert_eq!(rec.total, 2);
}

fn approved(home: &Home, now: Timestamp) -> ApprovalSpend {
    let a = crate::approval::request(
        home,
        &crate::approval::Call {
            tool: "transit.find",
            principal: ("agent", "pd"),
            args_digest: "ad",
            policy_hash: "ph",
            escalation: false,
        },
        BTreeMap::new(),
        Some(60),
        now,
    )
    .unwrap();
    crate::approval::approve(home, &a.id, now).unwrap();
    ApprovalSpend {
        id: a.id,
        tool: "transit.find".into(),
        principal: "agent".into(),
        principal_digest: "pd".into(),
        args_digest: "ad".into(),
        policy_hash: "ph".into(),
    }
}

#[test]
fn an_approval_is_taken_once_by_the_intent_that_names_it() {
    let (_d, l) = log();
    let home = l.home().clone();
    let now = Timestamp::now();
    let s = approved(&home, now);
    let mut a = admission("agent", vec![]);
    a.approvals = vec![s.clone()];
    let first = l.admit(&a).unwrap();
    let e = l.admit(&a).unwrap_err();
    assert_eq!(e.code(), "approval_used");
    let listed = crate::approval::get(&home, &s.id).unwrap().unwrap();
    assert_eq!(listed.state(now), "used");
    assert_eq!(
        crate::approval::approve(&home, &s.id, now)
            .unwrap_err()
            .code(),
        "approval_used"
    );
    // The marker is a cache: lost, it comes back from the trail.
    std::fs::remove_file(crate::approval::used_marker(&home, &s.id)).unwrap();
    edit_anchor(&l, |a| a.applied = Some(0));
    assert_eq!(l.admit(&a).unwrap_err().code(), "approval_used");
    let tail = lines(&l);
    assert_eq!(tail.len(), 2);
    assert!(tail[1].contains(&s.id) && tail[1].contains(&first.id));
    // Another call's arguments do not match it.
    let s2 = approved(&home, now);
    let mut b = admission("agent", vec![]);
    b.approvals = vec![ApprovalSpend {
        args_digest: "other".into(),
        ..s2
    }];
    assert_eq!(l.admit(&b).unwrap_err().code(), "unknown_approval");
}

/// An approval spent a second time (its `.used` marker gone while the anchor says the
/// caches are current: the state put back from before the spend) is named by verify.
#[test]
fn verify_names_an_approval_two_intents_spend() {
    let (_d, l) = log();
    let home = l.home().clone();
    let now = Timestamp::now();
    let s = approved(&home, now);
    let mut a = admission("agent", vec![]);
    a.approvals = vec![s.clone()];
    l.admit(&a).unwrap();
    assert_eq!(l.verify().unwrap().broken, None);
    std::fs::remove_file(crate::approval::used_marker(&home, &s.id)).unwrap();
    l.admit(&a).unwrap();
    let b = l.verify().unwrap().broken.unwrap();
    assert_eq!((b.fault, b.line), (Fault::ApprovalSpentTwice, 3));
    assert_eq!(b.found.as_deref(), Some(s.id.as_str()));
    assert!(b.detail.contains("line 2"), "{}", b.detail);
}

#[test]
fn concurrent_admissions_never_take_more_than_the_budget() {
    let (_d, l) = log();
    let l = l.durable(false);
    let ok = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    if l.admit(&admission("agent", vec![limited(None, Some(7))]))
                        .is_ok()
                    {
                        ok.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert_eq!(ok.into_inner(), 7);
    assert_eq!(lines(&l).len(), 8);
}

#[test]
fn one_admission_may_take_several_approvals_but_not_one_twice() {
    let (_d, l) = log();
    let home = l.home().clone();
    let now = Timestamp::now();
    let (s1, s2) = (approved(&home, now), approved(&home, now));
    let mut twice = admission("agent", vec![]);
    twice.approvals = vec![s1.clone(), s1.clone()];
    assert_eq!(l.admit(&twice).unwrap_err().code(), "approval_used");
    assert_eq!(lines(&l).len(), 1, "nothing written");
    let mut both = admission("agent", vec![]);
    both.approvals = vec![s1.clone(), s2.clone()];
    let a = l.admit(&both).unwrap();
    for s in [&s1, &s2] {
        let ap = crate::approval::get(&home, &s.id).unwrap().unwrap();
        assert_eq!(ap.state(now), "used");
    }
    let rec: Value = serde_json::from_str(&lines(&l)[1]).unwrap();
    assert_eq!(rec["id"], Value::from(a.id));
    assert_eq!(
        rec["spends"]["approvals"],
        serde_json::json!([s1.id.clone(), s2.id.clone()])
    );
}

#[test]
fn the_probe_opens_files_only_and_ensure_writable_checks_everything() {
    let (_d, l) = log();
    l.probe_writable().unwrap();
    filled(&l, 2);
    let text = lines(&l);
    write_lines(&l, &text[..2]);
    l.probe_writable().unwrap();
    assert_eq!(l.ensure_writable().unwrap_err().cause_code(), "truncated");
    std::fs::remove_file(l.anchor_path()).unwrap();
    assert_eq!(
        l.probe_writable().unwrap_err().cause_code(),
        "missing_anchor"
    );
}

#[test]
fn abort_hooks_name_real_steps_only() {
    assert!(abort_hook("intent_synced").is_some());
    assert!(abort_hook("outcome_written:2").is_some());
    assert!(abort_hook("anchor_written").is_some());
    assert!(abort_hook("nope").is_none());
    assert!(abort_hook("intent_synced:0").is_none());
    assert!(abort_hook("intent_synced:x").is_none());
}

#[test]
fn an_intent_from_an_entry_keeps_what_an_intent_says() {
    let e = entry(0);
    let i = Intent::from_entry(&e).unwrap();
    assert_eq!(
        (i.pack_id.as_str(), i.operation, i.land),
        ("mail", Operation::Write, Some(Land::Personal))
    );
    let mut miss = entry(0);
    miss.pack_id = None;
    assert!(Intent::from_entry(&miss).is_none());
}
