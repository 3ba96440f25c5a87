//! Library-level tests of install, load, list and uninstall.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use hcp_model::PackId;
use pretty_assertions::assert_eq;
use std::cell::RefCell;
use std::path::Path;

fn write_pack(dir: &Path, id: &str, lead: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("surface.json"),
        format!(
            r#"{{"id": "{id}", "name": "T", "kind": "composite", "binding": {{"mode": "local"}},
  "verbs": {{"{id}.get": {{"description": "get", "cli": ["cat", "{{{{file}}}}"]}}}}}}"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("policy.json"),
        format!(
            r#"{{"surface_id": "{id}", "version": 1,
  "verbs": {{"{id}.get": {{"operation": "read", "privacy": {{"land": "local"}}}}}}}}"#
        ),
    )
    .unwrap();
    std::fs::write(dir.join("HARNESS.md"), format!("# T\n\n{lead}\n")).unwrap();
}

/// The pack in `dir` as install takes it (read and parsed; lint is the runtime's).
fn checked(dir: &Path) -> CheckedPack {
    let files = hcp_model::PACK_FILES.map(|n| std::fs::read(dir.join(n)).unwrap());
    CheckedPack::parse(files, dir.canonicalize().unwrap()).unwrap()
}

fn install(home: &Home, dir: &Path, o: &InstallOptions<'_>) -> Result<Installed, PackError> {
    super::install(home, &checked(dir), o)
}

fn opts<'a>() -> InstallOptions<'a> {
    InstallOptions {
        lookup: BinLookup {
            path: Some("/usr/bin:/bin".into()),
            cwd: "/".into(),
        },
        ..InstallOptions::default()
    }
}

#[test]
fn install_then_load_list_uninstall() {
    let t = tempfile::tempdir().unwrap();
    crate::made::init(&t.path().join("home"), crate::audit::Actor::owner(), None).unwrap();
    let home = Home::open(t.path().join("home")).unwrap();
    let src = t.path().join("src/t");
    write_pack(&src, "t", "One.");
    let steps = RefCell::new(Vec::new());
    let hook = |s: InstallStep| steps.borrow_mut().push(s.name());
    let o = InstallOptions {
        activate: true,
        step_hook: Some(&hook),
        ..opts()
    };
    let done = install(&home, &src, &o).unwrap();
    assert_eq!(
        steps.into_inner(),
        [
            "locked",
            "staging-cleaned",
            "staged-partial",
            "staged",
            "swapped",
            "skill-written",
            "activated"
        ]
    );
    assert!(!done.replaced);
    assert_eq!(done.record.bins.len(), 1);
    assert_eq!(done.record.bins[0].program, "cat");
    let b = &done.record.bins[0];
    assert_eq!(super::bins::hash_file(&b.path).unwrap(), b.sha256);

    let p = load(&home, "t").unwrap();
    assert_eq!(p.record, done.record);
    assert_eq!(p.harness, "# T\n\nOne.\n");
    assert!(is_active(&home, "t"));
    assert_eq!(
        active_ids(&home).unwrap(),
        vec![PackId::parse("t").unwrap()]
    );
    let l = list(&home).unwrap();
    assert_eq!(
        (
            l[0].id.as_str(),
            l[0].kind.as_str(),
            l[0].verbs,
            l[0].active
        ),
        ("t", "composite", 1, true)
    );

    assert!(matches!(
        install(&home, &src, &opts()),
        Err(PackError::AlreadyInstalled { .. })
    ));
    let removed = uninstall(&home, "t").unwrap();
    assert!(removed.was_active);
    assert!(matches!(
        load(&home, "t"),
        Err(PackError::NotInstalled { .. })
    ));
    assert!(matches!(
        uninstall(&home, "t"),
        Err(PackError::NotInstalled { .. })
    ));
    assert!(list(&home).unwrap().is_empty());
}

#[test]
fn a_checked_pack_refuses_what_install_relies_on() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src/t");
    write_pack(&src, "t", "One.");
    let files = || hcp_model::PACK_FILES.map(|n| std::fs::read(src.join(n)).unwrap());
    assert!(CheckedPack::parse(files(), src.clone()).is_ok());
    let mut f = files();
    f[1] = br#"{"surface_id": "other", "version": 1, "verbs": {}}"#.to_vec();
    let r = CheckedPack::parse(f, src.clone()).unwrap_err();
    assert_eq!((r.file, r.code), ("policy.json", Code::SurfaceIdMismatch));
    let mut f = files();
    f[0] = b"{".to_vec();
    let r = CheckedPack::parse(f, src.clone()).unwrap_err();
    assert_eq!((r.file, r.code), ("surface.json", Code::BadJson));
    let mut f = files();
    f[0] = vec![0xff];
    assert_eq!(CheckedPack::parse(f, src).unwrap_err().code, Code::BadJson);
}

