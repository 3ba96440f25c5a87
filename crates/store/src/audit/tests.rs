use super::*;
use hcp_model::{ArgValue, Land, Operation};
use pretty_assertions::assert_eq;
use std::collections::BTreeMap;

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn log() -> (tempfile::TempDir, AuditLog) {
    let d = tempfile::tempdir().unwrap();
    let h = Home::open(d.path().join("hcp")).unwrap();
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
        code: (!i.is_multiple_of(2)).then(|| "missing_grant".to_owned()),
        args_digest: args_digest([("to", &v)]),
        exit_code: i.is_multiple_of(2).then_some(0),
        duration_ms: i,
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
    std::fs::write(l.path(), lines.join("\n") + "\n").unwrap();
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

#[test]
fn an_absent_trail_is_clean_and_empty() {
    let (_d, l) = log();
    assert_eq!(
        l.verify().unwrap(),
        VerifyReport {
            records: 0,
            head: GENESIS.into(),
            repairs: vec![],
            broken: None
        }
    );
    assert_eq!(l.tail(10).unwrap(), (vec![], 0));
}

#[test]
fn records_hold_the_entry_and_chain_from_genesis() {
    let (_d, l) = log();
    let ts = t("2026-01-01T12:00:00.123456Z");
    let a = l.append_at(&entry(0), ts).unwrap();
    let b = l.append_at(&entry(1), ts).unwrap();
    let (tail, torn) = l.tail(10).unwrap();
    assert_eq!(torn, 0);
    let v = entry(1);
    let expected = Record {
        ts: "2026-01-01T12:00:00.123Z".into(),
        id: b.id.clone(),
        principal: v.principal,
        project: v.project,
        pack_id: v.pack_id,
        verb_key: v.verb_key,
        operation: v.operation,
        land: v.land,
        decision: Decision::Deny,
        code: Some("missing_grant".into()),
        args_digest: v.args_digest,
        exit_code: None,
        duration_ms: 1,
        extra: BTreeMap::new(),
        prev: a.hash.clone(),
        hash: b.hash.clone(),
    };
    assert_eq!(tail.len(), 2);
    assert_eq!(tail[1], TailLine::Record(Box::new(expected)));
    let TailLine::Record(first) = &tail[0] else {
        panic!("{tail:?}")
    };
    assert_eq!(first.prev, GENESIS);
    let id = uuid::Uuid::parse_str(&a.id).unwrap();
    assert_eq!(id.get_version_num(), 7);
    assert_eq!(
        l.verify().unwrap(),
        VerifyReport {
            records: 2,
            head: b.hash,
            repairs: vec![],
            broken: None
        }
    );
    // A line is the canonical encoding of its record, and holds no raw argument value.
    let text = lines(&l);
    let v: Value = serde_json::from_str(&text[0]).unwrap();
    assert_eq!(String::from_utf8(canonical_json(&v)).unwrap(), text[0]);
    assert!(!text[0].contains("value 0"));
}

#[test]
fn extra_fields_are_additive_and_covered_by_the_hash() {
    let (_d, l) = log();
    let mut e = entry(0);
    e.extra
        .insert("policy_hash".into(), Value::String("sha256:ab".into()));
    e.extra.insert("rule".into(), serde_json::json!({"n": 1}));
    l.append(&e).unwrap();
    assert!(l.verify().unwrap().is_clean());
    let (tail, _) = l.tail(1).unwrap();
    let TailLine::Record(r) = &tail[0] else {
        panic!()
    };
    assert_eq!(r.extra, e.extra);
    let edited = lines(&l)[0].replace("sha256:ab", "sha256:cd");
    write_lines(&l, &[edited]);
    assert_eq!(
        l.verify().unwrap().broken.map(|b| (b.line, b.kind)),
        Some((1, BreakKind::HashMismatch))
    );
}

#[test]
fn a_reserved_extra_field_is_refused() {
    let (_d, l) = log();
    let mut e = entry(0);
    e.extra.insert("prev".into(), Value::Null);
    assert_eq!(l.append(&e).unwrap_err().code(), "audit_bad_entry");
    assert!(!l.path().exists());
}

#[test]
fn an_edited_field_is_a_hash_mismatch_at_its_line() {
    let (_d, l) = log();
    filled(&l, 5);
    let mut text = lines(&l);
    let id = id_of(&text[2]);
    text[2] = text[2].replace("\"decision\":\"allow\"", "\"decision\":\"deny\"");
    write_lines(&l, &text);
    let r = l.verify().unwrap();
    assert_eq!(r.records, 2);
    let b = r.broken.unwrap();
    assert_eq!((b.line, b.id, b.kind), (3, id, BreakKind::HashMismatch));
}

#[test]
fn a_deleted_line_is_a_prev_mismatch_at_the_next_record() {
    let (_d, l) = log();
    filled(&l, 5);
    let mut text = lines(&l);
    let removed: Value = serde_json::from_str(&text.remove(2)).unwrap();
    let before: Value = serde_json::from_str(&text[1]).unwrap();
    let id = id_of(&text[2]);
    write_lines(&l, &text);
    let b = l.verify().unwrap().broken.unwrap();
    assert_eq!(
        b,
        Broken {
            line: 3,
            id,
            kind: BreakKind::PrevMismatch,
            expected: before["hash"].as_str().map(str::to_owned),
            found: removed["hash"].as_str().map(str::to_owned),
        }
    );
}

#[test]
fn swapped_lines_are_a_prev_mismatch_at_the_first_of_them() {
    let (_d, l) = log();
    filled(&l, 5);
    let mut text = lines(&l);
    text.swap(1, 2);
    let id = id_of(&text[1]);
    write_lines(&l, &text);
    let b = l.verify().unwrap().broken.unwrap();
    assert_eq!((b.line, b.id, b.kind), (2, id, BreakKind::PrevMismatch));
}

#[test]
fn a_torn_tail_is_reported_then_repaired_by_the_next_append() {
    let (_d, l) = log();
    filled(&l, 2);
    let good_len = std::fs::metadata(l.path()).unwrap().len();
    let head = l.verify().unwrap().head;
    let torn = b"{\"args_digest\":\"sha256:12";
    let mut f = OpenOptions::new().append(true).open(l.path()).unwrap();
    f.write_all(torn).unwrap();
    drop(f);

    let r = l.verify().unwrap();
    assert_eq!(r.records, 2);
    assert_eq!(
        r.broken,
        Some(Broken {
            line: 3,
            id: None,
            kind: BreakKind::TornTail,
            expected: None,
            found: Some(format!("{} bytes", torn.len())),
        })
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
    let saved = l.path().parent().unwrap().join(&repair.saved_as);
    assert_eq!(std::fs::read(saved).unwrap(), torn);
    assert_eq!(
        l.verify().unwrap(),
        VerifyReport {
            records: 3,
            head: a.hash.clone(),
            repairs: vec![RepairNote {
                line: 3,
                id: Some(a.id.clone()),
                repair
            }],
            broken: None,
        }
    );
    let (tail, _) = l.tail(1).unwrap();
    let TailLine::Record(r) = &tail[0] else {
        panic!()
    };
    assert_eq!(r.prev, head);
}

#[test]
fn a_torn_first_line_repairs_to_genesis() {
    let (_d, l) = log();
    std::fs::create_dir_all(l.path().parent().unwrap()).unwrap();
    std::fs::write(l.path(), b"{\"ts\"").unwrap();
    let a = l.append(&entry(0)).unwrap();
    assert_eq!(a.repair.map(|r| (r.offset, r.bytes)), Some((0, 5)));
    let r = l.verify().unwrap();
    assert!(r.is_clean());
    assert_eq!(r.repairs.len(), 1);
    let (tail, _) = l.tail(1).unwrap();
    let TailLine::Record(r) = &tail[0] else {
        panic!()
    };
    assert_eq!(r.prev, GENESIS);
}

#[test]
fn a_complete_line_that_is_not_a_record_stops_appends() {
    let (_d, l) = log();
    filled(&l, 2);
    let len = std::fs::metadata(l.path()).unwrap().len();
    let mut f = OpenOptions::new().append(true).open(l.path()).unwrap();
    f.write_all(b"not json\n").unwrap();
    drop(f);
    let e = l.append(&entry(3)).unwrap_err();
    assert_eq!(e.code(), "audit_damaged");
    assert!(matches!(e, AuditError::Damaged { offset, .. } if offset == len));
    let b = l.verify().unwrap().broken.unwrap();
    assert_eq!((b.line, b.kind), (3, BreakKind::Unparseable));
    assert_eq!(lines(&l).len(), 3, "nothing was appended");
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
    assert_eq!((r.records, r.broken), (400, None));
    let mut seen: Vec<u64> = l
        .tail(1000)
        .unwrap()
        .0
        .into_iter()
        .map(|x| match x {
            TailLine::Record(r) => r.duration_ms,
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

#[test]
fn tail_takes_the_last_n_oldest_first() {
    let (_d, l) = log();
    filled(&l, 5);
    let (tail, _) = l.tail(2).unwrap();
    let d: Vec<u64> = tail
        .iter()
        .map(|x| match x {
            TailLine::Record(r) => r.duration_ms,
            TailLine::Unparseable { .. } => u64::MAX,
        })
        .collect();
    assert_eq!(d, vec![3, 4]);
}
