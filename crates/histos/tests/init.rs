//! Starting policies written from tool contracts (RUNTIME §7 `hcp policy init`): they
//! load, they are byte-stable, and they round-trip.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use histos::init::{Access, InitTool, PolicyInit};
use histos::projection;
use histos::{Call, Context, Effect, Engine, Map, Policy, Principal, Rule, Value};
use serde_json::json;

fn args(input: serde_json::Value) -> histos::model::Schema {
    projection::project(&Value::from(input), "t", "args").unwrap()
}

fn tools() -> Vec<InitTool> {
    vec![
        InitTool {
            name: "transit.find".into(),
            access: Access::Read,
            args: Some(args(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[\\w .,'-]+$"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50},
                    "mode": {"type": "string", "enum": ["yes", "null", "1", "a: b", "on", "naïve \"q\"", "~"]},
                    "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e20, "multipleOf": 1e-05},
                    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4}
                },
                "required": ["query"]
            }))),
            description: Some("Find stops by name.\nSecond line is not shown.".into()),
            confirm: false,
            source: "pack transit 0.1.0, verb find".into(),
        },
        InitTool {
            name: "mail.send".into(),
            access: Access::Write,
            args: Some(args(json!({
                "type": "object",
                "properties": {"to": {"type": "string"}, "body": {"type": ["string", "null"]}},
                "required": ["to"]
            }))),
            description: None,
            confirm: true,
            source: "pack mail 1.2.0, verb send".into(),
        },
        InitTool {
            name: "probe.ping".into(),
            access: Access::Read,
            args: None,
            description: Some("\u{202e}evil\u{7} text".into()),
            confirm: false,
            source: "pack probe".into(),
        },
    ]
}

fn render(role: Option<&str>) -> String {
    PolicyInit {
        header: vec!["Runtime policy written from the active packs.".into()],
        tools: tools(),
        role: role.map(str::to_string),
    }
    .render()
    .unwrap()
}

#[test]
fn the_starting_policy_loads_is_sorted_and_commented() {
    let text = render(None);
    let p = Policy::load_yaml(&text).unwrap();
    assert_eq!(p.tools.len(), 3);
    assert!(p.roles.is_empty(), "nothing is granted without a role");
    let names: Vec<&str> = p.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["mail.send", "probe.ping", "transit.find"]);
    assert!(text.starts_with("# Runtime policy written from the active packs.\n"));
    assert!(
        text.contains(
            "  # transit.find: pack transit 0.1.0, verb find; read. Find stops by name.\n"
        )
    );
    assert!(text.contains("  # mail.send: pack mail 1.2.0, verb send; write, confirm-gated\n"));
    assert!(!text.contains("Second line"));
    assert!(!text.contains('\u{202e}') && !text.contains('\u{7}'));
    let send = p.tool("mail.send").unwrap();
    assert_eq!(send.access, "write");
    assert!(send.requires_confirmation);
    assert!(!send.args.as_ref().unwrap().field("body").unwrap().required);
    let find = p.tool("transit.find").unwrap().args.as_ref().unwrap();
    let mode = find.field("mode").unwrap().enum_values.clone().unwrap();
    let want: Vec<Value> = ["yes", "null", "1", "a: b", "on", "naïve \"q\"", "~"]
        .iter()
        .map(|s| Value::Str((*s).into()))
        .collect();
    assert_eq!(
        mode, want,
        "every enum string reads back as the same string"
    );
    let ratio = find.field("ratio").unwrap();
    assert_eq!(ratio.multiple_of, Some(Value::Float(1e-05)));
    assert_eq!(ratio.maximum, Some(Value::Float(1e20)));
    assert_eq!(
        p.tool("probe.ping")
            .unwrap()
            .args
            .as_ref()
            .unwrap()
            .fields
            .len(),
        0
    );
}

#[test]
fn the_starting_policy_is_byte_stable_and_round_trips() {
    let a = render(Some("agent"));
    assert_eq!(a, render(Some("agent")));
    let mut reversed = tools();
    reversed.reverse();
    let b = PolicyInit {
        header: vec!["Runtime policy written from the active packs.".into()],
        tools: reversed,
        role: Some("agent".into()),
    }
    .render()
    .unwrap();
    assert_eq!(a, b, "input order does not matter");
    // Load it, write it again from what loaded: the same bytes and the same hash.
    let p = Policy::load_yaml(&a).unwrap();
    let again: Vec<InitTool> = tools()
        .into_iter()
        .map(|t| {
            let loaded = p.tool(&t.name).unwrap();
            InitTool {
                args: loaded.args.clone(),
                confirm: loaded.requires_confirmation,
                ..t
            }
        })
        .collect();
    let c = PolicyInit {
        header: vec!["Runtime policy written from the active packs.".into()],
        tools: again,
        role: Some("agent".into()),
    }
    .render()
    .unwrap();
    assert_eq!(a, c);
    assert_eq!(
        Policy::load_yaml(&c).unwrap().content_hash(),
        p.content_hash()
    );
}

#[test]
fn with_a_role_every_tool_is_granted_and_decides() {
    let p = Policy::load_yaml(&render(Some("agent"))).unwrap();
    assert!(p.allows("agent", "transit.find") && p.allows("agent", "mail.send"));
    let mut a = Map::new();
    a.insert("query", Value::Str("Central".into()));
    let ctx = Context::default();
    let d = Engine::pre(
        &p,
        Some(&Principal::new("agent")),
        None,
        &Call {
            tool: "transit.find".into(),
            args: a.clone(),
        },
        &ctx,
    );
    assert_eq!((d.effect, d.rule), (Effect::Allow, Rule::Allow));
    let mut m = Map::new();
    m.insert("to", Value::Str("a@example.com".into()));
    let d = Engine::pre(
        &p,
        Some(&Principal::new("agent")),
        None,
        &Call {
            tool: "mail.send".into(),
            args: m,
        },
        &ctx,
    );
    assert_eq!(d.rule, Rule::RequiresConfirmation);
    let d = Engine::pre(
        &p,
        Some(&Principal::new("other")),
        None,
        &Call {
            tool: "transit.find".into(),
            args: a,
        },
        &ctx,
    );
    assert_eq!(d.rule, Rule::Rbac);
}

#[test]
fn names_the_format_refuses_are_reported() {
    let mut t = tools();
    t[0].name = "bad name".into();
    let e = PolicyInit {
        tools: t,
        ..Default::default()
    }
    .render()
    .unwrap_err();
    assert!(e.message.contains("not a valid tool name"), "{e}");
    let mut t = tools();
    t[1].name = t[0].name.clone();
    let e = PolicyInit {
        tools: t,
        ..Default::default()
    }
    .render()
    .unwrap_err();
    assert!(e.message.contains("listed twice"), "{e}");
    let empty = PolicyInit::default().render().unwrap();
    assert!(Policy::load_yaml(&empty).unwrap().tools.is_empty());
}
