//! The keyed chain, its anchor, stores made on purpose, migration and witnesses (RUNTIME
//! §4, §6), against the bad input of issue 26: each caught with its code, nothing lost.
//!
//! `verify_trail.py` beside this file is an outside verifier written from docs/DESIGN.md
//! ("The keyed chain") alone; the tests check that it agrees with the store, so that the
//! documentation is enough to write one. `rewrite_trail.py` is the rewrite of a trail by
//! someone without the chain key that passed before keyed chains.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use hcp_model::{ArgValue, Land, Operation};
use hcp_store::audit::witness::{DirWitness, MemoryWitness};
use hcp_store::audit::{
    Actor, Admission, Anchor, AuditLog, Authority, Boot, ChainCheck, CheckpointSource, Decision,
    DigestKey, Entry, Fault, Intent, Outcome, Point, args_digest, canonical_json, legacy_bytes,
    record_hash,
};
use hcp_store::state::{FileState, State};
use hcp_store::{Home, made};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn store(d: &Path) -> (PathBuf, AuditLog) {
    let root = d.join("hcp");
    made::init(&root, Actor::owner(), None).unwrap();
    let log = AuditLog::new(&Home::open(&root).unwrap());
    (root, log)
}

fn entry(i: u64, principal: &str) -> Entry {
    let v = ArgValue::String(format!("value {i} \"quoted\" é \u{1}"));
    Entry {
        principal: principal.into(),
        project: Some("p1".into()),
        pack_id: Some("mail".into()),
        verb_key: "mail.send".into(),
        operation: Some(Operation::Write),
        land: Some(Land::Personal),
        decision: Decision::Deny,
        code: Some(hcp_model::Code::MissingGrant),
        args_digest: args_digest([("to", &v)]),
        exit_code: None,
        duration_ms: i,
        extra: BTreeMap::from([("note".to_owned(), json!(format!("line\nbreak\t{i} ✓")))]),
    }
}

/// An admitted call (its intent written).
fn admit(log: &AuditLog, principal: &str) -> hcp_store::audit::Admitted {
    log.admit(&Admission {
        intent: Intent {
            principal: principal.into(),
            project: None,
            pack_id: "transit".into(),
            verb_key: "find".into(),
            operation: Operation::Read,
            land: Some(Land::Local),
            args_digest: DigestKey::from_bytes([7; 32]).args_digest([]),
            extra: BTreeMap::new(),
        },
        counters: vec![],
        approvals: vec![],
    })
    .unwrap()
}

/// An admitted call and its outcome.
fn call(log: &AuditLog, principal: &str) {
    let a = admit(log, principal);
    log.outcome(&Outcome {
        intent: a.id,
        principal: principal.into(),
        pack_id: "transit".into(),
        verb_key: "find".into(),
        code: None,
        exit_code: Some(0),
        duration_ms: 2,
        stdout_bytes: 3,
        stderr_bytes: 0,
        truncated: false,
        extra: BTreeMap::new(),
    })
    .unwrap();
}

fn filled(log: &AuditLog) {
    for i in 0..3 {
        log.append(&entry(i, "alice")).unwrap();
        call(log, "bob");
    }
}

fn fault(log: &AuditLog) -> Option<(Fault, u64)> {
    log.verify().unwrap().broken.map(|b| (b.fault, b.line))
}

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some("python3");
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and python3 is missing"
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "skipped: the outside verifier needs python3"
    );
    let thread = std::thread::current();
    hcp_examples::skipped::record(
        thread.name().unwrap_or("a test"),
        "the outside verifier needs python3",
    );
    None
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(name)
}