#[test]
fn a_tampered_installed_file_reads_as_damaged() {
    let t = tempfile::tempdir().unwrap();
    crate::made::init(&t.path().join("home"), crate::audit::Actor::owner(), None).unwrap();
    let home = Home::open(t.path().join("home")).unwrap();
    let src = t.path().join("src/t");
    write_pack(&src, "t", "One.");
    install(&home, &src, &opts()).unwrap();
    std::fs::write(pack_dir(&home, "t").join("HARNESS.md"), "# changed\n").unwrap();
    let e = load(&home, "t").unwrap_err();
    assert_eq!(e.code(), "store_damaged");
}

#[test]
fn ids_that_are_not_pack_ids_are_not_installed() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::open(t.path()).unwrap();
    for id in ["../x", "", "A", "a/b"] {
        assert_eq!(load(&home, id).unwrap_err().code(), "not_installed", "{id}");
    }
}

#[test]
fn uninstall_removes_the_family_bindings_unless_another_pack_shares_them() {
    let t = tempfile::tempdir().unwrap();
    crate::made::init(&t.path().join("home"), crate::audit::Actor::owner(), None).unwrap();
    let home = Home::open(t.path().join("home")).unwrap();
    let (a, b) = (t.path().join("src/a"), t.path().join("src/b"));
    write_pack(&a, "a", "A.");
    write_pack(&b, "b", "B.");
    // Pack `b` joins the family of `a`.
    let text = std::fs::read_to_string(b.join("surface.json")).unwrap();
    let text = text.replace(r#""mode": "local""#, r#""mode": "local", "family": "a""#);
    std::fs::write(b.join("surface.json"), text).unwrap();
    install(&home, &a, &opts()).unwrap();
    install(&home, &b, &opts()).unwrap();
    let now = jiff::Timestamp::now();
    let lock = crate::StoreLock::acquire(&home).unwrap();
    crate::binding::save(&home, &lock, "alice", "a", serde_json::Map::new(), now).unwrap();
    drop(lock);
    let cred = home.dir(StoreDir::State).join("bindings/alice/a.json");
    assert!(cred.is_file());
    uninstall(&home, "b").unwrap();
    assert!(cred.is_file(), "pack `a` still uses the family");
    uninstall(&home, "a").unwrap();
    assert!(
        !cred.exists(),
        "the last pack of the family took its bindings"
    );
}

/// The state ledger lists each install record by its MAC: the pack directory of an
/// earlier install put back after a reinstall, or after an uninstall, holds its MAC and
/// refuses the pack (`store_damaged`); `install --force` makes it whole.
#[test]
fn an_older_pack_directory_put_back_is_damage() {
    let t = tempfile::tempdir().unwrap();
    crate::made::init(&t.path().join("home"), crate::audit::Actor::owner(), None).unwrap();
    let home = Home::open(t.path().join("home")).unwrap();
    let src = t.path().join("src/t");
    write_pack(&src, "t", "One.");
    install(&home, &src, &opts()).unwrap();
    let dir = pack_dir(&home, "t");
    let saved = t.path().join("saved");
    copy_dir(&dir, &saved);
    write_pack(&src, "t", "Two.");
    let force = InstallOptions {
        force: true,
        ..opts()
    };
    install(&home, &src, &force).unwrap();
    let put_back = |what: &str| {
        std::fs::remove_dir_all(&dir).ok();
        copy_dir(&saved, &dir);
        let e = read::load(&home, "t").unwrap_err();
        assert_eq!(e.code(), Code::StoreDamaged, "{e}");
        assert!(e.to_string().contains(what), "{e}");
    };
    put_back("not the version hcp wrote last");
    install(&home, &src, &force).unwrap();
    assert!(read::load(&home, "t").is_ok());
    uninstall(&home, "t").unwrap();
    put_back("removed by hcp and put back");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &p);
        } else {
            std::fs::copy(e.path(), &p).unwrap();
        }
    }
}
