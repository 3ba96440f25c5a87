//! `hcp-example-transit`: the timetable answers, deterministically.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{assert_error, ok_json, run, stdout};
use serde_json::json;

fn transit(args: &[&str]) -> std::process::Output {
    run("transit", &std::env::temp_dir(), args)
}

#[test]
fn find_matches_ids_and_names() {
    let v = ok_json(&transit(&["find", "Central", "--json"]));
    assert_eq!(v["query"], "Central");
    assert_eq!(
        v["places"],
        json!([{ "id": "central", "name": "Central Station", "lines": ["red", "blue"] }])
    );
    let v = ok_json(&transit(&["find", "park", "--json"]));
    assert_eq!(v["places"][0]["id"], "elmpark");
    let v = ok_json(&transit(&["find", "nowhere", "--json"]));
    assert_eq!(v["places"], json!([]));
    let text = stdout(&transit(&["find", "nowhere"]));
    assert_eq!(text, "no place matches `nowhere`\n");
}

#[test]
fn plan_is_time_first_and_feeds_show_and_follow() {
    let v = ok_json(&transit(&["plan", "Central", "Harbor", "--json"]));
    assert_eq!(v["at"], "07:40");
    assert_eq!(v["from"]["id"], "central");
    assert_eq!(v["to"]["id"], "harbor");
    let options = v["options"].as_array().unwrap();
    assert_eq!(options.len(), 3);
    let ids: Vec<&str> = options.iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "opt-5-central-harbor",
            "opt-6-central-harbor",
            "opt-7-central-harbor"
        ]
    );
    assert_eq!(options[0]["depart"], "08:06");
    assert_eq!(options[0]["arrive"], "08:18");
    assert_eq!(options[0]["minutes"], 12);
    assert_eq!(options[0]["run"], "run-5");

    let shown = ok_json(&transit(&["show", "opt-5-central-harbor", "--json"]));
    assert_eq!(shown["id"], "opt-5-central-harbor");
    let stops: Vec<&str> = shown["stops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["place"].as_str().unwrap())
        .collect();
    assert_eq!(stops, ["central", "oldtown", "harbor"]);

    let run = ok_json(&transit(&["follow", "run-5", "--json"]));
    assert_eq!(run["state"], "scheduled");
    assert_eq!(run["next"], "northgate");
}

#[test]
fn plan_honours_at_and_limit_and_delays() {
    let v = ok_json(&transit(&[
        "plan",
        "airport",
        "riverside",
        "--at",
        "09:00",
        "--limit=1",
        "--json",
    ]));
    let options = v["options"].as_array().unwrap();
    assert_eq!(options.len(), 1);
    assert_eq!(options[0]["depart"], "09:10");
    assert_eq!(options[0]["delay_min"], 4);
    assert_eq!(options[0]["expected_arrive"], "09:45");
    // No run leaves after the last one: an empty list, not an error.
    let v = ok_json(&transit(&[
        "plan",
        "airport",
        "riverside",
        "--at",
        "23:00",
        "--json",
    ]));
    assert_eq!(v["options"], json!([]));
}

#[test]
fn status_and_follow_observe_the_fixed_clock() {
    let v = ok_json(&transit(&["status", "--json"]));
    assert_eq!(v["at"], "07:40");
    let blue = &v["lines"][1];
    assert_eq!(blue["line"], "blue");
    assert_eq!(blue["state"], "delayed");
    assert_eq!(blue["active_runs"], json!(["run-11"]));
    assert_eq!(v["lines"][0]["active_runs"], json!(["run-4"]));

    let r = ok_json(&transit(&["follow", "run-4", "--json"]));
    assert_eq!(r["state"], "running");
    assert_eq!(r["next"], "oldtown");
    let passed: Vec<bool> = r["stops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["passed"].as_bool().unwrap())
        .collect();
    assert_eq!(passed, [true, true, false, false]);
    let r = ok_json(&transit(&["follow", "run-4", "--at", "08:00", "--json"]));
    assert_eq!(r["state"], "arrived");
}

#[test]
fn the_same_question_gets_the_same_answer() {
    let a = transit(&["plan", "central", "riverside", "--json"]);
    let b = transit(&["plan", "central", "riverside", "--json"]);
    assert_eq!(a.stdout, b.stdout);
    assert!(!a.stdout.is_empty());
}

#[test]
fn text_form_is_readable() {
    let text = stdout(&transit(&["plan", "Central", "Harbor"]));
    assert!(
        text.starts_with("Central Station -> Harbor after 07:40\n"),
        "{text}"
    );
    assert!(text.contains("opt-5-central-harbor  Red Line  08:06 -> 08:18  (12 min)"));
}

#[test]
fn errors_are_clear_and_non_zero() {
    assert_error(&transit(&["plan", "a", "harbor"]), 1, "`a` is ambiguous");
    assert_error(
        &transit(&["plan", "zzz", "harbor"]),
        1,
        "no place matches `zzz`",
    );
    assert_error(&transit(&["plan", "harbor", "harbor"]), 1, "both the start");
    assert_error(&transit(&["show", "opt-1"]), 1, "no option `opt-1`");
    assert_error(&transit(&["show", "opt-5-harbor-central"]), 1, "no option");
    assert_error(&transit(&["follow", "run-99"]), 1, "no run `run-99`");
    assert_error(&transit(&["plan", "central"]), 2, "missing argument <to>");
    assert_error(&transit(&["status", "--at", "24:00"]), 2, "not HH:MM");
    assert_error(&transit(&["find", "--bogus"]), 2, "unknown option");
    assert_error(&transit(&["find", "-x"]), 2, "unknown option `-x`");
    assert_error(&transit(&["teleport"]), 2, "unknown command `teleport`");
    assert_error(&transit(&[]), 2, "missing command");
}
