//! Installing `kind: openapi` packs (RUNTIME §1.3): the document is read once, refused
//! when hcp cannot use it (the store unchanged), pinned and kept; the pinned copy is what
//! later reads see, and a reinstall with a changed document is a content change for the
//! rug-pull guard.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use hcp_examples::api::{ApiServer, TASKS_DOCUMENT};
use hcp_model::Capability;
use hcp_store::Home;
use hcp_store::grant::{self, GrantStatus, PackScope};
use hcp_store::pack::{self, CheckedPack, InstallOptions, PackError, openapi};
use hcp_store::session::PrincipalId;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn gold() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packs/tasks")
}

struct World {
    _tmp: tempfile::TempDir,
    home: Home,
    pack: PathBuf,
}

/// A fresh home and a copy of the gold pack whose `openapi.spec` is `spec` (the document
/// file beside it stays for a path spec).
fn world(spec: &str) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let pack = tmp.path().join("tasks");
    std::fs::create_dir(&pack).unwrap();
    for f in ["policy.json", "HARNESS.md", "openapi.json"] {
        std::fs::copy(gold().join(f), pack.join(f)).unwrap();
    }
    let surface = std::fs::read_to_string(gold().join("surface.json"))
        .unwrap()
        .replace(
            "\"spec\": \"openapi.json\"",
            &format!("\"spec\": \"{spec}\""),
        );
    std::fs::write(pack.join("surface.json"), surface).unwrap();
    if spec.starts_with("http") {
        std::fs::remove_file(pack.join("openapi.json")).unwrap();
    }
    // A store: its chain key keys the grant files.
    hcp_store::made::init(
        &tmp.path().join("home"),
        hcp_store::audit::Actor::owner(),
        None,
    )
    .unwrap();
    let home = Home::open(tmp.path().join("home")).unwrap();
    World {
        _tmp: tmp,
        home,
        pack,
    }
}

/// The pack as the runtime's install hands it over: its three files and, for a path
/// spec, the document beside it (read here as lint reads it).
fn install(w: &World, force: bool) -> Result<pack::Installed, PackError> {
    let files = hcp_model::PACK_FILES.map(|f| std::fs::read(w.pack.join(f)).unwrap());
    let mut checked = CheckedPack::parse(files, w.pack.canonicalize().unwrap()).unwrap();
    let doc = w.pack.join("openapi.json");
    if doc.exists() {
        checked.document = Some(openapi::BesideDocument {
            rel: "openapi.json".into(),
            bytes: Ok(std::fs::read(doc).unwrap()),
        });
    }
    pack::install(
        &w.home,
        &checked,
        &InstallOptions {
            force,
            ..InstallOptions::default()
        },
    )
}

fn doc_with(edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut v: Value = serde_json::from_str(TASKS_DOCUMENT).unwrap();
    edit(&mut v);
    v.to_string().into_bytes()
}

#[test]
fn a_document_beside_the_pack_is_pinned_kept_and_not_a_pack_file() {
    let w = world("openapi.json");
    let done = install(&w, false).unwrap();
    let pin = done.record.openapi.clone().unwrap();
    assert_eq!(pin.spec, "openapi.json");
    assert_eq!(pin.server.as_deref(), Some("http://127.0.0.1:8765/v1"));
    let p = pack::load(&w.home, "tasks").unwrap();
    assert!(!p.dir.join("openapi.json").exists(), "kept only in `.hcp/`");
    assert_eq!(
        openapi::pinned_document(&p).unwrap(),
        std::fs::read(gold().join("openapi.json")).unwrap()
    );
    let op = openapi::pinned_operation(&p, "list").unwrap();
    assert_eq!(op.id, "listTasks");
    assert_eq!(op.input_schema()["properties"]["limit"]["maximum"], 100);
    assert_eq!(
        openapi::server(&p, None).unwrap().as_str(),
        "http://127.0.0.1:8765/v1"
    );
    assert_eq!(
        openapi::server(&p, Some("http://127.0.0.1:9/v1"))
            .unwrap()
            .as_str(),
        "http://127.0.0.1:9/v1"
    );
    assert_eq!(
        openapi::server(&p, Some("ftp://x")).unwrap_err().code(),
        "bad_openapi"
    );
    // A pinned copy changed in the store is damage, not a new document.
    std::fs::write(p.dir.join(".hcp/openapi.verbs.json"), "{}").unwrap();
    assert_eq!(
        openapi::pinned_operation(&p, "list")
            .unwrap_err()
            .code()
            .as_str(),
        "store_damaged"
    );
}

