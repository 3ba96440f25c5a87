//! The bootstrap pack's view of the store (RUNTIME §5 "Confinement of every land"): a
//! child confined by [`crate::prepare::confine`] as the bootstrap pack's (`hcp-cli`, whose
//! bin is the running `hcp`) reads the store but none of [`BOOTSTRAP_HIDDEN`], as the owner
//! and as an agent, and writes nothing of it (`local` reads none of it). Run for real:
//! `cat` and `sh` under the very confinement `hcp exec` builds, whatever user runs the
//! tests.

use crate::call::Caller;
use crate::prepare::{BOOTSTRAP_HIDDEN, ConfineSpec, confine};
use hcp_adapter::{ChildEnv, Invocation, Limits, Outcome, pin_bin, verify_bin};
use hcp_model::{Land, Principal, SessionFacts};
use hcp_store::Home;
use hcp_store::config::RuntimeConfig;
use std::ffi::OsString;
use std::path::Path;

const SECRET: &str = "bootstrap-secret-51c7";

/// The files of the store the bootstrap pack's child may not read (a planted secret in
/// each), relative to the store.
const HIDDEN_FILES: [&str; 7] = [
    "state/bindings/agent-9/mail.json",
    "state/sessions/s1.json",
    "audit/digest.secret",
    "audit/checkpoint.key",
    "policy.json",
    "policy.yaml",
    "cache/policy.compiled",
];

/// A store with the bootstrap pack's readable files and a secret in each of
/// [`HIDDEN_FILES`], a working directory and a user home.
struct Store {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    work: std::path::PathBuf,
    user_home: std::path::PathBuf,
    home: Home,
}

impl Store {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("hcp");
        let work = dir.path().join("work");
        let user_home = dir.path().join("home");
        for d in [
            "state/bindings/agent-9",
            "state/sessions",
            "audit",
            "cache",
            "packs/hcp-cli",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&user_home).unwrap();
        for f in HIDDEN_FILES {
            std::fs::write(root.join(f), SECRET).unwrap();
        }
        std::fs::write(root.join("packs/hcp-cli/surface.json"), "readable-pack").unwrap();
        std::fs::write(root.join("audit/audit.jsonl"), "readable-trail").unwrap();
        let home = Home::open(&root).unwrap();
        Self {
            _dir: dir,
            root,
            work,
            user_home,
            home,
        }
    }

    /// `sh -c SCRIPT` under the bootstrap pack's confinement of `land` for `principal`.
    fn run_sh(&self, principal: &Principal, land: Land, script: &str) -> Outcome {
        let sh = verify_bin(&pin_bin(Path::new("/bin/sh")).unwrap()).unwrap();
        let caller = Caller {
            session_token: None,
            project: None,
            cwd: self.work.clone(),
            parent_env: vec![
                ("HOME".into(), self.user_home.as_os_str().to_owned()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ],
            limit_overrides: hcp_adapter::LimitOverrides::default(),
        };
        let config = RuntimeConfig::default();
        let spec = ConfineSpec {
            land,
            principal,
            workdir: &self.work,
            bin: sh.path(),
            bootstrap: true,
            pack_id: "hcp-cli",
            config: &config,
            sandboxes: &[],
        };
        let confined = confine(&self.home, &caller, &spec)
            .unwrap_or_else(|r| panic!("{}: {}", r.code.as_str(), r.message));
        assert_eq!(
            confined.report.field_json()["filesystem"],
            "enforced",
            "{:?}",
            confined.report
        );
        let env =
            ChildEnv::from_parent(caller.parent_env.iter().cloned()).tmpdir(confined.tmp.path());
        let out = hcp_adapter::run(&Invocation {
            bin: &sh,
            argv0: "sh".into(),
            args: vec![OsString::from("-c"), OsString::from(script)],
            env: &env,
            cwd: self.work.clone(),
            limits: Limits::default(),
            confine: Some(&confined.confinement),
            cancel: None,
        })
        .unwrap();
        drop(confined.confinement);
        confined.tmp.remove().unwrap();
        out
    }

    /// What `principal`'s child of `land` reads and writes of the store.
    fn check(&self, principal: &Principal, land: Land) {
        let store = self.root.display();
        let what = format!("{}, {land:?}", principal.id);
        let out = self.run_sh(
            principal,
            land,
            &format!(
                "cat {store}/packs/hcp-cli/surface.json {store}/audit/audit.jsonl; echo; \
                 ls {store} {store}/state {store}/audit {store}/cache 2>&1"
            ),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        // `local` reads its sandbox and the system only (the bootstrap pack's verbs are
        // `personal`); the others read the store.
        assert_eq!(
            stdout.starts_with("readable-packreadable-trail"),
            land != Land::Local,
            "{what}: the store reads: {stdout}"
        );
        for f in HIDDEN_FILES {
            let out = self.run_sh(principal, land, &format!("cat {store}/{f}"));
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                out.exit_code != 0 && !text.contains(SECRET),
                "{what}: {f} was read: {text}"
            );
        }
        // Nothing of the store is writable, the hidden parts included.
        let out = self.run_sh(
            principal,
            land,
            &format!(
                "echo x > {store}/evil; echo x > {store}/audit/audit.jsonl; \
                 echo x > {store}/policy.json; echo x > {store}/cache/policy.compiled; \
                 mkdir {store}/state/bindings/agent-1"
            ),
        );
        assert_ne!(out.exit_code, 0, "{what}: {out:?}");
    }
}

#[test]
fn the_bootstrap_child_reads_the_store_but_none_of_its_secrets() {
    // Every hidden name has a planted file (the list and the test agree).
    for h in BOOTSTRAP_HIDDEN {
        assert!(
            HIDDEN_FILES.iter().any(|f| f.starts_with(h)),
            "{h} is not tried"
        );
    }
    let s = Store::new();
    let agent = Principal::of_session("agent-1".into(), SessionFacts::default(), None);
    for principal in [Principal::owner(None), agent] {
        for land in [Land::Personal, Land::Brain, Land::Local] {
            s.check(&principal, land);
        }
    }
    assert!(!s.root.join("evil").exists());
    assert!(!s.root.join("state/bindings/agent-1").exists());
    assert_eq!(
        std::fs::read_to_string(s.root.join("audit/audit.jsonl")).unwrap(),
        "readable-trail"
    );
    for f in HIDDEN_FILES {
        assert_eq!(
            std::fs::read_to_string(s.root.join(f)).unwrap(),
            SECRET,
            "{f}"
        );
    }
}