/// The outside verifier's report of `log`'s trail (with `checkpoint` when given).
fn outside(py: &str, log: &AuditLog, checkpoint: Option<&Path>) -> Value {
    let mut c = Command::new(py);
    c.arg(script("verify_trail.py")).arg(log.dir());
    if let Some(cp) = checkpoint {
        c.arg("--checkpoint").arg(cp);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_outside_verifier_written_from_the_docs_agrees_with_the_store() {
    let Some(py) = python() else { return };
    let d = tempfile::tempdir().unwrap();
    let (_root, log) = store(d.path());
    filled(&log);
    let r = log.verify().unwrap();
    assert!(r.is_clean(), "{r:?}");
    let cp = hcp_store::audit::checkpoint::sign(&log, r.records, &r.head, jiff::Timestamp::now())
        .unwrap();
    let cp_file = d.path().join("cp.json");
    std::fs::write(&cp_file, cp.to_line()).unwrap();
    let v = outside(py, &log, Some(&cp_file));
    assert_eq!(v["ok"], json!(true), "{v}");
    assert_eq!(v["records"], json!(r.records));
    assert_eq!(v["keyed_from"], json!(1));
    assert_ne!(v["signature"], json!("forged"), "{v}");
    // An edited record: both name the same fault at the same line.
    let text = std::fs::read_to_string(log.path()).unwrap();
    let edited = text.replacen("\"principal\":\"alice\"", "\"principal\":\"mallory\"", 1);
    std::fs::write(log.path(), edited).unwrap();
    let b = log.verify().unwrap().broken.unwrap();
    let v = outside(py, &log, None);
    assert_eq!(
        (v["fault"].as_str(), v["line"].as_u64()),
        (Some(b.fault.as_str()), Some(b.line)),
        "{v}"
    );
}

#[test]
fn a_chain_recomputed_without_the_key_never_verifies() {
    let Some(py) = python() else { return };
    for mode in ["sha256", "guessed-key"] {
        let d = tempfile::tempdir().unwrap();
        let (_root, log) = store(d.path());
        filled(&log);
        let out = Command::new(py)
            .arg(script("rewrite_trail.py"))
            .arg(log.dir())
            .arg(mode)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = log.verify().unwrap();
        let b = r.broken.expect(mode);
        // Plain records beside the chain key: the first, the store's `init`, is an act only
        // a keyed store writes, and it is plain (`sha256`); or its keyed hash does not hold.
        assert_eq!((b.fault, b.line), (Fault::HashMismatch, 1), "{mode}: {b:?}");
        let e = log.append(&entry(9, "alice")).unwrap_err();
        assert_eq!(e.code(), "audit_unavailable", "{mode}: appends stop");
        let v = outside(py, &log, None);
        assert_eq!(v["ok"], json!(false), "{mode}: {v}");
    }
}

#[test]
fn log_and_anchor_deleted_together_are_missing_log_never_a_fresh_trail() {
    let d = tempfile::tempdir().unwrap();
    let (_root, log) = store(d.path());
    filled(&log);
    std::fs::remove_file(log.path()).unwrap();
    std::fs::remove_file(log.anchor_path()).unwrap();
    assert_eq!(fault(&log), Some((Fault::MissingLog, 1)));
    let e = log.append(&entry(1, "alice")).unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.cause_code().as_str()),
        ("audit_unavailable", "missing_log")
    );
    assert!(!log.path().exists(), "no new trail was started");
    // The whole audit directory gone beside the marker: the key is missing.
    std::fs::remove_dir_all(log.dir()).unwrap();
    std::fs::create_dir(log.dir()).unwrap();
    assert_eq!(
        log.verify().unwrap().broken.map(|b| b.fault),
        Some(Fault::MissingChainKey)
    );
    let fresh = AuditLog::new(&Home::open(log.dir().parent().unwrap()).unwrap());
    assert_eq!(
        fresh.append(&entry(1, "alice")).unwrap_err().cause_code(),
        "missing_chain_key"
    );
}

fn flip_slot_byte(log: &AuditLog, slot: usize) {
    let mut bytes = std::fs::read(log.anchor_path()).unwrap();
    let at = slot * 512 + 30;
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(log.anchor_path(), bytes).unwrap();
}

