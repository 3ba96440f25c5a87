//! `hcp policy replay CANDIDATE [--since TIME] [--json]` (RUNTIME §11, issue 28): the
//! recorded calls decided again under a candidate, from what the trail keeps (the
//! session's role, attributes and `can_view` are in each record); a rule that needs the
//! raw arguments is undecidable for that call, never guessed. Bad input: a candidate
//! that does not load, `--since` malformed, a trail from another policy, a damaged trail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod exec_common;

use common::World;
use exec_common::{audit_records, exec_json_env, status};
use serde_json::{Value, json};

const POLICY: &str = "schema_version: histos.policy/0.1
tools:
  walprobe.mark:
    access: write
    args:
      path: {type: string}
      text: {type: string}
  walprobe.big:
    args:
      bytes: {type: string}
roles:
  agent:
    allow: [walprobe.mark, walprobe.big]
  guest:
    allow: []
";

/// The candidate: the agent loses `walprobe.big`, the guest gains `walprobe.mark`.
const CANDIDATE: &str = "schema_version: histos.policy/0.1
tools:
  walprobe.mark:
    access: write
    args:
      path: {type: string}
      text: {type: string}
  walprobe.big:
    args:
      bytes: {type: string}
roles:
  agent:
    allow: [walprobe.mark]
  guest:
    allow: [walprobe.mark]
";

fn world() -> (World, String, String) {
    let w = exec_common::world(&["walprobe"]);
    std::fs::write(w.hcp_home.join("policy.yaml"), POLICY).unwrap();
    for p in ["agent", "guest"] {
        exec_common::grant(&w, p, "walprobe", &["verb.exec.read", "verb.exec.write"]);
    }
    let agent = exec_common::session(
        &w,
        "agent",
        &[
            "--role",
            "agent",
            "--attr",
            "team=blue",
            "--can-view",
            "pii",
        ],
    );
    let guest = exec_common::session(&w, "guest", &["--role", "guest"]);
    let call = |token: &str, args: &[&str], expect: i32| {
        let (out, _) = exec_json_env(&w, args, &[("HCP_SESSION", token)]);
        assert_eq!(status(&out), expect, "{}", w.render(&out));
    };
    call(&agent, &["walprobe.mark", "--path", "m1", "--text", "x"], 0);
    call(&agent, &["walprobe.big", "3"], 0);
    call(
        &guest,
        &["walprobe.mark", "--path", "m2", "--text", "x"],
        77,
    );
    // The owner's call and a refusal before the runtime policy: not the policy's.
    let (out, _) = exec_json_env(&w, &["walprobe.big", "2"], &[]);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    call(&agent, &["walprobe.big", "3", "--tenant", "x"], 65);
    (w, agent, guest)
}

