//! Loading and refusing documents (RUNTIME §1.3, install's "refuses what it cannot use").

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use hcp_openapi::{ArgIn, Auth, Document, MAX_DOCUMENT_BYTES, OperationError, Version};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

fn parse(v: &Value) -> Result<Document, hcp_openapi::BadOpenapi> {
    Document::parse(v.to_string().as_bytes())
}

fn fault(v: &Value) -> (String, String) {
    let e = parse(v).unwrap_err();
    assert_eq!(e.code(), "bad_openapi");
    (e.pointer, e.message)
}

#[test]
fn both_3_0_and_3_1_load_and_compile_alike() {
    let a = parse(&common::doc("http://127.0.0.1:1", "3.0.3")).unwrap();
    let b = parse(&common::doc("http://127.0.0.1:1", "3.1.0")).unwrap();
    assert_eq!((a.version(), b.version()), (Version::V3_0, Version::V3_1));
    let (oa, ob) = (
        a.operation("echoGet").unwrap(),
        b.operation("echoGet").unwrap(),
    );
    assert_eq!(oa.input_schema(), ob.input_schema());
    let names: Vec<(&str, ArgIn, bool)> = oa
        .arguments()
        .iter()
        .map(|x| (x.name.as_str(), x.location, x.required))
        .collect();
    assert_eq!(
        names,
        vec![
            ("item", ArgIn::Path, true),
            ("status", ArgIn::Query, false),
            ("limit", ArgIn::Query, false),
            ("q", ArgIn::Query, false),
            ("tags", ArgIn::Query, false),
            ("x_trace", ArgIn::Header, false),
        ]
    );
    // The cookie parameter is named `session` (a tenant name, and a cookie): dropped.
    assert_eq!(oa.dropped.len(), 1);
    assert_eq!(
        oa.security.auth,
        Auth::Bearer {
            scheme: "bearer".into()
        }
    );
    let post = a.operation("echoPost").unwrap();
    let names: Vec<&str> = post.arguments().iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, vec!["item", "count", "done", "title"]);
    assert_eq!(
        post.input_schema()["properties"]["limit"],
        Value::Null,
        "only echoGet has limit"
    );
    assert_eq!(
        oa.input_schema()["properties"]["limit"],
        json!({"type": ["integer", "null"], "minimum": 1, "maximum": 100})
    );
}

#[test]
fn yaml_documents_load() {
    let yaml = "openapi: 3.1.0\ninfo: {title: t, version: '1'}\nservers:\n  - url: https://api.example.com/v2\npaths:\n  /items:\n    get:\n      operationId: listItems\n      parameters:\n        - {name: limit, in: query, schema: {type: integer, maximum: 5}}\n      responses:\n        200: {description: ok}\n";
    let d = Document::parse(yaml.as_bytes()).unwrap();
    assert_eq!(d.operation_ids().collect::<Vec<_>>(), vec!["listItems"]);
    assert_eq!(
        d.server(None).unwrap().unwrap().as_str(),
        "https://api.example.com/v2"
    );
    let e = Document::parse(b"openapi: 3.1.0\nopenapi: 3.0.0\n").unwrap_err();
    assert_eq!(e.pointer, "");
}

#[test]
fn not_openapi_3_is_refused_with_its_pointer() {
    assert_eq!(fault(&json!({"swagger": "2.0", "paths": {}})).0, "/swagger");
    let (p, m) = fault(&json!({"openapi": "2.0"}));
    assert_eq!(p, "/openapi");
    assert!(m.contains("not 3.0 or 3.1"), "{m}");
    assert_eq!(fault(&json!({"openapi": "3.2.0"})).0, "/openapi");
    assert_eq!(fault(&json!({"info": {}})).0, "");
    assert_eq!(fault(&json!([1, 2])).0, "");
    let e = Document::parse(b"{\"openapi\": \"3.1.0\", \"openapi\": \"3.1.0\"}").unwrap_err();
    assert!(e.message.contains("duplicate key"), "{}", e.message);
    let e = Document::parse(b"{\"openapi\": ").unwrap_err();
    assert!(e.message.starts_with("not JSON"), "{}", e.message);
    assert!(Document::parse(b"\xff\xfe").is_err());
}