#[test]
fn a_corrupted_anchor_slot_is_anchor_mismatch_unless_a_power_cut_explains_it() {
    let d = tempfile::tempdir().unwrap();
    let (_root, log) = store(d.path());
    filled(&log);
    // The newest record dropped and the newer slot's byte flipped (issue 26): the older
    // slot is not taken silently.
    let text = std::fs::read_to_string(log.path()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    std::fs::write(log.path(), lines[..lines.len() - 1].join("\n") + "\n").unwrap();
    let anchor = std::fs::read(log.anchor_path()).unwrap();
    for slot in [0, 1] {
        std::fs::write(log.anchor_path(), &anchor).unwrap();
        flip_slot_byte(&log, slot);
        assert_eq!(
            fault(&log).map(|f| f.0),
            Some(Fault::AnchorMismatch),
            "slot {slot}"
        );
        assert_eq!(
            log.append(&entry(1, "alice")).unwrap_err().cause_code(),
            "anchor_mismatch"
        );
    }
    // A torn slot after a power cut: the file unchanged since the boot began (here the
    // boot is said to begin later) and the intact slot of an earlier boot. Recovered,
    // and recorded by the next append.
    std::fs::write(log.path(), &text).unwrap();
    std::fs::write(log.anchor_path(), &anchor).unwrap();
    flip_slot_byte(&log, 0);
    let after_reboot = Boot {
        id: "a-later-boot".into(),
        began_s: Some(jiff::Timestamp::now().as_second() + 60),
    };
    let rebooted = log.clone().with_boot(after_reboot);
    let r = rebooted.verify().unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert!(r.slot_recovered.is_some());
    let a = rebooted.append(&entry(5, "alice")).unwrap();
    let tail = std::fs::read_to_string(log.path()).unwrap();
    let recovery: Value = serde_json::from_str(tail.lines().nth_back(1).unwrap()).unwrap();
    assert_eq!(recovery["kind"], json!("recovery"));
    assert!(recovery["anchor_slot"]["slot"].is_u64(), "{recovery}");
    let r = log.verify().unwrap();
    assert!(r.is_clean() && r.slot_recovered.is_none(), "{r:?}");
    assert_eq!(r.records, a.seq);
}

fn with_dir_witness(root: &Path, dir: &Path) -> FileState {
    FileState::new(&Home::open(root).unwrap()).with_witness(Arc::new(DirWitness::new(dir)))
}

fn act(n: u64) -> Authority {
    Authority {
        act: "grant".into(),
        actor: Actor::owner(),
        changed: json!({"principal": "agent", "pack": "mail", "n": n}),
        intent: false,
    }
}

#[test]
fn an_older_anchor_with_the_trail_cut_to_match_is_a_rollback_past_the_witness() {
    let d = tempfile::tempdir().unwrap();
    let (root, log) = store(d.path());
    let wdir = d.path().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    let state = with_dir_witness(&root, &wdir);
    filled(&log);
    let old_anchor = std::fs::read(log.anchor_path()).unwrap();
    let old_trail = std::fs::read(log.path()).unwrap();
    filled(&log);
    state.record_authority(&act(1)).unwrap();
    let r = state.audit_verify(None).unwrap();
    assert!(r.is_clean(), "{r:?}");
    let against = r.chains[0].report.against.clone().unwrap();
    assert_eq!(
        (against.source, against.past),
        (
            CheckpointSource::Witness(format!("directory {}", wdir.display())),
            0
        )
    );
    // Restored: an older anchor and the trail cut to match. Consistent alone.
    std::fs::write(log.anchor_path(), &old_anchor).unwrap();
    std::fs::write(log.path(), &old_trail).unwrap();
    assert!(log.verify().unwrap().is_clean(), "alone it looks sound");
    let r = state.audit_verify(None).unwrap();
    let b = r.first_broken().unwrap().report.broken.clone().unwrap();
    assert_eq!(b.fault, Fault::Rollback, "{b:?}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

#[test]
fn a_store_copied_back_from_a_backup_older_than_its_witness_is_a_rollback() {
    let d = tempfile::tempdir().unwrap();
    let (root, log) = store(d.path());
    let wdir = d.path().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    let state = with_dir_witness(&root, &wdir);
    filled(&log);
    state.record_authority(&act(1)).unwrap();
    let backup = d.path().join("backup");
    copy_dir(&root, &backup);
    filled(&log);
    state.record_authority(&act(2)).unwrap();
    // The whole store restored from the backup, its keys and `checkpoint.last` with it.
    std::fs::remove_dir_all(&root).unwrap();
    copy_dir(&backup, &root);
    assert!(
        log.verify().unwrap().is_clean(),
        "the backup is sound alone"
    );
    let r = state.audit_verify(None).unwrap();
    let b = r.first_broken().unwrap().report.broken.clone().unwrap();
    assert_eq!(b.fault, Fault::Rollback, "{b:?}");
    // It grows again past the witnessed count: another record where the checkpoint's was.
    filled(&log);
    filled(&log);
    let r = state.audit_verify(None).unwrap();
    let b = r.first_broken().unwrap().report.broken.clone().unwrap();
    assert_eq!(b.fault, Fault::CheckpointMismatch, "{b:?}");
}

#[test]
fn a_missing_or_unusable_witness_refuses_acts_of_authority_never_calls() {
    let d = tempfile::tempdir().unwrap();
    let (root, log) = store(d.path());
    let wdir = d.path().join("witness");
    let state = with_dir_witness(&root, &wdir);
    let before = std::fs::read(log.path()).unwrap();
    let e = state.record_authority(&act(1)).unwrap_err();
    assert_eq!(e.code(), "witness_unavailable", "{e}");
    assert_eq!(
        std::fs::read(log.path()).unwrap(),
        before,
        "the act is not recorded: it did not happen"
    );
    // Calls go on.
    call(&log, "bob");
    state.record(&entry(1, "alice")).unwrap();
    // A witness that is a file, not a directory.
    std::fs::write(&wdir, b"not a directory").unwrap();
    assert_eq!(
        state.record_authority(&act(2)).unwrap_err().code(),
        "witness_unavailable"
    );
    // The test double refuses when told to, and takes every checkpoint otherwise.
    let mem = Arc::new(MemoryWitness::new());
    let s = FileState::new(&Home::open(&root).unwrap()).with_witness(mem.clone());
    s.record_authority(&act(3)).unwrap();
    mem.refuse(Some("the witness is away"));
    assert_eq!(
        s.record_authority(&act(4)).unwrap_err().code(),
        "witness_unavailable"
    );
    mem.refuse(None);
    s.record_authority(&act(5)).unwrap();
    let taken = mem.taken();
    assert_eq!(taken.len(), 2);
    assert!(taken[1].count > taken[0].count);
    let r = s.audit_verify(None).unwrap();
    assert!(r.is_clean(), "{r:?}");
}

#[test]
fn a_witness_holding_a_forged_checkpoint_fails_verify() {
    let d = tempfile::tempdir().unwrap();
    let (root, log) = store(d.path());
    let wdir = d.path().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    let state = with_dir_witness(&root, &wdir);
    filled(&log);
    state.record_authority(&act(1)).unwrap();
    let store_id = made::Marker::read(&root).unwrap().unwrap().store_id;
    let file = DirWitness::new(&wdir).file(&store_id);
    let text = std::fs::read_to_string(&file).unwrap();
    // A checkpoint edited by hand (its signature fails).
    let forged = text
        .lines()
        .last()
        .unwrap()
        .replace("\"count\":", "\"count\":1");
    std::fs::write(&file, format!("{text}{forged}\n")).unwrap();
    let r = state.audit_verify(None).unwrap();
    let b = r.first_broken().unwrap().report.broken.clone().unwrap();
    assert_eq!(b.fault, Fault::CheckpointMismatch, "{b:?}");
    // One validly signed by another store's key.
    let d2 = tempfile::tempdir().unwrap();
    let (_r2, other) = store(d2.path());
    let c = hcp_store::audit::checkpoint::sign_as(
        &other,
        "elsewhere:/hcp",
        Some(store_id),
        None,
        99,
        "x",
        jiff::Timestamp::now(),
    )
    .unwrap();
    std::fs::write(&file, format!("{text}{}", c.to_line())).unwrap();
    let r = state.audit_verify(None).unwrap();
    let b = r.first_broken().unwrap().report.broken.clone().unwrap();
    assert_eq!(b.fault, Fault::CheckpointMismatch, "{b:?}");
    // The witness's directory gone: verify cannot check against it.
    std::fs::remove_dir_all(&wdir).unwrap();
    let r = state.audit_verify(None).unwrap();
    let b = r.first_broken().unwrap().report.broken.clone().unwrap();
    assert_eq!(b.fault, Fault::WitnessUnavailable, "{b:?}");
}

#[test]
fn every_hundredth_record_makes_a_checkpoint_due_after_the_call() {
    let d = tempfile::tempdir().unwrap();
    let (root, _log) = store(d.path());
    let mem = Arc::new(MemoryWitness::new());
    let s = FileState::new(&Home::open(&root).unwrap()).with_witness(mem.clone());
    for i in 0..98 {
        s.record(&entry(i, "alice")).unwrap();
        assert!(
            s.witness_after_call().unwrap().is_none(),
            "record {}",
            i + 2
        );
    }
    // Record 100.
    s.record(&entry(98, "alice")).unwrap();
    let c = s.witness_after_call().unwrap().unwrap();
    assert_eq!(c.count, 100);
    assert!(s.witness_after_call().unwrap().is_none(), "taken once");
    assert_eq!(mem.taken().len(), 1);
}

/// A trail of the format before keyed chains: plain SHA-256 records with `seq` and
/// `kind`, an FNV-checked anchor, no chain key, no marker.
fn old_store(root: &Path, n: u64) -> (AuditLog, String) {
    let home = Home::open(root).unwrap();
    let log = AuditLog::new(&home);
    std::fs::create_dir_all(log.dir()).unwrap();
    std::fs::create_dir_all(root.join("packs")).unwrap();
    let mut prev = hcp_store::audit::GENESIS.to_owned();
    let mut text = Vec::new();
    for i in 1..=n {
        let mut m = serde_json::Map::new();
        m.insert("ts".into(), "2026-01-01T00:00:00.000Z".into());
        m.insert("id".into(), format!("old-{i}").into());
        m.insert("seq".into(), i.into());
        m.insert("kind".into(), "refusal".into());
        m.insert("principal".into(), "owner".into());
        m.insert("verb_key".into(), "x".into());
        m.insert("decision".into(), "deny".into());
        m.insert("prev".into(), prev.clone().into());
        let h = record_hash(&m);
        m.insert("hash".into(), h.clone().into());
        text.extend_from_slice(&canonical_json(&Value::Object(m)));
        text.push(b'\n');
        prev = h;
    }
    std::fs::write(log.path(), &text).unwrap();
    let mut a = Anchor::empty("");
    let p = Point {
        count: n,
        head: prev.clone(),
        end: text.len() as u64,
    };
    a.point = p.clone();
    a.durable = p;
    std::fs::write(log.anchor_path(), legacy_bytes(&a)).unwrap();
    (log, prev)
}

#[test]
fn an_old_trail_is_migrated_its_old_part_verified_as_before() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("hcp");
    let (log, head) = old_store(&root, 4);
    let r = log.verify().unwrap();
    assert_eq!(
        (r.records, r.chain, r.broken),
        (4, ChainCheck::Legacy, None)
    );
    made::open(&root).unwrap();
    let r = log.verify().unwrap();
    assert_eq!(
        (r.records, r.keyed_from, r.chain, r.broken.clone()),
        (5, Some(5), ChainCheck::Checked, None),
        "{r:?}"
    );
    let text = std::fs::read_to_string(log.path()).unwrap();
    let m: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(
        (&m["act"], &m["prev"], &m["changed"]["records"]),
        (&json!("migrate"), &json!(head), &json!(4))
    );
    // Appends go on keyed; a second open does not migrate again.
    log.append(&entry(1, "alice")).unwrap();
    made::open(&root).unwrap();
    assert_eq!(log.verify().unwrap().records, 6);
    // The old part is still checked by its own rule: an edit there is caught.
    let edited = text.replacen("\"principal\":\"owner\"", "\"principal\":\"x\"", 1);
    let rest: String = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .skip(5)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(log.path(), format!("{edited}{rest}")).unwrap();
    assert_eq!(fault(&log), Some((Fault::HashMismatch, 1)));
}

#[test]
fn an_old_trail_that_does_not_match_its_anchor_is_not_migrated() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("hcp");
    let (log, _) = old_store(&root, 4);
    let text = std::fs::read_to_string(log.path()).unwrap();
    let cut: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(log.path(), &cut).unwrap();
    let e = made::open(&root).unwrap_err();
    assert_eq!(e.code().as_str(), "audit_unavailable", "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
    assert_eq!(
        std::fs::read_to_string(log.path()).unwrap(),
        cut,
        "left as it was"
    );
    assert!(made::Marker::read(&root).unwrap().is_none());
}

#[test]
fn a_migration_killed_after_its_record_resumes_with_the_same_key() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("hcp");
    let (log, _) = old_store(&root, 3);
    made::open(&root).unwrap();
    // Undo the migration's last steps as a kill after the `migrate` record would leave it:
    // the key still under its new name, the old anchor, no marker.
    let dir = log.dir().to_path_buf();
    std::fs::rename(
        dir.join(hcp_store::audit::CHAIN_KEY_FILE),
        dir.join(hcp_store::audit::NEW_KEY_FILE),
    )
    .unwrap();
    let text = std::fs::read(log.path()).unwrap();
    let old: Vec<u8> = text[..text.len()
        - std::str::from_utf8(&text)
            .unwrap()
            .lines()
            .last()
            .unwrap()
            .len()
        - 1]
        .to_vec();
    let (_l, head) = {
        // The old anchor again.
        let mut a = Anchor::empty("");
        let n = std::str::from_utf8(&old).unwrap().lines().count() as u64;
        let last: Value =
            serde_json::from_str(std::str::from_utf8(&old).unwrap().lines().last().unwrap())
                .unwrap();
        let p = Point {
            count: n,
            head: last["hash"].as_str().unwrap().to_owned(),
            end: old.len() as u64,
        };
        a.point = p.clone();
        a.durable = p;
        std::fs::write(log.anchor_path(), legacy_bytes(&a)).unwrap();
        (0, last["hash"].clone())
    };
    std::fs::remove_file(root.join(made::MARKER_FILE)).unwrap();
    made::open(&root).unwrap();
    let r = log.verify().unwrap();
    assert!(r.is_clean(), "{r:?}");
    assert_eq!(
        (r.records, r.keyed_from),
        (4, Some(4)),
        "one migrate record, not two"
    );
    let last: Value = serde_json::from_str(
        std::fs::read_to_string(log.path())
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["prev"], head);
}

#[test]
fn a_missing_or_empty_directory_is_no_store_and_nothing_is_made() {
    let d = tempfile::tempdir().unwrap();
    let typo = d.path().join("typo");
    let e = made::open(&typo).unwrap_err();
    assert_eq!(e.code().as_str(), "no_store");
    assert!(!typo.exists());
    std::fs::create_dir(&typo).unwrap();
    std::fs::write(typo.join("config.json"), "{}").unwrap();
    assert_eq!(made::open(&typo).unwrap_err().code().as_str(), "no_store");
    assert_eq!(std::fs::read_dir(&typo).unwrap().count(), 1);
    // `init` into it keeps the operator's file and makes the rest.
    assert!(matches!(
        made::init(&typo, Actor::owner(), None).unwrap(),
        made::Made::New { .. }
    ));
    assert_eq!(
        std::fs::read_to_string(typo.join("config.json")).unwrap(),
        "{}"
    );
    made::open(&typo).unwrap();
    assert!(matches!(
        made::init(&typo, Actor::owner(), None).unwrap(),
        made::Made::Already { .. }
    ));
    // No temporary directory is left beside or inside it.
    let left: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .chain(std::fs::read_dir(&typo).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".init-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn processes_making_one_store_at_once_make_it_once() {
    // A directory that exists (made in place, under the directory's lock) and one that
    // does not (made whole, the first rename wins).
    for exists in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("hcp");
        if exists {
            std::fs::create_dir(&root).unwrap();
        }
        let made: Vec<made::Made> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| made::init(&root, Actor::owner(), None).unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let new = made
            .iter()
            .filter(|m| matches!(m, made::Made::New { .. }))
            .count();
        assert_eq!(new, 1, "exists {exists}: {made:?}");
        let home = made::open(&root).unwrap();
        let log = AuditLog::new(&home);
        let r = log.verify().unwrap();
        assert!(r.broken.is_none(), "exists {exists}: {r:?}");
        assert_eq!(r.records, 1, "one `init` record");
    }
}

/// Binds `dir` read-only onto itself in a mount namespace of this thread's own (as the
/// bootstrap pack's view holds the store); `false` when this process may not mount.
fn bind_read_only(dir: &Path) -> bool {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = CString::new(dir.as_os_str().as_bytes()).unwrap();
    let root = CString::new("/").unwrap();
    // SAFETY: plain system calls on valid C strings; the namespace is this thread's.
    unsafe {
        libc::unshare(libc::CLONE_NEWNS) == 0
            && libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) == 0
            && libc::mount(
                c.as_ptr(),
                c.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ) == 0
            && libc::mount(
                std::ptr::null(),
                c.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
                std::ptr::null(),
            ) == 0
    }
}

