//! The harness every integration test uses: a temporary `HCP_HOME`, `HOME` and working
//! directory, a cleared `HCP_*` environment, the built `hcp` and example bins on `PATH`,
//! and snapshots of exit code, stdout and stderr with temporary paths filtered.

#![allow(dead_code)]

pub mod immutable;
pub mod skip;

use std::path::{Path, PathBuf};
use std::process::Output;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The built `hcp`.
pub fn hcp_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hcp"))
}

/// The directory of the built binaries: `hcp` and, after `cargo test --workspace` (the
/// examples package has integration tests of its own, so cargo builds its binaries), the
/// example CLIs of the gold packs (`hcp-example-*`).
pub fn bin_dir() -> PathBuf {
    hcp_bin().parent().unwrap().to_path_buf()
}

/// [`bin_dir`], asserting that the example CLIs are built there; tests that install gold
/// packs call this first.
pub fn example_bins() -> PathBuf {
    let dir = bin_dir();
    let probe = dir.join("hcp-example-transit");
    assert!(
        probe.exists(),
        "the example CLIs are not built (no `{}`): run `cargo test --workspace`, or \
         `cargo build -p hcp-examples` before `cargo test -p hcp`",
        probe.display()
    );
    dir
}

/// A gold pack's source directory.
pub fn gold_pack(id: &str) -> PathBuf {
    repo_root().join("packs").join(id)
}

/// One test's world: temporary home, store and working directory.
pub struct World {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub hcp_home: PathBuf,
    pub work: PathBuf,
}

impl World {
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let home = root.join("home");
        let hcp_home = root.join("hcp-home");
        let work = root.join("wd");
        for d in [&home, &work] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            tmp,
            home,
            hcp_home,
            work,
        }
    }

    /// The temporary root (filtered as `[TMP]` in snapshots).
    pub fn root(&self) -> PathBuf {
        self.home.parent().unwrap().to_path_buf()
    }

    /// `hcp` with a clean environment: `HOME`, `HCP_HOME`, `PATH` (the built bins first),
    /// `LANG=C`, `NO_COLOR=1`; the working directory is `work/`.
    pub fn hcp(&self) -> assert_cmd::Command {
        let mut c = assert_cmd::Command::new(hcp_bin());
        c.env_clear()
            .env("HOME", &self.home)
            .env("HCP_HOME", &self.hcp_home)
            .env("PATH", self.path_var())
            .env("LANG", "C")
            .env("NO_COLOR", "1")
            .current_dir(&self.work);
        c
    }

    /// `PATH` for children: the built bins, then the system's.
    pub fn path_var(&self) -> String {
        format!("{}:/usr/local/bin:/usr/bin:/bin", bin_dir().display())
    }

    /// Runs `hcp ARGS` and returns the output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.hcp().args(args).output().unwrap()
    }

    /// `hcp init`: makes the store (RUNTIME §4: stores are made on purpose; `install`
    /// makes one too), asserting success. Returns the world for chaining.
    pub fn init(&self) -> &Self {
        let out = self.run(&["init"]);
        assert!(out.status.success(), "hcp init:\n{}", self.render(&out));
        self
    }

    /// A world whose store is made ([`World::init`]).
    pub fn with_store() -> Self {
        let w = Self::new();
        w.init();
        w
    }

    /// Gives the `mail` gold pack the one place it writes, `$HOME/.hcp-example-mail`:
    /// `personal` and `brain` children write only their private `TMPDIR` and the paths
    /// `config.json` grants the pack (RUNTIME §5). Makes the directory (a grant of a path
    /// that does not exist when the call starts grants nothing) and writes `config.json`.
    pub fn grant_mail_root(&self) {
        let root = self.home.join(".hcp-example-mail");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&self.hcp_home).unwrap();
        std::fs::write(
            self.hcp_home.join("config.json"),
            serde_json::json!({"packs": {"mail": {"write": [root]}}}).to_string(),
        )
        .unwrap();
    }

    /// Copies a gold pack into the temporary root (so a test may change it) and returns
    /// the copy.
    pub fn copy_pack(&self, id: &str) -> PathBuf {
        let dst = self.root().join("src").join(id);
        std::fs::create_dir_all(&dst).unwrap();
        for f in ["surface.json", "policy.json", "HARNESS.md"] {
            std::fs::copy(gold_pack(id).join(f), dst.join(f)).unwrap();
        }
        dst
    }

    /// Exit code, stdout and stderr as one text, temporary paths as `[TMP]`, the repository
    /// as `[REPO]`, for `insta::assert_snapshot!`.
    pub fn render(&self, out: &Output) -> String {
        let text = format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{}",
            out.status
                .code()
                .map_or("signal".to_string(), |c| c.to_string()),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        self.filter(&text)
    }

    /// Replaces this world's paths with stable markers.
    pub fn filter(&self, text: &str) -> String {
        text.replace(&self.root().display().to_string(), "[TMP]")
            .replace(&repo_root().display().to_string(), "[REPO]")
            .replace(&bin_dir().display().to_string(), "[BIN]")
    }
}

/// The exit status of `o` (-1 when a signal ended it).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Whether this machine gives a call its view (a session's call needs one); prints
/// `skipped: …` (a failure under `CI=true`) when it does not.
pub fn view_or_skip() -> bool {
    if let Some(why) = hcp_adapter::KernelSupport::probe().view_missing() {
        skip::skip(&format!("no view for a call here: {why}"));
        return false;
    }
    true
}
