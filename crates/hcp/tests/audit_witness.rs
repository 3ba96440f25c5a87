//! The witness against someone holding a copy of the store (RUNTIME §6, "Witnesses"),
//! through the built `hcp`: a store restored behind its witness, a witness removed from
//! `config.json` or emptied, a torn or forged line of the witness's file, and the repair
//! of a witness that is gone. Each attack, then `hcp audit verify`, then the next act.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use common::World;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

macro_rules! snapshot {
    ($name:expr, $text:expr) => {
        insta::with_settings!({filters => vec![
            (r"hmac-sha256:[0-9a-f]{64}", "[HMAC]"),
            (r"sha256:[0-9a-f]{64}", "[SHA256]"),
            (r"ed25519:[0-9a-f]{64}", "[KEY]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]"),
            (r"\b[0-9a-f]{32}\b", "[STORE]"),
        ]}, {
            insta::assert_snapshot!($name, $text);
        });
    };
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn ok(w: &World, args: &[&str]) -> Output {
    let o = w.run(args);
    assert_eq!(code(&o), 0, "{args:?}: {}", w.render(&o));
    o
}

fn write_config(w: &World, v: &Value) {
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    std::fs::write(w.hcp_home.join("config.json"), v.to_string()).unwrap();
}

/// A store witnessed by `TMP/witness`, with the echo pack installed.
fn witnessed() -> (World, PathBuf) {
    common::example_bins();
    let w = World::new();
    let wdir = w.root().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    write_config(&w, &json!({"audit": {"witness": wdir}}));
    w.init();
    exec_common::install(&w, &common::gold_pack("echo"));
    (w, wdir)
}

/// The store's file in the witness `wdir`.
fn wfile(wdir: &Path) -> PathBuf {
    let files: Vec<_> = std::fs::read_dir(wdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

fn verify_json(w: &World) -> (i32, Value) {
    let o = w.run(&["audit", "verify", "--json"]);
    (code(&o), serde_json::from_slice(&o.stdout).unwrap())
}

fn fault(w: &World) -> (i32, Value) {
    let (c, v) = verify_json(w);
    (c, v["broken"]["fault"].clone())
}

fn records(w: &World) -> usize {
    std::fs::read_to_string(w.hcp_home.join("audit/audit.jsonl"))
        .unwrap()
        .lines()
        .count()
}

fn copy_dir(from: &Path, to: &Path) {
    let s = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(s.success());
}

#[test]
fn a_store_restored_behind_its_witness_is_a_rollback_and_its_next_act_is_refused() {
    let (w, wdir) = witnessed();
    ok(&w, &["exec", "echo.say", "before"]);
    let backup = w.root().join("backup");
    copy_dir(&w.hcp_home, &backup);
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    ok(&w, &["session", "start", "--principal", "carol"]);
    assert_eq!(verify_json(&w).0, 0);
    let witnessed_count = records(&w);

    // The store copied back from the older backup, trail, anchor and keys together.
    std::fs::remove_dir_all(&w.hcp_home).unwrap();
    copy_dir(&backup, &w.hcp_home);
    let restored = records(&w);
    assert!(restored < witnessed_count);
    let o = w.run(&["audit", "verify"]);
    snapshot!("rollback_verify", w.render(&o));
    assert_eq!(fault(&w), (1, json!("rollback")));

    // The next act of authority is refused with the code, and writes nothing: no record,
    // no new checkpoint burying the witnessed one.
    let lines_before = std::fs::read_to_string(wfile(&wdir)).unwrap();
    let o = w.run(&["grant", "agent", "echo", "verb.exec.read"]);
    snapshot!("rollback_next_act", w.render(&o));
    assert_eq!(code(&o), 1);
    assert_eq!(records(&w), restored);
    assert_eq!(std::fs::read_to_string(wfile(&wdir)).unwrap(), lines_before);

    // Calls are never refused by the witness; a restored trail grown past the witnessed
    // count is a fork, still caught.
    while records(&w) <= witnessed_count + 2 {
        ok(&w, &["exec", "echo.say", "after"]);
    }
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch")),
        "{v}"
    );
    let at = v["broken"]["line"].as_u64().unwrap() as usize;
    assert!(
        at > restored && at <= witnessed_count,
        "the fork is named where it first leaves a witnessed checkpoint: {v}"
    );
    assert!(
        v["broken"]["detail"]
            .as_str()
            .unwrap()
            .contains(".checkpoints` line "),
        "{v}"
    );

    // The old witness's file, as `--checkpoint FILE`, says the same.
    let old = wfile(&wdir);
    let o = w.run(&["audit", "verify", "--checkpoint", old.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("checkpoint_mismatch"));

    // The repair of a store restored on purpose: a new witness, a recorded act. Acts go
    // on; verify still holds the trail to the old witness, which the trail names for the
    // part before the new one, and which saw the records the restore lost.
    let fresh = w.root().join("witness-2");
    std::fs::create_dir(&fresh).unwrap();
    ok(
        &w,
        &["config", "set", "audit.witness", fresh.to_str().unwrap()],
    );
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch")),
        "{v}"
    );
    // The old witness's file moved aside (kept as evidence elsewhere): the old witness is
    // retired, which verify notes.
    std::fs::rename(&old, w.root().join("old.checkpoints")).unwrap();
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    assert_eq!(
        v["retired_witnesses"][0]["witness"],
        json!(format!("directory {}", wdir.display())),
        "{v}"
    );
    let text = String::from_utf8_lossy(&ok(&w, &["audit", "verify"]).stdout).into_owned();
    assert!(text.contains("was retired by the recorded act"), "{text}");
}

#[test]
fn a_witness_removed_from_the_config_or_emptied_is_a_fault() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    ok(&w, &["session", "start", "--principal", "carol"]);
    assert_eq!(verify_json(&w).0, 0);
    let config = std::fs::read(w.hcp_home.join("config.json")).unwrap();

    // `audit.witness` removed from `config.json` by hand: the trail says it had one.
    write_config(&w, &json!({}));
    let o = w.run(&["audit", "verify"]);
    snapshot!("witness_removed_from_config", w.render(&o));
    assert_eq!(fault(&w), (1, json!("witness_unavailable")));
    std::fs::write(w.hcp_home.join("config.json"), &config).unwrap();
    assert_eq!(verify_json(&w).0, 0);

    // The witness's newest lines cut: the acts they witnessed are still on the trail.
    let file = wfile(&wdir);
    let whole = std::fs::read_to_string(&file).unwrap();
    let first: String = whole.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &first).unwrap();
    assert_eq!(fault(&w), (1, json!("checkpoint_mismatch")));
    std::fs::write(&file, &whole).unwrap();
    assert_eq!(verify_json(&w).0, 0);

    // The store's file removed from the witness (the witness emptied).
    std::fs::remove_file(&file).unwrap();
    let o = w.run(&["audit", "verify"]);
    snapshot!("witness_emptied", w.render(&o));
    assert_eq!(fault(&w), (1, json!("checkpoint_mismatch")));
    // The next act does not start the witness's file again over the loss: it is refused.
    let before = records(&w);
    let o = w.run(&["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert_eq!(records(&w), before);
    assert!(!file.exists());
    assert_eq!(fault(&w), (1, json!("checkpoint_mismatch")));
}

#[test]
fn an_act_is_refused_while_the_witness_holds_less_than_the_trail_says_it_took() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    ok(&w, &["session", "start", "--principal", "carol"]);
    let file = wfile(&wdir);
    let whole = std::fs::read_to_string(&file).unwrap();

    // Cut to its first two lines: older than what it took.
    let first: String = whole.lines().take(2).map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, &first).unwrap();
    let before = records(&w);
    let o = w.run(&["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("code: checkpoint_mismatch")
            && err.contains("checkpoints were removed from it")
            && err.contains("hcp config set audit.witness NEW_DIR"),
        "{err}"
    );
    assert_eq!(records(&w), before, "a refused act writes no record");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), first);
    // Calls go on.
    ok(&w, &["exec", "echo.say", "still"]);

    // Deleted: refused the same way, and the file is not made again.
    std::fs::remove_file(&file).unwrap();
    let o = w.run(&["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("holds no checkpoint of this store"));
    assert!(!file.exists());
    ok(&w, &["exec", "echo.say", "still"]);
    // Naming the same directory again does not paper over the loss either.
    let o = w.run(&["config", "set", "audit.witness", wdir.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(!file.exists());

    // Its file put back from a backup: acts go on.
    std::fs::write(&file, &whole).unwrap();
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(verify_json(&w).0, 0);

    // Lost for good: the repair is a new witness, a recorded act. The old witness's
    // checkpoints are gone, which verify notes.
    std::fs::remove_file(&file).unwrap();
    assert_eq!(
        code(&w.run(&["grant", "dave", "echo", "verb.exec.read"])),
        1
    );
    let fresh = w.root().join("witness-2");
    std::fs::create_dir(&fresh).unwrap();
    ok(
        &w,
        &["config", "set", "audit.witness", fresh.to_str().unwrap()],
    );
    ok(&w, &["grant", "dave", "echo", "verb.exec.read"]);
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    assert_eq!(
        v["retired_witnesses"].as_array().map(Vec::len),
        Some(1),
        "{v}"
    );
}

#[test]
fn an_act_is_refused_while_the_witness_is_removed_or_changed_by_hand() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);

    // `audit.witness` removed from `config.json` by hand.
    write_config(&w, &json!({}));
    let before = records(&w);
    let o = w.run(&["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("code: witness_unavailable")
            && err.contains("removed from the configuration by hand")
            && err.contains("hcp config unset audit.witness"),
        "{err}"
    );
    assert_eq!(records(&w), before, "a refused act writes no record");
    // Calls go on (the hand edit is recorded as a changed `config.json`).
    ok(&w, &["exec", "echo.say", "still"]);
    // The change recorded: `hcp config unset audit.witness`, though `config.json` no
    // longer names it.
    let o = ok(&w, &["config", "unset", "audit.witness"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("is stopped"),
        "{}",
        w.render(&o)
    );
    let tail = ok(&w, &["audit", "tail", "--json", "-n", "2"]);
    let tail: Value = serde_json::from_slice(&tail.stdout).unwrap();
    assert_eq!(
        (&tail[0]["act"], &tail[0]["changed"]["witness"]),
        (&json!("witness"), &Value::Null)
    );
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(verify_json(&w).0, 0);
    // Nothing to stop any more: nothing recorded.
    let o = ok(&w, &["config", "unset", "audit.witness"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing to change"));

    // Named again, then changed by hand to another directory.
    ok(
        &w,
        &["config", "set", "audit.witness", wdir.to_str().unwrap()],
    );
    ok(&w, &["grant", "carol", "echo", "verb.exec.read"]);
    let other = w.root().join("witness-other");
    std::fs::create_dir(&other).unwrap();
    write_config(&w, &json!({"audit": {"witness": other}}));
    let o = w.run(&["grant", "dave", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("changed by hand"),
        "{}",
        w.render(&o)
    );
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 0);
    // Recorded with `hcp config set`: acts go on, and the trail verifies.
    ok(
        &w,
        &["config", "set", "audit.witness", other.to_str().unwrap()],
    );
    ok(&w, &["grant", "dave", "echo", "verb.exec.read"]);
    assert_eq!(verify_json(&w).0, 0);
}

#[test]
fn every_witness_the_trail_named_checks_the_part_it_witnessed() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    let backup = w.root().join("backup");
    copy_dir(&w.hcp_home, &backup);
    ok(&w, &["session", "start", "--principal", "carol"]);
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    // The witness moved to B, by the recorded act; more acts, witnessed by B.
    let b = w.root().join("witness-b");
    std::fs::create_dir(&b).unwrap();
    ok(&w, &["config", "set", "audit.witness", b.to_str().unwrap()]);
    ok(&w, &["grant", "carol", "echo", "verb.exec.read"]);
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    let in_a = std::fs::read_to_string(wfile(&wdir))
        .unwrap()
        .lines()
        .count() as u64;
    let in_b = std::fs::read_to_string(wfile(&b)).unwrap().lines().count() as u64;
    assert_eq!(
        v["witnessed"],
        json!(in_a + in_b),
        "both witnesses are checked: {v}"
    );

    // A checkpoint of A's part cut from A: caught though A is no longer configured.
    let whole = std::fs::read_to_string(wfile(&wdir)).unwrap();
    let lines: Vec<&str> = whole.lines().collect();
    // Its last two: the checkpoints of the last grant A witnessed, its own and its
    // completion's (the act that moved the witness is witnessed by B, its completion too).
    let cut: String = lines[..lines.len() - 2]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(wfile(&wdir), cut).unwrap();
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch")),
        "{v}"
    );
    assert!(
        v["broken"]["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("directory {}", wdir.display())),
        "{v}"
    );
    std::fs::write(wfile(&wdir), &whole).unwrap();
    assert_eq!(verify_json(&w).0, 0);

    // Someone holding the store's keys rolls it back to before the switch, then moves
    // the witness on to one of their own: A still holds what the trail lost.
    std::fs::remove_dir_all(&w.hcp_home).unwrap();
    copy_dir(&backup, &w.hcp_home);
    let c_dir = w.root().join("witness-c");
    std::fs::create_dir(&c_dir).unwrap();
    ok(
        &w,
        &["config", "set", "audit.witness", c_dir.to_str().unwrap()],
    );
    ok(&w, &["grant", "mallory", "echo", "verb.exec.read"]);
    let (c, v) = verify_json(&w);
    assert_eq!(c, 1, "{v}");
    assert!(
        matches!(
            v["broken"]["fault"].as_str(),
            Some("checkpoint_mismatch" | "rollback")
        ),
        "{v}"
    );
    assert!(
        v["broken"]["detail"]
            .as_str()
            .unwrap()
            .contains(&wfile(&wdir).display().to_string()),
        "the old witness is named: {v}"
    );
}

#[test]
fn an_earlier_witness_that_is_gone_is_noted_as_retired() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    let b = w.root().join("witness-b");
    std::fs::create_dir(&b).unwrap();
    ok(&w, &["config", "set", "audit.witness", b.to_str().unwrap()]);
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    std::fs::remove_dir_all(&wdir).unwrap();
    let o = ok(&w, &["audit", "verify"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains(&format!("the witness (directory {})", wdir.display()))
            && text.contains("was retired by the recorded act")
            && text.contains("is gone"),
        "{text}"
    );
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    let r = &v["retired_witnesses"][0];
    assert_eq!(r["from"], json!(2), "{v}");
    assert!(r["until"].as_u64().unwrap() > 2, "{v}");
    // The present witness gone is no retirement: acts are refused, verify fails.
    std::fs::remove_dir_all(&b).unwrap();
    assert_eq!(
        code(&w.run(&["grant", "carol", "echo", "verb.exec.read"])),
        74
    );
    assert_eq!(fault(&w), (1, json!("witness_unavailable")));
}

#[test]
fn verify_checkpoint_reads_the_witness_file_as_the_witness_writes_it() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    ok(&w, &["exec", "echo.say", "one"]);
    let file = wfile(&wdir);
    let n = std::fs::read_to_string(&file).unwrap().lines().count();
    assert!(n >= 3, "{n}");
    let o = ok(
        &w,
        &["audit", "verify", "--checkpoint", file.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains("extends the checkpoint file")
            && text.contains(&format!("each of its {n} witnessed checkpoints")),
        "{text}"
    );
    // One line of it is one checkpoint, as `hcp audit checkpoint` prints it.
    let one = w.root().join("one.json");
    let line = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .to_owned();
    std::fs::write(&one, format!("{line}\n")).unwrap();
    ok(
        &w,
        &["audit", "verify", "--checkpoint", one.to_str().unwrap()],
    );
}

#[test]
fn a_torn_last_line_of_the_witness_is_a_crash_and_the_next_checkpoint_recovers_it() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    let file = wfile(&wdir);
    let whole = std::fs::read_to_string(&file).unwrap();
    let last = whole.lines().last().unwrap().to_owned();
    // A crash mid-append: half a checkpoint, no newline.
    let mut torn = whole.clone();
    torn.push_str(&last[..last.len() / 2]);
    std::fs::write(&file, &torn).unwrap();
    let o = w.run(&["audit", "verify"]);
    snapshot!("witness_torn_last_line", w.render(&o));
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["witness_torn"][0]["recovered"], json!(false), "{v}");

    // The next checkpoint ends the torn line, says so, and appends cleanly.
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let n = whole.lines().count();
    // The torn line, the recovery line, then the act's two checkpoints (its intent's
    // and its completion's).
    assert_eq!(lines.len(), n + 4, "{text}");
    let recovery: Value = serde_json::from_str(lines[n + 1]).unwrap();
    assert_eq!(
        recovery,
        json!({"format": "hcp-witness-recovery/1", "torn_bytes": last.len() / 2})
    );
    let intent: Value = serde_json::from_str(lines[n + 2]).unwrap();
    assert_eq!(intent["count"], json!(records(&w) - 1));
    let newest: Value = serde_json::from_str(lines[n + 3]).unwrap();
    assert_eq!(newest["count"], json!(records(&w)));
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["witness_torn"][0]["recovered"], json!(true), "{v}");

    // A line torn anywhere else, with no recovery after it, is an edit: a fault naming
    // the file and the line.
    let mut edited: Vec<String> = text.lines().map(str::to_owned).collect();
    let half = edited[0].len() / 2;
    edited[0].truncate(half);
    std::fs::write(&file, edited.join("\n") + "\n").unwrap();
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch")),
        "{v}"
    );
    assert!(
        v["broken"]["detail"]
            .as_str()
            .unwrap()
            .contains(".checkpoints` line 1"),
        "{v}"
    );
}