/// Binds the empty file `void` over `path` (as the bootstrap pack's view covers the
/// store's keys); `false` when this process may not mount.
fn cover(path: &Path, void: &Path) -> bool {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let dst = CString::new(path.as_os_str().as_bytes()).unwrap();
    let src = CString::new(void.as_os_str().as_bytes()).unwrap();
    // SAFETY: a plain system call on valid C strings, in this thread's own namespace.
    unsafe {
        libc::mount(
            src.as_ptr(),
            dst.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        ) == 0
    }
}

#[test]
fn a_verifier_without_the_key_checks_the_rest_and_reports_not_checked() {
    let d = tempfile::tempdir().unwrap();
    let (root, log) = store(d.path());
    filled(&log);
    let r = log.verify().unwrap();
    hcp_store::audit::checkpoint::sign(&log, r.records, &r.head, jiff::Timestamp::now()).unwrap();
    // Copies of the store: one as it is, one with a record deleted, each then held
    // read-only with its keys covered, as the bootstrap pack's view holds the store; and
    // one without its keys, held read-only but not covered.
    let view = d.path().join("view");
    copy_dir(&root, &view);
    let cut = d.path().join("cut");
    copy_dir(&root, &cut);
    let bare = d.path().join("bare");
    copy_dir(&root, &bare);
    for k in hcp_store::audit::KEY_FILES {
        std::fs::remove_file(bare.join(k)).unwrap();
    }
    let void = d.path().join("void");
    std::fs::write(&void, b"").unwrap();
    let cut_log = AuditLog::new(&Home::open(&cut).unwrap());
    let text = std::fs::read_to_string(cut_log.path()).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(3);
    std::fs::write(cut_log.path(), lines.join("\n") + "\n").unwrap();
    // Outside a view, a keyed store without its key is a fault, not a view.
    let verdict = |dir: &Path| {
        let state = FileState::new(&Home::open(dir).unwrap());
        state.audit_verify(None).unwrap().chains[0].report.clone()
    };
    let fault_of = |r: &hcp_store::audit::VerifyReport| r.broken.as_ref().map(|b| b.fault);
    assert_eq!(fault_of(&verdict(&bare)), Some(Fault::MissingChainKey));
    let mounted = std::thread::spawn(move || {
        if !bind_read_only(&view) || !bind_read_only(&cut) || !bind_read_only(&bare) {
            return None;
        }
        for dir in [&view, &cut] {
            for k in hcp_store::audit::KEY_FILES {
                if !cover(&dir.join(k), &void) {
                    return None;
                }
            }
        }
        Some((verdict(&view), verdict(&cut), verdict(&bare)))
    })
    .join()
    .unwrap();
    let Some((c, cut, bare)) = mounted else {
        eprintln!("skipped: this process may not mount (a read-only bind of the store)");
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must run it"
        );
        return;
    };
    assert!(c.is_clean(), "{c:?}");
    assert_eq!(c.chain, ChainCheck::NotChecked);
    assert_eq!(
        c.against.as_ref().map(|a| a.source.clone()),
        Some(CheckpointSource::Last)
    );
    // Its structure is still checked: a deleted record is caught without the key.
    assert_eq!(fault_of(&cut), Some(Fault::PrevMismatch));
    // A read-only mount alone is no view: a key gone there is still missing.
    assert_eq!(fault_of(&bare), Some(Fault::MissingChainKey), "{bare:?}");
}