#[test]
fn a_document_at_a_url_is_read_once_and_a_change_there_needs_a_reinstall() {
    let s = ApiServer::start(0).unwrap();
    let w = world(&format!("{}/openapi.json", s.origin()));
    let first = install(&w, false).unwrap();
    assert_eq!(first.record.content_changed_at, None);
    let before_grant = jiff::Timestamp::now();
    let ann = PrincipalId::parse("ann").unwrap();
    grant::grant(
        &w.home,
        &ann,
        &PackScope::try_from("tasks".to_owned()).unwrap(),
        &[Capability::VerbExecRead],
        before_grant,
    )
    .unwrap();

    // The document changes at its URL: what is installed does not.
    s.set_document(doc_with(|v| {
        v["paths"]["/tasks"]["get"]["parameters"][1]["schema"]["maximum"] = json!(5);
    }));
    let p = pack::load(&w.home, "tasks").unwrap();
    let op = openapi::pinned_operation(&p, "list").unwrap();
    assert_eq!(op.input_schema()["properties"]["limit"]["maximum"], 100);

    // A reinstall reads it again: changed content, so the rug-pull guard suspends.
    let again = install(&w, true).unwrap();
    assert!(again.content_changed);
    let changed_at: jiff::Timestamp = again
        .record
        .content_changed_at
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let p = pack::load(&w.home, "tasks").unwrap();
    let op = openapi::pinned_operation(&p, "list").unwrap();
    assert_eq!(op.input_schema()["properties"]["limit"]["maximum"], 5);
    let held = grant::Grants::load(&w.home)
        .unwrap()
        .held(&ann, &hcp_model::PackId::parse("tasks").unwrap());
    assert!(matches!(
        grant::status(&held, Capability::VerbExecRead, Some(changed_at)),
        GrantStatus::Suspended { .. }
    ));
    // The same document once more: no change, the suspension's time is kept.
    let same = install(&w, true).unwrap();
    assert!(!same.content_changed);
    assert_eq!(
        same.record.content_changed_at,
        again.record.content_changed_at
    );
}

#[test]
fn documents_hcp_cannot_use_are_refused_and_the_store_is_unchanged() {
    let s = ApiServer::start(0).unwrap();
    let w = world(&format!("{}/openapi.json", s.origin()));
    install(&w, false).unwrap();
    let record = std::fs::read(w.home.root().join("packs/tasks/.hcp/record.json")).unwrap();
    let pinned = std::fs::read(w.home.root().join("packs/tasks/.hcp/openapi.document")).unwrap();
    let mut twenty_mb = b"{\"openapi\": \"3.1.0\", \"x-pad\": \"".to_vec();
    twenty_mb.extend(std::iter::repeat_n(b'a', 20 * 1000 * 1000));
    twenty_mb.extend(b"\"}");
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "swagger 2",
            br#"{"swagger": "2.0", "paths": {}}"#.to_vec(),
            "bad_openapi",
        ),
        ("not json", b"{\"openapi\": ".to_vec(), "bad_openapi"),
        (
            "ref loop",
            doc_with(|v| {
                v["components"]["schemas"]["Task"] = json!({"$ref": "#/components/schemas/Token"});
                v["components"]["schemas"]["Token"] = json!({"$ref": "#/components/schemas/Task"});
            }),
            "bad_openapi",
        ),
        (
            "one operationId twice",
            doc_with(|v| v["paths"]["/tasks"]["post"]["operationId"] = json!("listTasks")),
            "bad_openapi",
        ),
        (
            "ftp server",
            doc_with(|v| v["servers"] = json!([{"url": "ftp://files.example.com/v1"}])),
            "bad_openapi",
        ),
        ("20 MB", twenty_mb, "bad_openapi"),
        (
            "operation gone",
            doc_with(|v| v["paths"]["/tasks"]["get"]["operationId"] = json!("listAll")),
            "unknown_operation",
        ),
        (
            "cookie parameter",
            doc_with(|v| {
                v["paths"]["/tasks"]["get"]["parameters"] = json!([{"name": "sid", "in": "cookie", "required": true, "schema": {"type": "string"}}]);
            }),
            "bad_openapi",
        ),
    ];
    for (what, bytes, code) in cases {
        s.set_document(bytes);
        let e = install(&w, true).unwrap_err();
        assert_eq!(e.code().as_str(), code, "{what}: {e}");
        assert_eq!(
            std::fs::read(w.home.root().join("packs/tasks/.hcp/record.json")).unwrap(),
            record,
            "{what}"
        );
        assert_eq!(
            std::fs::read(w.home.root().join("packs/tasks/.hcp/openapi.document")).unwrap(),
            pinned,
            "{what}"
        );
    }
    // A fresh store refuses too and keeps nothing.
    let w2 = world(&format!(
        "{}/test/redirect?to=http%3A%2F%2F127.0.0.1%3A1%2F",
        s.origin()
    ));
    let e = install(&w2, false).unwrap_err();
    assert_eq!(e.code().as_str(), "bad_openapi");
    assert!(e.to_string().contains("302"), "{e}");
    assert!(!w2.home.root().join("packs/tasks").exists());
}