#[test]
fn a_forged_checkpoint_in_the_witness_is_named_with_its_file_and_line() {
    let (w, wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    let file = wfile(&wdir);
    let whole = std::fs::read_to_string(&file).unwrap();
    let n = whole.lines().count();
    // A bad signature: the newest checkpoint with a higher count.
    let last: Value = serde_json::from_str(whole.lines().last().unwrap()).unwrap();
    let mut forged = last.clone();
    forged["count"] = json!(last["count"].as_u64().unwrap() + 50);
    std::fs::write(&file, format!("{whole}{forged}\n")).unwrap();
    let o = w.run(&["audit", "verify"]);
    snapshot!("witness_forged_signature", w.render(&o));
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch"))
    );
    assert!(
        v["broken"]["detail"]
            .as_str()
            .unwrap()
            .contains(&format!(".checkpoints` line {}", n + 1)),
        "{v}"
    );
    // The next act is refused too: it would bury the forged line under a new one.
    let o = w.run(&["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("checkpoint_mismatch"));

    // Another store's checkpoint (its own key, a valid signature) in this store's file.
    let other = World::new();
    other.init();
    let o = ok(&other, &["audit", "checkpoint"]);
    std::fs::write(
        &file,
        format!("{whole}{}", String::from_utf8_lossy(&o.stdout)),
    )
    .unwrap();
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch"))
    );
    let detail = v["broken"]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!(".checkpoints` line {}", n + 1))
            && detail.contains("another store"),
        "{v}"
    );
}