/// The store's files (not followed): each path with its bytes, for "left as it was".
fn files(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap() {
                todo.push(e.unwrap().path());
            }
            out.insert(p, Vec::new());
        } else {
            out.insert(p.clone(), std::fs::read(&p).unwrap());
        }
    }
    out
}

#[test]
fn a_trail_recomputed_as_an_earlier_one_is_neither_verified_nor_migrated_as_one() {
    let Some(py) = python() else { return };
    let d = tempfile::tempdir().unwrap();
    let (root, log) = store(d.path());
    filled(&log);
    log.append_authority(&Authority::new(
        "grant",
        Actor::owner(),
        json!({"principal": "alice"}),
    ))
    .unwrap();
    log.append(&entry(7, "alice")).unwrap();
    // The whole trail recomputed with plain SHA-256 under an FNV anchor, the keys and the
    // marker removed: it looks like a store of an earlier version, but it holds records
    // only a keyed store writes (its `init` of format 2 first).
    let out = Command::new(py)
        .arg(script("rewrite_trail.py"))
        .arg(log.dir())
        .arg("sha256")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for k in hcp_store::audit::KEY_FILES {
        std::fs::remove_file(root.join(k)).unwrap();
    }
    std::fs::remove_file(root.join(made::MARKER_FILE)).unwrap();
    let b = log
        .verify()
        .unwrap()
        .broken
        .expect("a forged earlier trail");
    assert_eq!((b.fault, b.line), (Fault::HashMismatch, 1), "{b:?}");
    assert!(b.detail.contains("act of authority (`init`)"), "{b:?}");
    let before = files(&root);
    for attempt in ["open", "init"] {
        let e = match attempt {
            "open" => made::open(&root).unwrap_err(),
            _ => made::init(&root, Actor::owner(), None).unwrap_err(),
        };
        assert_eq!(
            (e.code().as_str(), e.to_string().contains("hash_mismatch")),
            ("audit_unavailable", true),
            "{attempt}: {e}"
        );
        assert!(e.to_string().contains("at line 1"), "{attempt}: {e}");
        assert_eq!(files(&root), before, "{attempt}: left as it was");
    }
    // Any act later in a plain part is caught at its own line: the first record made
    // plain `refusal` again, the act after it stays.
    let text = std::fs::read_to_string(log.path()).unwrap();
    let mut recs: Vec<serde_json::Map<String, Value>> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let first_act = recs
        .iter()
        .skip(1)
        .position(|m| m.get("kind") == Some(&json!("authority")));
    recs[0] = serde_json::from_value(json!({"ts": recs[0]["ts"], "id": recs[0]["id"],
        "seq": 1, "kind": "refusal", "principal": "owner", "verb_key": "x", "decision": "deny"}))
    .unwrap();
    let mut prev = hcp_store::audit::GENESIS.to_owned();
    let mut out = String::new();
    for m in &mut recs {
        m.remove("hash");
        m.insert("prev".into(), json!(prev));
        prev = record_hash(m);
        m.insert("hash".into(), json!(prev));
        out.push_str(std::str::from_utf8(&canonical_json(&Value::Object(m.clone()))).unwrap());
        out.push('\n');
    }
    std::fs::write(log.path(), out).unwrap();
    let b = log
        .verify()
        .unwrap()
        .broken
        .expect("an act in the plain part");
    let at = first_act.expect("the grant") as u64 + 2;
    assert_eq!((b.fault, b.line), (Fault::HashMismatch, at), "{b:?}");
    assert!(b.detail.contains("act of authority (`grant`)"), "{b:?}");
}

