//! Stores made on purpose, the witness, the audit's reserve and `outcome_deferred`
//! through the built `hcp` (RUNTIME §4, §5.4, §6; issues 26 and 27): each bad input caught
//! with its code, nothing lost.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::code;
mod exec_common;

use common::World;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;

/// `hcp …` with another `HCP_HOME`.
fn run_in(w: &World, home: &Path, args: &[&str]) -> std::process::Output {
    w.hcp().env("HCP_HOME", home).args(args).output().unwrap()
}

#[test]
fn a_typod_home_is_no_store_for_every_command_and_nothing_is_made() {
    common::example_bins();
    let w = World::new();
    exec_common::install(&w, &common::gold_pack("echo"));
    let typo = w.root().join("hcp-hmoe");
    for args in [
        &["exec", "echo.say", "a"][..],
        &["list"],
        &["show", "echo"],
        &["session", "list"],
        &["session", "start", "--principal", "agent"],
        &["grant", "agent", "echo", "verb.exec.read"],
        &["grant", "--list"],
        &["audit", "verify"],
        &["audit", "tail"],
        &["activate", "echo"],
        &["uninstall", "echo"],
        &["approvals"],
    ] {
        let o = run_in(&w, &typo, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(code(&o), 66, "{args:?}: {}", w.render(&o));
        assert!(
            err.contains("code: no_store") && err.contains("hcp-hmoe") && err.contains("hcp init"),
            "{args:?}: {err}"
        );
        assert!(!typo.exists(), "{args:?} made a store");
    }
    // The JSON face answers with the refusal object on stdout.
    let o = run_in(&w, &typo, &["exec", "--json", "echo.say", "a"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((code(&o), &v["code"]), (66, &json!("no_store")));
    // MCP: no store, no server.
    let o = w
        .hcp()
        .env("HCP_HOME", &typo)
        .arg("mcp")
        .write_stdin("")
        .output()
        .unwrap();
    assert_eq!(code(&o), 66, "{}", w.render(&o));
    // Doctor says so and exits 1.
    let o = run_in(&w, &typo, &["doctor"]);
    assert_eq!(code(&o), 1);
    // Lint and pack promote need no store.
    let o = run_in(
        &w,
        &typo,
        &["lint", common::gold_pack("echo").to_str().unwrap()],
    );
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(!typo.exists());
    // A directory that is no store is none either.
    std::fs::create_dir(&typo).unwrap();
    let o = run_in(&w, &typo, &["list"]);
    assert_eq!(code(&o), 66);
    assert_eq!(std::fs::read_dir(&typo).unwrap().count(), 0);
    // The store that is one works.
    let o = w.run(&["exec", "echo.say", "a"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
}

#[test]
fn init_makes_the_store_whole_and_again_changes_nothing() {
    let w = World::new();
    let o = w.run(&["init"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("made the store"));
    let marker: Value =
        serde_json::from_slice(&std::fs::read(w.hcp_home.join("store.json")).unwrap()).unwrap();
    assert_eq!(marker["format"], json!(2));
    for k in [
        "audit/chain.key",
        "audit/digest.secret",
        "audit/checkpoint.key",
    ] {
        assert!(w.hcp_home.join(k).exists(), "{k}");
    }
    let trail = std::fs::read(w.hcp_home.join("audit/audit.jsonl")).unwrap();
    let o = w.run(&["init"]);
    assert_eq!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stdout).contains("a store already"));
    assert_eq!(
        std::fs::read(w.hcp_home.join("audit/audit.jsonl")).unwrap(),
        trail
    );
    let v: Value = serde_json::from_slice(&w.run(&["audit", "tail", "--json"]).stdout).unwrap();
    assert_eq!(
        (&v[0]["act"], &v[0]["changed"]["store"]),
        (&json!("init"), &marker["store_id"])
    );
    // Nothing left beside it.
    let left: Vec<String> = std::fs::read_dir(w.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".init-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // A session cannot make a store.
    let other = w.root().join("other");
    let o = w
        .hcp()
        .env("HCP_HOME", &other)
        .env("HCP_SESSION", "hcp_x")
        .arg("init")
        .output()
        .unwrap();
    assert_eq!(code(&o), 77, "{}", w.render(&o));
    assert!(!other.exists());
}

#[test]
fn init_into_an_existing_empty_directory_keeps_the_audit_the_owners_only() {
    use std::os::unix::fs::PermissionsExt;
    let w = World::new();
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    std::fs::set_permissions(&w.hcp_home, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = w.run(&["init"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let mode = std::fs::metadata(w.hcp_home.join("audit"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o700);
    let o = w.run(&["doctor"]);
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains("go-rwx"),
        "{}",
        w.render(&o)
    );
}

#[test]
fn an_install_of_a_pack_lint_refuses_makes_no_store() {
    let w = World::new();
    let bad = w.root().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(bad.join("surface.json"), "{").unwrap();
    let o = w.run(&["install", bad.to_str().unwrap()]);
    assert_ne!(code(&o), 0);
    assert!(!w.hcp_home.exists(), "{}", w.render(&o));
}

#[test]
fn an_install_that_makes_a_store_says_so_and_one_into_a_store_does_not() {
    common::example_bins();
    let w = World::new();
    let typo = w.root().join("hcp-hmoe");
    let echo = common::gold_pack("echo");
    let o = run_in(&w, &typo, &["install", echo.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(
        err.contains("was not a store: made one there")
            && err.contains("hcp-hmoe")
            && err.contains("hcp init")
            && err.contains("HCP_HOME"),
        "{err}"
    );
    assert!(typo.join("store.json").is_file());
    // Into the store it made, the next install says nothing of stores.
    let o = run_in(&w, &typo, &["install", "--force", echo.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("was not a store"),
        "{}",
        w.render(&o)
    );
}

fn write_config(w: &World, v: &Value) {
    std::fs::create_dir_all(&w.hcp_home).unwrap();
    std::fs::write(w.hcp_home.join("config.json"), v.to_string()).unwrap();
}

fn verify_json(w: &World) -> (i32, Value) {
    let o = w.run(&["audit", "verify", "--json"]);
    (code(&o), serde_json::from_slice(&o.stdout).unwrap())
}

#[test]
fn the_witness_takes_the_init_checkpoint_and_verify_checks_against_it() {
    common::example_bins();
    let w = World::new();
    let wdir = w.root().join("witness");
    write_config(&w, &json!({"audit": {"witness": wdir}}));
    // A witness that cannot take a checkpoint: the act does not happen.
    let o = w.run(&["init"]);
    assert_eq!(code(&o), 74, "{}", w.render(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("witness_unavailable"));
    assert!(!w.hcp_home.join("store.json").exists());
    assert!(!w.hcp_home.join("audit").exists());
    std::fs::create_dir(&wdir).unwrap();
    w.init();
    let files: Vec<_> = std::fs::read_dir(&wdir).unwrap().collect();
    assert_eq!(files.len(), 1);
    let o = w.run(&["audit", "verify"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        code(&o) == 0
            && text.contains("extends the witness (directory")
            && text.contains("0 records past it"),
        "{text}"
    );
    exec_common::install(&w, &common::gold_pack("echo"));
    for i in 0..2 {
        let o = w.run(&["exec", "echo.say", &format!("{i}")]);
        assert_eq!(code(&o), 0, "{}", w.render(&o));
    }
    let (c, v) = verify_json(&w);
    assert_eq!((c, &v["against"]["past"]), (0, &json!(4)), "{v}");
    // The witness gone: calls go on, verify cannot check against it.
    std::fs::remove_dir_all(&wdir).unwrap();
    let o = w.run(&["exec", "echo.say", "still"]);
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["broken"]["fault"]),
        (1, &json!("witness_unavailable"))
    );
}

#[test]
fn the_hundredth_record_is_witnessed_after_its_call_has_answered() {
    common::example_bins();
    let w = World::new();
    let wdir = w.root().join("witness");
    std::fs::create_dir(&wdir).unwrap();
    write_config(&w, &json!({"audit": {"witness": wdir}}));
    w.init();
    // Record 2: the `witness` record naming the directory (its checkpoint is the
    // witness's first); record 3: the first call records the `config.json` it finds (an
    // act of authority, witnessed); records 4 to 99: refused calls, one record each.
    for _ in 4..100 {
        let o = w.run(&["exec", "nosuch.verb"]);
        assert_eq!(code(&o), 66);
    }
    let witnessed = || -> Vec<Value> {
        let f = std::fs::read_dir(&wdir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::read_to_string(f)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    assert_eq!(
        witnessed().len(),
        2,
        "only the witness record's and the config's so far"
    );
    let o = w.run(&["exec", "nosuch.verb"]);
    assert_eq!(code(&o), 66);
    let taken = witnessed();
    assert_eq!(taken.len(), 3);
    assert_eq!(taken[2]["count"], json!(100));
    let (c, v) = verify_json(&w);
    assert_eq!((c, &v["against"]["count"]), (0, &json!(100)), "{v}");
}

#[test]
fn an_outcome_that_cannot_be_written_answers_the_childs_result_marked_deferred() {
    common::example_bins();
    let w = World::new();
    exec_common::install(&w, &common::gold_pack("echo"));
    let o = w
        .hcp()
        .env("HCP_TEST_FAIL_AT", "outcome_write")
        .args(["exec", "--json", "echo.say", "ran"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(code(&o), 0, "the child's own status: {}", w.render(&o));
    assert_eq!(v["ok"], json!(true), "{v}");
    assert!(v["stdout"].as_str().unwrap().contains("ran"), "{v}");
    assert_eq!(
        v["outcome_deferred"]["code"],
        json!("audit_unavailable"),
        "{v}"
    );
    // Text mode: the child's output and a note.
    let o = w
        .hcp()
        .env("HCP_TEST_FAIL_AT", "outcome_write")
        .args(["exec", "echo.say", "again"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 0);
    assert!(String::from_utf8_lossy(&o.stdout).contains("again"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("outcome_deferred"));
    // The trail shows both calls interrupted, and is sound.
    let (c, v) = verify_json(&w);
    assert_eq!(c, 0, "{v}");
    assert_eq!(v["interrupted"].as_array().unwrap().len(), 2, "{v}");
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_child_that_fills_the_stores_disk_never_makes_its_outcome_unwritable() {
    common::example_bins();
    if !is_root() {
        return common::skip::skip("a small tmpfs for the store needs root to mount");
    }
    let w = World::new();
    let walprobe = exec_common::fixture("walprobe");
    // The store and the workdir on a 4 MiB tmpfs, in a mount namespace of the test's own
    // (gone with it), with a 32 KiB reserve so that it runs short in a few calls.
    let script = r#"
        full="$ROOT/full"; mkdir -p "$full"
        mount -t tmpfs -o size=4m tmpfs "$full"
        export HCP_HOME="$full/store" HCP_TEST_RESERVE_BYTES=32768
        mkdir "$full/work"; cd "$full/work"
        "$HCP" install --activate "$WALPROBE" > /dev/null
        "$HCP" exec --json walprobe.argv warm > "$ROOT/warm.json"
        set +e
        "$HCP" exec --json walprobe.fill --path filler > "$ROOT/fill.json"; echo $? > "$ROOT/fill-status"
        "$HCP" audit verify --json > "$ROOT/verify-1.json"; echo $? > "$ROOT/verify-1-status"
        i=0
        while [ $i -lt 200 ]; do
            "$HCP" exec --json walprobe.argv "call-$i" > "$ROOT/call.json"; s=$?
            [ $s -eq 0 ] || break
            i=$((i+1))
        done
        echo $i > "$ROOT/calls"; echo $s > "$ROOT/refused-status"; cp "$ROOT/call.json" "$ROOT/refused.json"
        "$HCP" doctor --json > "$ROOT/doctor.json"; echo $? > "$ROOT/doctor-status"
        "$HCP" audit verify --json > "$ROOT/verify-2.json"; echo $? > "$ROOT/verify-2-status"
        rm -f filler
        "$HCP" exec --json walprobe.argv after > "$ROOT/after.json"; echo $? > "$ROOT/after-status"
        "$HCP" audit verify --json > "$ROOT/verify-3.json"; echo $? > "$ROOT/verify-3-status"
    "#;
    let probe = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return common::skip::skip("no private mount namespace (unshare --mount)");
    }
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-ec", script])
        .env_clear()
        .env("HOME", &w.home)
        .env("PATH", w.path_var())
        .env("LANG", "C")
        .env("HCP", common::hcp_bin())
        .env("ROOT", w.root())
        .env("WALPROBE", &walprobe)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", w.render(&out));
    let root = w.root();
    let read = |f: &str| {
        std::fs::read_to_string(root.join(f))
            .unwrap()
            .trim()
            .to_owned()
    };
    let json_of = |f: &str| -> Value { serde_json::from_str(&read(f)).unwrap() };
    assert_eq!(json_of("warm.json")["ok"], json!(true));
    // The call that filled the disk answers its own result ...
    let fill = json_of("fill.json");
    assert_eq!(read("fill-status"), "0", "{fill}");
    assert!(fill["data"]["bytes"].as_u64().unwrap() > 1 << 20, "{fill}");
    assert!(fill.get("outcome_deferred").is_none(), "{fill}");
    // ... its outcome is in the trail, and the trail is sound.
    let v = json_of("verify-1.json");
    assert_eq!(read("verify-1-status"), "0", "{v}");
    assert_eq!(v["interrupted"], json!([]), "{v}");
    // Calls go on from the reserve, then one is refused before anything runs.
    let calls: u64 = read("calls").parse().unwrap();
    eprintln!("{calls} calls ran from the reserve before one was refused");
    assert!(calls < 200, "the reserve never ran short");
    assert!(calls >= 1, "no call ran from the reserve");
    let refused = json_of("refused.json");
    assert_eq!(
        (read("refused-status").as_str(), refused["code"].as_str()),
        ("74", Some("audit_unavailable")),
        "{refused}"
    );
    assert!(refused["exit_code"].is_null(), "{refused}");
    let doctor = json_of("doctor.json");
    assert_eq!(read("doctor-status"), "1");
    assert!(
        doctor["problems"].to_string().contains("reserve is short"),
        "{doctor}"
    );
    let v = json_of("verify-2.json");
    assert_eq!(read("verify-2-status"), "0", "{v}");
    // Space again: the reserve is refilled, calls run.
    assert_eq!(read("after-status"), "0", "{}", read("after.json"));
    let v = json_of("verify-3.json");
    assert_eq!(
        (read("verify-3-status").as_str(), &v["interrupted"]),
        ("0", &json!([]))
    );
}

#[test]
fn the_bootstrap_packs_verify_reports_the_keyed_chain_not_checked() {
    common::example_bins();
    let w = World::new();
    exec_common::install(&w, &common::gold_pack("hcp-cli"));
    // Its child reads the store without its keys (RUNTIME §5.1): the keyed hashes cannot
    // be checked there; the rest is, and it is sound.
    let o = w.run(&["exec", "--json", "hcp-cli.audit.verify"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(code(&o), 0, "{}", w.render(&o));
    assert_eq!(
        (&v["data"]["ok"], &v["data"]["chain"], &v["data"]["keyed"]),
        (&json!(true), &json!("not_checked"), &json!(false)),
        "{v}"
    );
    // The owner, outside any call, checks it all.
    let (c, v) = verify_json(&w);
    assert_eq!(
        (c, &v["chain"], &v["keyed"]),
        (0, &json!("checked"), &json!(true)),
        "{v}"
    );
}