#[test]
fn a_witness_that_is_gone_does_not_lock_out_the_act_that_replaces_it() {
    let (w, wdir) = witnessed();
    std::fs::remove_dir_all(&wdir).unwrap();
    let before = records(&w);
    let o = w.run(&["grant", "agent", "echo", "verb.exec.read"]);
    snapshot!("witness_gone_act_refused", w.render(&o));
    assert_eq!(code(&o), 74);
    assert_eq!(records(&w), before, "a refused act writes no record");

    // `hcp config set audit.witness DIR`: recorded, witnessed by the new directory.
    let fresh = w.root().join("witness-2");
    std::fs::create_dir(&fresh).unwrap();
    ok(
        &w,
        &["config", "set", "audit.witness", fresh.to_str().unwrap()],
    );
    // The act's intent, the record naming the new witness, the act's completion.
    let tail = ok(&w, &["audit", "tail", "--json", "-n", "3"]);
    let tail: Value = serde_json::from_slice(&tail.stdout).unwrap();
    assert_eq!(
        (
            &tail[0]["act"],
            &tail[0]["changed"]["key"],
            &tail[1]["act"],
            &tail[2]["act"]
        ),
        (
            &json!("config set"),
            &json!("audit.witness"),
            &json!("witness"),
            &json!("act made")
        )
    );
    // The new witness's first checkpoint is of the record naming it.
    let taken = std::fs::read_to_string(wfile(&fresh)).unwrap();
    let first: Value = serde_json::from_str(taken.lines().next().unwrap()).unwrap();
    assert_eq!(first["count"], tail[1]["seq"], "{taken}");
    // The act's completion is witnessed by the new witness too: `config.json` names it
    // by then, and the completion reads it under the lock that orders acts.
    let second: Value = serde_json::from_str(taken.lines().nth(1).unwrap()).unwrap();
    assert_eq!(second["count"], tail[2]["seq"], "{taken}");
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["against"]["count"], &v["against"]["past"]),
        (0, &tail[2]["seq"], &json!(0)),
        "{v}"
    );
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);

    // `hcp config unset audit.witness` with that witness gone too: recorded, and the
    // trail says it has no witness from then on.
    std::fs::remove_dir_all(&fresh).unwrap();
    assert_eq!(
        code(&w.run(&["grant", "bob", "echo", "verb.exec.read"])),
        74
    );
    ok(&w, &["config", "unset", "audit.witness"]);
    let tail = ok(&w, &["audit", "tail", "--json", "-n", "2"]);
    let tail: Value = serde_json::from_slice(&tail.stdout).unwrap();
    assert_eq!(
        (
            &tail[0]["act"],
            &tail[0]["changed"]["witness"],
            &tail[1]["act"]
        ),
        (&json!("witness"), &Value::Null, &json!("act made"))
    );
    assert_eq!(verify_json(&w).0, 0);
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    assert_eq!(verify_json(&w).0, 0);
}