#[test]
fn an_outcome_is_bounded_to_eight_kib() {
    let d = tempfile::tempdir().unwrap();
    let (_root, log) = store(d.path());
    let a = admit(&log, "bob");
    let big: Vec<Value> = (0..400)
        .map(|i| json!({"dest": format!("host-{i}.example.org"), "port": 443}))
        .collect();
    log.outcome(&Outcome {
        intent: a.id,
        principal: "bob".into(),
        pack_id: "transit".into(),
        verb_key: "find".into(),
        code: None,
        exit_code: Some(0),
        duration_ms: 2,
        stdout_bytes: 3,
        stderr_bytes: 0,
        truncated: false,
        extra: BTreeMap::from([
            ("connections".to_owned(), Value::Array(big)),
            ("signal".to_owned(), json!(9)),
        ]),
    })
    .unwrap();
    let text = std::fs::read_to_string(log.path()).unwrap();
    let last = text.lines().last().unwrap();
    assert!(last.len() <= 8 * 1024, "{}", last.len());
    let v: Value = serde_json::from_str(last).unwrap();
    assert_eq!(
        (&v["dropped"], &v["signal"]),
        (&json!(["connections"]), &json!(9))
    );
    assert!(log.verify().unwrap().is_clean());
}

/// A directory witness that, while armed, appends a refusal's record to the trail each time
/// an act asks it whether it is new (after the act's record is appended, before its
/// checkpoint is signed): a record of a call made meanwhile (calls do not wait for acts).
#[derive(Debug)]
struct Between {
    inner: DirWitness,
    log: AuditLog,
    armed: std::sync::atomic::AtomicUsize,
}