fn replay_json(w: &World, args: &[&str]) -> Value {
    let mut a = vec!["policy", "replay"];
    a.extend_from_slice(args);
    a.push("--json");
    let out = w.run(&a);
    assert_eq!(status(&out), 0, "{}", w.render(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn groups<'a>(v: &'a Value, change: &str) -> Vec<(&'a str, &'a str, &'a str, u64)> {
    v["groups"][change]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|g| {
                    (
                        g["tool"].as_str().unwrap(),
                        g["principal"].as_str().unwrap(),
                        g["why"].as_str().unwrap(),
                        g["count"].as_u64().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_records_keep_the_session_facts_replay_reads() {
    let (w, _, _) = world();
    let recs = audit_records(&w);
    let intent = recs
        .iter()
        .find(|r| r["kind"] == "intent" && r["principal"] == "agent")
        .unwrap();
    assert_eq!(intent["role"], "agent");
    assert_eq!(intent["attributes"], json!({"team": "blue"}));
    assert_eq!(intent["can_view"], json!(["pii"]));
    assert!(intent["session"].as_str().unwrap().starts_with("sha256:"));
    let owner = recs
        .iter()
        .find(|r| r["kind"] == "intent" && r["principal"] == "owner")
        .unwrap();
    assert!(owner.get("session").is_none() && owner.get("role").is_none());
}

#[test]
fn replay_names_what_would_now_be_refused_allowed_or_cannot_be_decided() {
    let (w, _, _) = world();
    let cand = w.root().join("candidate.yaml");
    std::fs::write(&cand, CANDIDATE).unwrap();
    let v = replay_json(&w, &[cand.to_str().unwrap()]);
    assert_eq!(v["calls"], 5, "{v}");
    assert_eq!(
        groups(&v, "now_refused"),
        [("walprobe.big", "agent", "rbac", 1)],
        "{v}"
    );
    // The guest's call never passed its argument checks: the trail keeps only their
    // digest, so allowing the guest is not decidable for it.
    let undecidable = groups(&v, "undecidable");
    assert_eq!(undecidable.len(), 1, "{v}");
    assert_eq!(
        (undecidable[0].0, undecidable[0].1),
        ("walprobe.mark", "guest")
    );
    assert!(undecidable[0].2.contains("keyed digest"), "{v}");
    assert_eq!(
        groups(&v, "unchanged"),
        [("walprobe.mark", "agent", "allow", 1)]
    );
    assert_eq!(
        v["not_governed"], 2,
        "the owner's call and the arguments refusal"
    );
    assert_eq!(v["policies"][0]["in_force"], true);
    // The text form says the same by tool and principal.
    let out = w.run(&["policy", "replay", cand.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("now refused: 1"), "{text}");
    assert!(text.contains("walprobe.big  agent  1×  rbac"), "{text}");
    assert!(text.contains("undecidable: 1"), "{text}");
    // The policy in force replayed over itself changes nothing it can decide.
    let same = replay_json(&w, &[w.hcp_home.join("policy.yaml").to_str().unwrap()]);
    assert_eq!(
        (&same["now_refused"], &same["now_allowed"]),
        (&json!(0), &json!(0))
    );
}

#[test]
fn since_limits_the_window_and_a_malformed_one_is_refused() {
    let (w, _, _) = world();
    let cand = w.root().join("candidate.yaml");
    std::fs::write(&cand, CANDIDATE).unwrap();
    let v = replay_json(&w, &[cand.to_str().unwrap(), "--since", "1h"]);
    assert_eq!(v["calls"], 5);
    let v = replay_json(
        &w,
        &[cand.to_str().unwrap(), "--since", "2999-01-01T00:00:00Z"],
    );
    assert_eq!(v["calls"], 0);
    let out = w.run(&[
        "policy",
        "replay",
        cand.to_str().unwrap(),
        "--since",
        "yesterday",
    ]);
    let text = w.render(&out);
    assert_eq!(status(&out), 2, "{text}");
    assert!(text.contains("code: bad_since"), "{text}");
}

#[test]
fn a_candidate_that_does_not_load_is_refused_with_its_policy_code_and_place() {
    let (w, _, _) = world();
    let cand = w.root().join("broken.yaml");
    std::fs::write(
        &cand,
        CANDIDATE.replace("    args:\n      bytes", "    argz:\n      bytes"),
    )
    .unwrap();
    let out = w.run(&["policy", "replay", cand.to_str().unwrap()]);
    let text = w.render(&out);
    assert_eq!(status(&out), 1, "{text}");
    assert!(text.contains("does not load"), "{text}");
    assert!(text.contains("broken.yaml"), "{text}");
    assert!(text.contains("code: unknown_key"), "{text}");
    assert!(
        text.contains("tools.walprobe.big"),
        "the place of the fault: {text}"
    );
    assert!(text.contains("did you mean `args`"), "{text}");
    // A candidate that is not YAML at all: its line and column.
    std::fs::write(&cand, "schema_version: histos.policy/0.1\ntools: [\n").unwrap();
    let out = w.run(&["policy", "replay", cand.to_str().unwrap()]);
    let text = w.render(&out);
    assert_eq!(status(&out), 1, "{text}");
    assert!(
        text.contains("line 2 column 8"),
        "the line of the fault: {text}"
    );
}

#[test]
fn a_trail_from_another_policy_is_said_and_its_argument_checks_not_carried_over() {
    let (w, _, _) = world();
    // The policy in force changes after the calls: they were decided under another one.
    std::fs::write(
        w.hcp_home.join("policy.yaml"),
        POLICY.replace(
            "  guest:\n    allow: []\n",
            "  guest:\n    allow: [walprobe.big]\n",
        ),
    )
    .unwrap();
    let cand = w.root().join("candidate.yaml");
    std::fs::write(&cand, POLICY).unwrap();
    let v = replay_json(&w, &[cand.to_str().unwrap()]);
    assert_eq!(v["policies"][0]["in_force"], false, "{v}");
    // The agent's allowed calls cannot be carried over: undecidable, not guessed.
    assert!(
        groups(&v, "undecidable")
            .iter()
            .any(|g| g.0 == "walprobe.mark" && g.1 == "agent"),
        "{v}"
    );
    let out = w.run(&["policy", "replay", cand.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("decided under another policy"), "{text}");
}

#[test]
fn a_damaged_trail_is_refused_naming_the_record() {
    let (w, _, _) = world();
    let trail = w.hcp_home.join("audit/audit.jsonl");
    let text = std::fs::read_to_string(&trail).unwrap();
    std::fs::write(&trail, text.replacen("\"agent\"", "\"agenT\"", 1)).unwrap();
    let cand = w.root().join("candidate.yaml");
    std::fs::write(&cand, CANDIDATE).unwrap();
    let out = w.run(&["policy", "replay", cand.to_str().unwrap()]);
    let text = w.render(&out);
    assert_eq!(status(&out), 1, "{text}");
    assert!(text.contains("hash_mismatch"), "{text}");
}