#[test]
fn a_witness_directory_that_cannot_be_written_refuses_acts_and_is_replaced() {
    let (w, wdir) = witnessed();
    let Some(guard) = common::immutable::Immutable::new(&wdir) else {
        common::skip::skip("chattr +i is not available here (root and chattr needed)");
        return;
    };
    let o = w.run(&["grant", "agent", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("witness_unavailable") && err.contains("hcp config set audit.witness"),
        "{err}"
    );
    let fresh = w.root().join("witness-2");
    std::fs::create_dir(&fresh).unwrap();
    ok(
        &w,
        &["config", "set", "audit.witness", fresh.to_str().unwrap()],
    );
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    assert_eq!(verify_json(&w).0, 0);
    drop(guard);
}

#[test]
fn the_bootstrap_packs_verify_without_the_witness_in_its_view_is_sound() {
    let (w, _wdir) = witnessed();
    exec_common::install(&w, &common::gold_pack("hcp-cli"));
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    // Its child sees the store read-only, without its keys and without the witness: it
    // checks the store's own last checkpoint and holds nothing more against it.
    let o = w.run(&["exec", "--json", "hcp-cli.audit.verify"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(v["data"]["ok"], json!(true), "{v}");
    assert_eq!(verify_json(&w).0, 0);
}

/// `hcp ARGS` killed by the seam once the act's intent is synced, before its checkpoint.
fn killed_after_intent(w: &World, args: &[&str]) {
    use std::os::unix::process::ExitStatusExt;
    let o = w
        .hcp()
        .env("HCP_TEST_ABORT_AT", "authority_synced:1")
        .args(args)
        .output()
        .unwrap();
    assert_eq!(o.status.signal(), Some(9), "{args:?}:\n{}", w.render(&o));
}

#[test]
fn acts_killed_before_their_checkpoints_are_interrupted_not_damage() {
    let (w, _wdir) = witnessed();
    killed_after_intent(&w, &["grant", "carol", "echo", "verb.exec.read"]);
    killed_after_intent(&w, &["grant", "dave", "echo", "verb.exec.read"]);
    let (c, v) = verify_json(&w);
    assert_eq!((c, &v["ok"]), (0, &json!(true)), "{v}");
    let acts: Vec<_> = v["interrupted_acts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["act"].clone())
        .collect();
    assert_eq!(acts, [json!("grant"), json!("grant")], "{v}");
    // The next act is made and witnessed, and the trail stays sound.
    ok(&w, &["grant", "erin", "echo", "verb.exec.read"]);
    let (c, v) = verify_json(&w);
    assert_eq!((c, &v["ok"]), (0, &json!(true)), "{v}");
}

/// The witness's file of `wdir` without the lines `drop` (from 1) keeps.
fn drop_witness_lines(wdir: &Path, drop: impl Fn(usize, usize) -> bool) {
    let file = wfile(wdir);
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    let kept: String = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| !drop(i + 1, n))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    std::fs::write(&file, kept).unwrap();
}

/// A witnessed store with five grants made, each witnessed.
fn five_grants() -> (World, PathBuf) {
    let (w, wdir) = witnessed();
    for p in ["p1", "p2", "p3", "p4", "p5"] {
        ok(&w, &["grant", p, "echo", "verb.exec.read"]);
    }
    assert_eq!(verify_json(&w).1["ok"], json!(true));
    (w, wdir)
}

#[test]
fn checkpoints_cut_from_the_witness_are_not_forgiven_by_the_next_act() {
    let (w, wdir) = five_grants();
    drop_witness_lines(&wdir, |i, n| i + 4 > n);
    let (c, f) = fault(&w);
    assert_eq!((c, f), (1, json!("checkpoint_mismatch")));
    // The next act is refused (it would take a checkpoint over the loss); the ones cut
    // are still missing.
    let o = w.run(&["grant", "p6", "echo", "verb.exec.read"]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch")),
        "{v}"
    );
    let detail = v["broken"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("checkpoints were removed from it"),
        "{detail}"
    );
}

#[test]
fn a_checkpoint_deleted_from_the_middle_of_the_witness_is_a_fault() {
    let (w, wdir) = five_grants();
    let lines = std::fs::read_to_string(wfile(&wdir))
        .unwrap()
        .lines()
        .count();
    assert!(lines >= 5, "{lines}");
    // The line before the last act's two: the checkpoint of the fourth grant's intent
    // (the line after it, that of its `act made`, is best effort and stays).
    drop_witness_lines(&wdir, |i, n| i == n - 3);
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("checkpoint_mismatch")),
        "{v}"
    );
    let detail = v["broken"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("holds no checkpoint of the act"),
        "{detail}"
    );
}

/// `hcp ARGS` started now, not waited for.
fn spawn(w: &World, args: &[&str]) -> std::process::Child {
    std::process::Command::new(common::hcp_bin())
        .env_clear()
        .env("HOME", &w.home)
        .env("HCP_HOME", &w.hcp_home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("NO_COLOR", "1")
        .current_dir(&w.work)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// The witness the trail's last `witness` record names (`directory DIR`).
fn trail_witness(w: &World) -> Value {
    let text = std::fs::read_to_string(w.hcp_home.join("audit/audit.jsonl")).unwrap();
    text.lines()
        .rev()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["act"] == json!("witness"))
        .map(|r| r["changed"]["witness"].clone())
        .unwrap()
}

#[test]
fn acts_and_changes_of_the_witness_made_at_once_are_each_right() {
    let (w, _wdir) = witnessed();
    let a = w.root().join("witness-a");
    let b = w.root().join("witness-b");
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    let principals = ["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"];
    for (round, p) in principals.iter().enumerate() {
        let mut running = vec![
            spawn(&w, &["config", "set", "audit.witness", a.to_str().unwrap()]),
            spawn(&w, &["config", "set", "audit.witness", b.to_str().unwrap()]),
            spawn(&w, &["grant", p, "echo", "verb.exec.read"]),
            spawn(&w, &["session", "start", "--principal", p]),
        ];
        // A call never waits for the witness, and is never refused by it.
        running.push(spawn(&w, &["exec", "echo.say", "meanwhile"]));
        for c in running {
            let o = c.wait_with_output().unwrap();
            assert_eq!(code(&o), 0, "round {round}: {}", w.render(&o));
        }
        // Every act recorded and witnessed by the witness it was made under: the trail
        // holds against every witness it named, and `config.json` names the last one.
        let (c, v) = verify_json(&w);
        assert_eq!((c, &v["broken"]), (0, &Value::Null), "round {round}: {v}");
        let config: Value =
            serde_json::from_str(&std::fs::read_to_string(w.hcp_home.join("config.json")).unwrap())
                .unwrap();
        let named = format!("directory {}", config["audit"]["witness"].as_str().unwrap());
        assert_eq!(trail_witness(&w), json!(named), "round {round}");
    }
    // And the next act after them all is made.
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    assert_eq!(verify_json(&w).0, 0);
}

#[test]
fn a_lowered_or_removed_witnessed_cache_does_not_let_an_act_write_over_a_gap() {
    let cache = |w: &World| w.hcp_home.join("audit/witnessed.json");
    for how in ["lowered", "removed"] {
        let (w, wdir) = five_grants();
        let file = wfile(&wdir);
        // The witness cut to its first two lines, and `audit/witnessed.json` made to agree
        // (its count lowered to what is left, or the file removed).
        let whole = std::fs::read_to_string(&file).unwrap();
        let first: String = whole.lines().take(2).map(|l| format!("{l}\n")).collect();
        std::fs::write(&file, &first).unwrap();
        let left: Value = serde_json::from_str(first.lines().last().unwrap()).unwrap();
        if how == "lowered" {
            let mut c: Value =
                serde_json::from_str(&std::fs::read_to_string(cache(&w)).unwrap()).unwrap();
            c["count"] = left["count"].clone();
            std::fs::write(cache(&w), format!("{c}\n")).unwrap();
        } else {
            std::fs::remove_file(cache(&w)).unwrap();
        }
        let before = records(&w);
        let o = w.run(&["grant", "zed", "echo", "verb.exec.read"]);
        assert_eq!(code(&o), 1, "{how}: {}", w.render(&o));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(
            err.contains("code: checkpoint_mismatch")
                && err.contains(&format!(
                    "holds checkpoints of at most {} records",
                    left["count"]
                ))
                && err.contains("checkpoints were removed from it"),
            "{how}: {err}"
        );
        assert_eq!(records(&w), before, "{how}: a refused act writes no record");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), first, "{how}");
        // Deleted as well: still refused, and the file is not started again.
        std::fs::remove_file(&file).unwrap();
        let _ = std::fs::remove_file(cache(&w));
        let o = w.run(&["grant", "zed", "echo", "verb.exec.read"]);
        assert_eq!(code(&o), 1, "{how}: {}", w.render(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("holds no checkpoint of this store"),
            "{how}: {}",
            w.render(&o)
        );
        assert!(!file.exists(), "{how}");
        assert_eq!(records(&w), before, "{how}");
    }
}

#[test]
fn a_witness_named_by_an_act_killed_before_its_first_checkpoint_is_noted_so() {
    use std::os::unix::process::ExitStatusExt;
    let (w, _wdir) = witnessed();
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    // `hcp config set audit.witness A` killed once the record naming A is synced (its
    // second act record), before A took its first checkpoint; then A's directory is
    // removed: it never held this store's file.
    let a = w.root().join("witness-a");
    std::fs::create_dir(&a).unwrap();
    let o = w
        .hcp()
        .env("HCP_TEST_ABORT_AT", "authority_synced:2")
        .args(["config", "set", "audit.witness", a.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.signal(), Some(9), "{}", w.render(&o));
    assert_eq!(
        trail_witness(&w),
        json!(format!("directory {}", a.display()))
    );
    assert_eq!(std::fs::read_dir(&a).unwrap().count(), 0, "A holds nothing");
    std::fs::remove_dir(&a).unwrap();
    // The witness moved on to B by the recorded act, and an act witnessed by B: a crash
    // is never damage, and the note says A never held the trail's checkpoints.
    let b = w.root().join("witness-b");
    std::fs::create_dir(&b).unwrap();
    ok(&w, &["config", "set", "audit.witness", b.to_str().unwrap()]);
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    let r = &v["retired_witnesses"][0];
    assert_eq!(
        r["witness"],
        json!(format!("directory {}", a.display())),
        "{v}"
    );
    assert!(
        r["why"]
            .as_str()
            .unwrap()
            .contains("it never held this trail's checkpoints: the act that named it"),
        "{v}"
    );
    assert_eq!(v["interrupted_acts"][0]["act"], json!("config set"), "{v}");
}

#[test]
fn verify_witness_dir_catches_a_key_holders_trail_that_names_no_witness() {
    common::example_bins();
    let w = World::new();
    w.init();
    exec_common::install(&w, &common::gold_pack("echo"));
    ok(&w, &["grant", "agent", "echo", "verb.exec.read"]);
    // A copy of the store from before it had a witness: its trail, keys and all.
    let backup = w.root().join("backup");
    copy_dir(&w.hcp_home, &backup);
    let wdir = w.root().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    ok(
        &w,
        &["config", "set", "audit.witness", wdir.to_str().unwrap()],
    );
    ok(&w, &["grant", "bob", "echo", "verb.exec.read"]);
    ok(&w, &["session", "start", "--principal", "carol"]);

    // Checked against the witness's directory directly, by an absolute or relative path.
    let o = ok(
        &w,
        &["audit", "verify", "--witness", wdir.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.contains(&format!(
            "the trail extends the witness (directory {})",
            wdir.display()
        )) && text.contains(&format!("witness checked: directory {}", wdir.display())),
        "{text}"
    );
    let rel = w
        .hcp()
        .current_dir(w.root())
        .args(["audit", "verify", "--json", "--witness", "witness"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&rel.stdout).unwrap();
    assert_eq!(
        (code(&rel), &v["witnesses_checked"]),
        (0, &json!([format!("directory {}", wdir.display())])),
        "{v}"
    );
    assert!(v.get("witness_note").is_none(), "{v}");

    // Whoever holds the keys puts back the older store (a trail that verifies under its
    // keys and names no witness), with `config.json` naming none: verify alone cannot
    // tell, and says so; pointed at the witness it catches it.
    std::fs::remove_dir_all(&w.hcp_home).unwrap();
    copy_dir(&backup, &w.hcp_home);
    let o = ok(&w, &["audit", "verify"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        text.starts_with("audit trail intact")
            && text.contains("no witness checked: a rewrite by whoever holds the store's keys is caught only against a witness")
            && text.contains("hcp audit verify --witness DIR"),
        "{text}"
    );
    let (c, v) = verify_json(&w);
    assert_eq!((c, &v["witnesses_checked"]), (0, &json!([])), "{v}");
    assert!(
        v["witness_note"]
            .as_str()
            .unwrap()
            .starts_with("no witness checked"),
        "{v}"
    );
    let o = w.run(&[
        "audit",
        "verify",
        "--json",
        "--witness",
        wdir.to_str().unwrap(),
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (code(&o), &v["broken"]["fault"]),
        (1, &json!("rollback")),
        "{v}"
    );

    // A directory that is not a witness of this store, or none at all.
    let other = w.root().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(
        other.join("0123456789abcdef0123456789abcdef.checkpoints"),
        "",
    )
    .unwrap();
    let o = w.run(&["audit", "verify", "--witness", other.to_str().unwrap()]);
    assert_eq!(code(&o), 1, "{}", w.render(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("code: checkpoint_mismatch")
            && err.contains("holds no checkpoint of this store")
            && err.contains("`0123456789abcdef0123456789abcdef`"),
        "{err}"
    );
    let o = w.run(&[
        "audit",
        "verify",
        "--witness",
        w.root().join("none").to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("code: witness_unavailable"));
    // Not with `--checkpoint` as well (a usage error).
    let o = w.run(&[
        "audit",
        "verify",
        "--witness",
        wdir.to_str().unwrap(),
        "--checkpoint",
        "x",
    ]);
    assert_eq!(code(&o), 2, "{}", w.render(&o));
}