impl hcp_store::audit::witness::Witness for Between {
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn ready(&self) -> Result<(), hcp_store::audit::witness::WitnessError> {
        self.inner.ready()
    }
    fn ready_for(
        &self,
        store: Option<&str>,
    ) -> Result<(), hcp_store::audit::witness::WitnessError> {
        self.inner.ready_for(store)
    }
    fn take(
        &self,
        c: &hcp_store::audit::checkpoint::Checkpoint,
    ) -> Result<(), hcp_store::audit::witness::WitnessError> {
        self.inner.take(c)
    }
    fn newest(
        &self,
        store: &str,
        machine: Option<&str>,
    ) -> Result<hcp_store::audit::witness::Newest, hcp_store::audit::witness::WitnessError> {
        self.inner.newest(store, machine)
    }
    fn held(
        &self,
        store: &str,
        machine: Option<&str>,
    ) -> Result<hcp_store::audit::witness::Held, hcp_store::audit::witness::WitnessError> {
        self.inner.held(store, machine)
    }
    fn is_new_for(&self, store: &str) -> Result<bool, hcp_store::audit::witness::WitnessError> {
        use std::sync::atomic::Ordering;
        if self
            .armed
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            self.log.append(&entry(0, "meanwhile")).unwrap();
        }
        self.inner.is_new_for(store)
    }
}

