//! The bootstrap pack's view of the store (RUNTIME §5 "Confinement of every land"): a
//! child confined by [`crate::prepare::confine`] as the bootstrap pack's (`hcp-cli`, whose
//! bin is the running `hcp`) reads the store but none of [`BOOTSTRAP_HIDDEN`], as the owner
//! and as an agent, in every land, and writes nothing of it. Run for real:
//! `cat` and `sh` under the very confinement `hcp exec` builds, whatever user runs the
//! tests.

use crate::call::Caller;
use crate::prepare::{BOOTSTRAP_HIDDEN, ConfineSpec, confine};
use hcp_adapter::{ChildEnv, Invocation, Limits, Outcome, pin_bin, verify_bin};
use hcp_model::Land;
use hcp_store::Home;
use hcp_store::config::RuntimeConfig;
use std::ffi::OsString;
use std::path::Path;

const SECRET: &str = "bootstrap-secret-51c7";

/// The files of the store the bootstrap pack's child may not read (a planted secret in
/// each), relative to the store.
const HIDDEN_FILES: [&str; 10] = [
    "state/bindings/agent-9/mail.json",
    "state/sessions/s1.json",
    "audit/chain.key",
    "audit/digest.secret",
    "audit/checkpoint.key",
    "policy.json",
    "policy.yaml",
    "cache/policy.compiled",
    "homes/mail/principal/agent-9/mbox",
    "quarantine/q1/.envrc",
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
            "homes/mail/principal/agent-9",
            "quarantine/q1",
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

    /// `sh -c SCRIPT` under the bootstrap pack's confinement of `land` for the owner or
    /// an agent (`agent-1`).
    fn run_sh(&self, owner: bool, land: Land, script: &str) -> Outcome {
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
            caller: kind(owner),
            principal_id: if owner { "owner" } else { "agent-1" },
            project: Some("p"),
            writes: false,
            workdir: &self.work,
            bin: &sh,
            bootstrap: true,
            pack_id: "hcp-cli",
            config: &config,
        };
        let confined = confine(&self.home, &caller, &spec)
            .unwrap_or_else(|r| panic!("{}: {}", r.code.as_str(), r.message));
        assert_eq!(
            confined.report.field_json()["filesystem"],
            "enforced",
            "{:?}",
            confined.report
        );
        let env = confined.env(ChildEnv::from_parent(caller.parent_env.iter().cloned()));
        let out = hcp_adapter::run(&Invocation {
            bin: &sh,
            argv0: "sh".into(),
            args: vec![OsString::from("-c"), OsString::from(script)],
            env: &env,
            cwd: confined.cwd.clone(),
            limits: Limits::default(),
            confine: Some(&confined.confinement),
            cancel: None,
            egress: None,
        })
        .unwrap();
        drop(confined.confinement);
        out
    }

    /// What the child of the owner (or the agent) in `land` reads and writes of the store.
    fn check(&self, owner: bool, land: Land) {
        let store = self.root.display();
        let what = format!("owner {owner}, {land:?}");
        let out = self.run_sh(
            owner,
            land,
            &format!(
                "cat {store}/packs/hcp-cli/surface.json {store}/audit/audit.jsonl; echo; \
                 ls {store} {store}/state {store}/audit {store}/cache 2>&1"
            ),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with("readable-packreadable-trail"),
            "{what}: the store reads: {stdout}"
        );
        for f in HIDDEN_FILES {
            let out = self.run_sh(owner, land, &format!("cat {store}/{f}"));
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
            owner,
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
    for owner in [true, false] {
        for land in [Land::Personal, Land::Brain, Land::Local] {
            s.check(owner, land);
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

#[test]
fn a_view_is_described_without_running_anything_or_making_the_home() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("hcp");
    std::fs::create_dir_all(&root).unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let home = Home::open(&root).unwrap();
    let sh = verify_bin(&pin_bin(Path::new("/bin/sh")).unwrap()).unwrap();
    let caller = Caller {
        session_token: None,
        project: None,
        cwd: work.clone(),
        parent_env: vec![("PATH".into(), "/usr/bin:/bin:/opt/nothing".into())],
        limit_overrides: hcp_adapter::LimitOverrides::default(),
    };
    let config = RuntimeConfig::default();
    let (view, policy) = crate::prepare::describe_view(
        &home,
        &caller,
        &ConfineSpec {
            land: Land::Personal,
            caller: hcp_model::principal::Kind::Session,
            principal_id: "agent-1",
            project: None,
            writes: false,
            workdir: &work,
            bin: &sh,
            bootstrap: false,
            pack_id: "mail",
            config: &config,
        },
    )
    .unwrap();
    let tenant = root.join("homes/mail/principal/agent-1");
    let entry = view
        .describe()
        .iter()
        .find(|e| e.path == Path::new("/home/hcp"))
        .unwrap();
    assert_eq!(entry.source.as_deref(), Some(tenant.as_path()));
    assert_eq!(entry.mode.word(), "rw");
    assert!(!tenant.exists(), "describing made the tenant home");
    assert!(view.describe().iter().any(|e| e.path == Path::new("/etc")));
    assert!(!view.describe().iter().any(|e| e.path.starts_with(&root)));
    assert_eq!(
        view.path_var(std::ffi::OsStr::new("/usr/bin:/bin:/opt/nothing")),
        "/usr/bin:/bin"
    );
    assert_eq!(policy.network, hcp_adapter::Network::Deny);
}

/// The principal kind of the owner (`true`) or a session.
fn kind(owner: bool) -> hcp_model::principal::Kind {
    if owner {
        hcp_model::principal::Kind::Owner
    } else {
        hcp_model::principal::Kind::Session
    }
}