#[test]
fn ref_loops_and_dangling_refs_are_refused() {
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["components"]["schemas"]["A"] = json!({"$ref": "#/components/schemas/B"});
    d["components"]["schemas"]["B"] = json!({"$ref": "#/components/schemas/A"});
    let (p, m) = fault(&d);
    assert_eq!(p, "/components/schemas/A");
    assert!(m.contains("`$ref` loop"), "{m}");
    // A recursive schema through properties is not a loop.
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["components"]["schemas"]["Tree"] = json!({"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}}});
    parse(&d).unwrap();
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["paths"]["/fail"]["get"]["parameters"] = json!([{"$ref": "#/components/parameters/Nope"}]);
    assert_eq!(fault(&d).0, "/paths/~1fail/get/parameters/0/$ref");
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["paths"]["/fail"]["get"]["parameters"] =
        json!([{"$ref": "https://example.com/common.yaml#/Limit"}]);
    assert!(fault(&d).1.contains("outside the document"));
}

#[test]
fn one_operation_id_twice_is_refused() {
    let mut d = common::doc("http://127.0.0.1:1", "3.0.3");
    d["paths"]["/huge"]["get"]["operationId"] = json!("fail");
    let (p, m) = fault(&d);
    assert_eq!(p, "/paths/~1huge/get/operationId");
    assert!(
        m.contains("two operations have `operationId` `fail`"),
        "{m}"
    );
}

#[test]
fn a_server_url_that_is_not_http_is_refused() {
    for url in [
        "ftp://files.example.com/",
        "file:///etc/passwd",
        "ws://x.example.com",
    ] {
        let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
        d["servers"] = json!([{"url": "https://ok.example.com"}, {"url": url}]);
        let (p, m) = fault(&d);
        assert_eq!(p, "/servers/1/url", "{url}");
        assert!(m.contains("hcp sends only to `http` or `https`"), "{m}");
    }
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["servers"] = json!([{"url": "{scheme}://api.example.com",
        "variables": {"scheme": {"default": "gopher", "enum": ["gopher"]}}}]);
    assert_eq!(fault(&d).0, "/servers/0/url");
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["paths"]["/fail"]["servers"] = json!([{"url": "ftp://elsewhere"}]);
    assert_eq!(fault(&d).0, "/paths/~1fail/servers/0/url");
}

#[test]
fn twenty_megabytes_are_refused_unparsed() {
    let mut big = String::from("{\"openapi\": \"3.1.0\", \"x-pad\": \"");
    big.push_str(&"a".repeat(20 * 1000 * 1000));
    big.push_str("\"}");
    assert!(big.len() > MAX_DOCUMENT_BYTES);
    let e = Document::parse(big.as_bytes()).unwrap_err();
    assert_eq!(e.pointer, "");
    assert!(e.message.contains("16 MiB"), "{}", e.message);
}

#[test]
fn relative_servers_resolve_against_the_document_url() {
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["servers"] = json!([{"url": "/v1"}]);
    let doc = parse(&d).unwrap();
    assert_eq!(doc.server(None).unwrap(), None);
    let base = url::Url::parse("http://127.0.0.1:9/specs/openapi.json").unwrap();
    assert_eq!(
        doc.server(Some(&base)).unwrap().unwrap().as_str(),
        "http://127.0.0.1:9/v1"
    );
}

#[test]
fn operations_hcp_cannot_call_are_refused_alone() {
    let mut d = common::doc("http://127.0.0.1:1", "3.1.0");
    d["paths"]["/fail"]["get"]["parameters"] =
        json!([{"name": "sid", "in": "cookie", "required": true, "schema": {"type": "string"}}]);
    d["paths"]["/huge"]["get"]["security"] = json!([{"oauth": []}]);
    d["components"]["securitySchemes"]["oauth"] = json!({"type": "oauth2", "flows": {}});
    d["paths"]["/hang"]["get"]["parameters"] =
        json!([{"name": "project", "in": "query", "required": true, "schema": {"type": "string"}}]);
    let doc = parse(&d).unwrap();
    let bad = |id: &str| match doc.operation(id) {
        Err(OperationError::Bad(b)) => b,
        other => panic!("{id}: {other:?}"),
    };
    assert_eq!(bad("fail").pointer, "/paths/~1fail/get/parameters/0");
    assert!(
        bad("huge")
            .message
            .contains("no security requirement hcp can meet")
    );
    assert!(bad("hang").message.contains("select the tenant"));
    assert_eq!(
        doc.operation("nope").unwrap_err().code(),
        "unknown_operation"
    );
    doc.operation("close").unwrap();
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    let deep = |open: &str, close: &str, n: usize| {
        format!("{}{}", open.repeat(n), close.repeat(n)).into_bytes()
    };
    let mut json = b"{\"openapi\": \"3.1.0\", \"x\": ".to_vec();
    json.extend(deep("[", "]", 100_000));
    json.push(b'}');
    assert!(Document::parse(&json).is_err());
    let mut yaml = b"openapi: 3.1.0\nx: ".to_vec();
    yaml.extend(deep("[", "]", 100_000));
    assert!(Document::parse(&yaml).is_err());
}