#[test]
fn acts_made_at_once_each_keep_the_checkpoint_of_their_own_record() {
    use hcp_store::audit::witness::Witness as _;
    let d = tempfile::tempdir().unwrap();
    let (root, log) = store(d.path());
    let wdir = d.path().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    let between = Arc::new(Between {
        inner: DirWitness::new(&wdir),
        log,
        armed: std::sync::atomic::AtomicUsize::new(0),
    });
    let state = FileState::new(&Home::open(&root).unwrap()).with_witness(between.clone());
    // The witness named, and one act witnessed, one at a time.
    state.record_authority(&act(1)).unwrap();
    state.record_authority(&act(2)).unwrap();
    // Two acts at once (the lock that orders acts makes one wait for the other), each
    // with a call's record appended between its record and its checkpoint.
    between.armed.store(2, std::sync::atomic::Ordering::SeqCst);
    let (a, b) = std::thread::scope(|s| {
        let one = s.spawn(|| state.record_authority(&act(3)).unwrap());
        let two = s.spawn(|| state.record_authority(&act(4)).unwrap());
        (one.join().unwrap(), two.join().unwrap())
    });
    let store_id = made::Marker::read(&root).unwrap().unwrap().store_id;
    let held = DirWitness::new(&wdir)
        .held(&store_id, None)
        .map(|h| h.checkpoints)
        .unwrap();
    for act in [&a, &b] {
        assert!(
            held.iter()
                .any(|(_, c)| c.count == act.seq && c.head == act.hash),
            "the act at record {} keeps the checkpoint of its own record: {held:?}",
            act.seq
        );
    }
    assert_eq!(
        a.seq.abs_diff(b.seq),
        2,
        "a call's record between the two acts"
    );
    let r = state.audit_verify(None).unwrap();
    assert!(r.is_clean(), "{r:?}");
}
