//! `cargo xtask demo`: builds the workspace bins, makes a fresh temporary store, installs
//! and activates every gold pack, puts the starting runtime policy of `examples/policy.yaml`
//! (what `hcp policy init --role agent` writes for the gold packs) in the store and locks
//! the verbs, and runs a scripted agent through `hcp exec`, printing each command as a
//! shell line, the gate's answer and a short excerpt of the output.
//!
//! The script ([`script`]) is a plain function over a [`Demo`] (the bin directory and a
//! scratch root), so a test can run it against already built bins. Every step says what it
//! expects (`ok`, or `refused` with a code); a step that answers otherwise fails the demo.

#[path = "demo_person.rs"]
mod person;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Arguments of `cargo xtask demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Use the bins already built next to xtask instead of running `cargo build --bins`.
    #[arg(long)]
    pub no_build: bool,
    /// Keep the temporary store and scratch repository, and print where they are.
    #[arg(long)]
    pub keep: bool,
}

/// The gold packs, in install order.
pub const GOLD_PACKS: [&str; 6] = ["transit", "echo", "ledger", "mail", "hcp-cli", "git"];

/// The agent the script plays.
const AGENT: &str = "agent-1";

/// Runs the demo.
///
/// # Errors
/// When the build fails, a command cannot be started, or a step does not answer as
/// scripted.
pub fn run(a: &Args, root: &Path) -> Result<()> {
    if !a.no_build {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
        println!("$ cargo build --bins   # hcp and the example CLIs; a first build takes minutes");
        // Cargo's own progress goes to the inherited stderr: a cold build is not silent.
        let st = Command::new(&cargo)
            .args(["build", "--bins"])
            .current_dir(root)
            .status()
            .context("cannot run cargo")?;
        if !st.success() {
            bail!("`cargo build --bins` failed ({st})");
        }
    }
    let bin_dir = profile_dir()?;
    let scratch = std::env::temp_dir().join(format!(
        "hcp-demo-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    let demo = Demo::new(bin_dir, scratch.clone(), root.join("packs"))?;
    let result = script(&demo, &mut std::io::stdout());
    if a.keep {
        println!("kept: HCP_HOME={}", demo.hcp_home.display());
    } else {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let summary = result?;
    println!(
        "\ndemo done: {} steps answered as scripted ({} ok, {} refused as expected)",
        summary.ok + summary.refused,
        summary.ok,
        summary.refused
    );
    Ok(())
}

/// The profile directory the bins are built in: the one this program runs from (`cargo
/// xtask` is `cargo run`, so xtask and `cargo build --bins` share it). From a test binary
/// (`…/debug/deps/xtask-…`) it is the parent of `deps`.
///
/// # Errors
/// When the path of the running program is unknown.
pub fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find the running program")?;
    let mut dir = exe
        .parent()
        .context("the running program has no directory")?
        .to_path_buf();
    if dir.file_name().is_some_and(|n| n == "deps") {
        dir.pop();
    }
    Ok(dir)
}

/// Where the demo runs: the built bins and a scratch root holding the store (`hcp-home`),
/// a HOME and a working directory.
#[derive(Debug, Clone)]
pub struct Demo {
    /// The directory of `hcp` and the `hcp-example-*` bins.
    pub bin_dir: PathBuf,
    /// `HCP_HOME` of the demo.
    pub hcp_home: PathBuf,
    /// HOME of every command.
    pub home: PathBuf,
    /// The working directory of the commands.
    pub work: PathBuf,
    /// The gold packs' sources.
    pub packs: PathBuf,
    /// The agent's starting runtime policy (`examples/policy.yaml` beside `packs`).
    pub policy: PathBuf,
}

impl Demo {
    /// Lays out the scratch root (it must not exist yet, or be empty).
    ///
    /// # Errors
    /// When a directory cannot be made, or `hcp` is not in `bin_dir`.
    pub fn new(bin_dir: PathBuf, scratch: PathBuf, packs: PathBuf) -> Result<Self> {
        if !bin_dir.join("hcp").is_file() {
            bail!("no `hcp` in `{}`: build the bins first", bin_dir.display());
        }
        let home = scratch.join("home");
        let work = scratch.join("work");
        for d in [&home, &work] {
            std::fs::create_dir_all(d)
                .with_context(|| format!("cannot create `{}`", d.display()))?;
        }
        let policy = packs
            .parent()
            .map_or_else(|| PathBuf::from("examples"), |r| r.join("examples"))
            .join("policy.yaml");
        Ok(Self {
            bin_dir,
            hcp_home: scratch.join("hcp-home"),
            home,
            work,
            packs,
            policy,
        })
    }

    fn path_var(&self) -> OsString {
        let mut p = OsString::from(self.bin_dir.as_os_str());
        p.push(":");
        p.push(std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin")));
        p
    }

    fn command(&self, program: &str, cwd: &Path) -> Command {
        let exe = if program == "hcp" {
            self.bin_dir.join("hcp")
        } else {
            PathBuf::from(program)
        };
        let mut c = Command::new(exe);
        c.env_clear()
            .env("PATH", self.path_var())
            .env("HOME", &self.home)
            .env("HCP_HOME", &self.hcp_home)
            .env("LANG", "C")
            .env("NO_COLOR", "1")
            .current_dir(cwd)
            .stdin(Stdio::null());
        c
    }
}

/// What a step is expected to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// Exit 0.
    Ok,
    /// A refusal with this code.
    Refused(&'static str),
}

/// One command of the script.
#[derive(Debug, Clone)]
struct Step {
    /// `hcp` or another program.
    program: &'static str,
    args: Vec<String>,
    /// Run as the agent (`HCP_SESSION` set).
    agent: bool,
    /// Extra environment, shown on the shell line.
    env: Vec<(&'static str, String)>,
    /// Working directory, relative to the demo's work dir.
    cwd: Option<&'static str>,
    /// Print the whole output, indented, instead of an excerpt.
    full: bool,
    /// Keep the `approval_id` of the answer as this shell variable (`$NAME` in later
    /// arguments).
    capture: Option<&'static str>,
    expect: Expect,
}

fn step(program: &'static str, args: &[&str], expect: Expect) -> Step {
    Step {
        program,
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        agent: false,
        env: Vec::new(),
        cwd: None,
        full: false,
        capture: None,
        expect,
    }
}

impl Step {
    fn agent(mut self) -> Self {
        self.agent = true;
        self
    }
    fn env(mut self, k: &'static str, v: &str) -> Self {
        self.env.push((k, v.to_owned()));
        self
    }
    fn cwd(mut self, dir: &'static str) -> Self {
        self.cwd = Some(dir);
        self
    }
    fn full(mut self) -> Self {
        self.full = true;
        self
    }
    fn capture(mut self, var: &'static str) -> Self {
        self.capture = Some(var);
        self
    }
}

/// How many steps answered ok and how many were refused as scripted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Steps that exited 0 as expected.
    pub ok: usize,
    /// Steps refused with the expected code.
    pub refused: usize,
}

/// Quotes a word for a POSIX shell line when it needs it (a `$NAME` of the script stays
/// a variable).
fn quote(w: &str) -> String {
    if w.len() > 1
        && w.starts_with('$')
        && w[1..].bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
    {
        return w.to_owned();
    }
    let plain = !w.is_empty()
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:=@,+%".contains(&b));
    if plain {
        w.to_owned()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

/// A short excerpt of a text: its first line, at most 100 characters.
fn excerpt(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    let mut s: String = line.chars().take(100).collect();
    if s.len() < line.len() || text.trim().lines().count() > 1 {
        s.push_str(" …");
    }
    s
}

/// Runs the scripted agent in `demo`, writing the transcript to `out`.
///
/// # Errors
/// The first step that does not answer as scripted, or one that cannot run.
pub fn script(demo: &Demo, out: &mut dyn std::io::Write) -> Result<Summary> {
    let mut sum = Summary::default();
    let say = |out: &mut dyn std::io::Write, text: &str| -> Result<()> {
        writeln!(out, "{text}").context("cannot write the transcript")
    };
    say(
        out,
        "# a store made on purpose (`hcp init`); every gold pack installed and activated",
    )?;
    say(
        out,
        &format!(
            "$ export HCP_HOME={}",
            quote(&demo.hcp_home.display().to_string())
        ),
    )?;
    // The store made on purpose, with a witness of its audit trail outside it.
    let witness = demo
        .hcp_home
        .parent()
        .map_or_else(|| PathBuf::from("witness"), |p| p.join("witness"));
    std::fs::create_dir_all(&witness)
        .with_context(|| format!("cannot create `{}`", witness.display()))?;
    std::fs::create_dir_all(&demo.hcp_home)
        .with_context(|| format!("cannot create `{}`", demo.hcp_home.display()))?;
    let config = serde_json::json!({"audit": {"witness": witness}});
    std::fs::write(demo.hcp_home.join("config.json"), config.to_string())
        .context("cannot write the demo's config.json")?;
    say(
        out,
        &format!(
            "$ echo '{}' > \"$HCP_HOME/config.json\"   # checkpoints of the trail kept outside the store",
            config
        ),
    )?;
    let mut setup = vec![step("hcp", &["init"], Expect::Ok)];
    for id in GOLD_PACKS {
        let dir = demo.packs.join(id).display().to_string();
        setup.push(step("hcp", &["install", "--activate", &dir], Expect::Ok));
    }
    setup.push(step("hcp", &["list"], Expect::Ok).full());
    let mut vars = BTreeMap::new();
    for s in &setup {
        run_step(demo, s, None, &mut vars, out, &mut sum)?;
    }

    say(
        out,
        "\n# the operator's runtime policy for the agents: `hcp policy init --role agent` of the\n# gold packs, kept as examples/policy.yaml; then the verbs are locked",
    )?;
    let policy = demo.policy.display().to_string();
    let in_store = demo.hcp_home.join("policy.yaml").display().to_string();
    for s in [
        step("hcp", &["policy", "check", &policy], Expect::Ok),
        step("cp", &[&policy, &in_store], Expect::Ok),
        step("hcp", &["policy", "coverage"], Expect::Ok),
        step("hcp", &["policy", "lock"], Expect::Ok),
    ] {
        run_step(demo, &s, None, &mut vars, out, &mut sum)?;
    }

    say(
        out,
        "\n# the owner starts a session for the agent (a harness passes it as HCP_SESSION)",
    )?;
    say(
        out,
        &format!("$ AGENT=$(hcp session start --principal {AGENT} --role agent --project demo)"),
    )?;
    let o = demo
        .command("hcp", &demo.work)
        .args([
            "session",
            "start",
            "--principal",
            AGENT,
            "--role",
            "agent",
            "--project",
            "demo",
        ])
        .output()
        .context("cannot run `hcp session start`")?;
    if !o.status.success() {
        bail!(
            "`hcp session start` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    let token = String::from_utf8_lossy(&o.stdout).trim().to_owned();
    say(out, "  ok · a token on stdout, stored hashed")?;
    let agent = Some(token.as_str());

    let exec = |args: &[&str], e: Expect| {
        let mut all = vec!["exec"];
        all.extend_from_slice(args);
        step("hcp", &all, e)
    };
    let sections: Vec<(&str, Vec<Step>)> = vec![
        (
            "reads that succeed (transit, public, no login)",
            vec![
                exec(&["transit.plan", "Central", "Harbor"], Expect::Ok),
                exec(&["transit.status"], Expect::Ok),
            ],
        ),
        (
            "a value a shell would run arrives as one argument; nothing runs",
            vec![exec(
                &["echo.say", "hi; touch pwned && $(reboot)"],
                Expect::Ok,
            )],
        ),
        (
            "a write is refused without --confirm, accepted with it (ledger)",
            vec![
                exec(
                    &["ledger.post", "cash", "12.50", "coffee"],
                    Expect::Refused("confirm_required"),
                ),
                exec(
                    &["ledger.post", "cash", "12.50", "coffee", "--confirm"],
                    Expect::Ok,
                ),
                exec(&["ledger.balance"], Expect::Ok),
            ],
        ),
        (
            "the agent: refused without the grant, allowed after `hcp grant`",
            vec![
                exec(
                    &["transit.find", "Harbor"],
                    Expect::Refused("missing_grant"),
                )
                .agent(),
                step(
                    "hcp",
                    &["grant", AGENT, "transit", "verb.exec.read"],
                    Expect::Ok,
                ),
                exec(&["transit.find", "Harbor"], Expect::Ok).agent(),
                exec(
                    &["transit.find", "Harbor", "--project_id", "other"],
                    Expect::Refused("tenant_in_args"),
                )
                .agent(),
            ],
        ),
        (
            "brain land needs a project (mail notes.create)",
            vec![
                exec(
                    &[
                        "notes.create",
                        "--title",
                        "standup",
                        "--body",
                        "shipped the demo",
                    ],
                    Expect::Refused("project_required"),
                ),
                step(
                    "hcp",
                    &["grant", AGENT, "mail", "verb.exec.write"],
                    Expect::Ok,
                ),
                exec(
                    &[
                        "notes.create",
                        "--title",
                        "standup",
                        "--body",
                        "shipped the demo",
                    ],
                    Expect::Refused("not_project_member"),
                )
                .agent()
                .env("HCP_PROJECT", "elsewhere"),
                // Project and grant in order; the mail binding is minted by `hcp connect`,
                // which the agent has not run: the next step of the gate answers.
                exec(
                    &[
                        "notes.create",
                        "--title",
                        "standup",
                        "--body",
                        "shipped the demo",
                    ],
                    Expect::Refused("binding_required"),
                )
                .agent(),
            ],
        ),
        (
            "a git commit in a scratch repository (local land: the caller's directory)",
            vec![
                step("git", &["init", "-q", "-b", "main", "repo"], Expect::Ok),
                exec(
                    &["echo.write", "notes.txt", "first line", "--confirm"],
                    Expect::Ok,
                )
                .cwd("repo"),
                exec(&["git.status"], Expect::Ok).cwd("repo"),
                exec(&["git.add", "notes.txt"], Expect::Ok).cwd("repo"),
                exec(
                    &["git.commit", "--message", "notes: first line"],
                    Expect::Refused("confirm_required"),
                )
                .cwd("repo"),
                exec(
                    &["git.commit", "--message", "notes: first line", "--confirm"],
                    Expect::Ok,
                )
                .cwd("repo"),
                exec(&["git.log"], Expect::Ok).cwd("repo"),
                exec(
                    &["git.show", "--rev=--output=/tmp/x"],
                    Expect::Refused("arg_looks_like_flag"),
                )
                .cwd("repo"),
            ],
        ),
        (
            "the runtime policy: a write the agent confirms still waits for the owner (ledger)",
            vec![
                step(
                    "hcp",
                    &[
                        "grant",
                        AGENT,
                        "ledger",
                        "verb.exec.read",
                        "verb.exec.write",
                    ],
                    Expect::Ok,
                ),
                exec(
                    &["ledger.post", "cash", "3.20", "tea", "--confirm", "--json"],
                    Expect::Refused("requires_confirmation"),
                )
                .agent()
                .capture("APPROVAL"),
                step("hcp", &["approvals"], Expect::Ok).full(),
                step("hcp", &["approve", "$APPROVAL"], Expect::Ok),
                exec(
                    &["ledger.post", "cash", "3.20", "tea", "--confirm"],
                    Expect::Ok,
                )
                .agent(),
                exec(
                    &["ledger.post", "cash", "3.20", "tea", "--confirm"],
                    Expect::Refused("requires_confirmation"),
                )
                .agent(),
            ],
        ),
        (
            "every decision above is in the keyed audit trail, checked against its witness; every act of authority too (the owner's revoke below, each grant and session before it), each witnessed",
            vec![
                step(
                    "hcp",
                    &["revoke", AGENT, "echo", "verb.exec.write"],
                    Expect::Ok,
                ),
                step("hcp", &["audit", "verify"], Expect::Ok).full(),
                step("hcp", &["audit", "tail", "-n", "5"], Expect::Ok).full(),
            ],
        ),
    ];
    let mut sections = sections;
    let audit = sections.pop();
    for (title, steps) in sections {
        say(out, &format!("\n# {title}"))?;
        for s in &steps {
            run_step(demo, s, agent, &mut vars, out, &mut sum)?;
        }
    }
    openapi(demo, agent, out, &mut sum)?;
    say(
        out,
        "\n# the person in the loop: over MCP, a confirm-gated write asks the agent's person (elicitation)",
    )?;
    let grant = step(
        "hcp",
        &["grant", AGENT, "echo", "verb.exec.write"],
        Expect::Ok,
    );
    run_step(demo, &grant, agent, &mut vars, out, &mut sum)?;
    person::person_in_the_loop(demo, &token, out, &mut sum)?;
    if let Some((title, steps)) = audit {
        say(out, &format!("\n# {title}"))?;
        for s in &steps {
            run_step(demo, s, agent, &mut vars, out, &mut sum)?;
        }
    }
    Ok(sum)
}

/// The `kind: openapi` part (RUNTIME §1.3): the example task API started on a loopback
/// port, the operator pointing the gold `tasks` pack at it (`packs.tasks.server` in
/// `config.json`), and the agent's calls through the same gate: the grant, its own
/// binding from the connect verb (an operation), arguments typed and bounded by the
/// document, the confirm gate, the audit.
fn openapi(
    demo: &Demo,
    agent: Option<&str>,
    out: &mut dyn std::io::Write,
    sum: &mut Summary,
) -> Result<()> {
    use std::io::BufRead;
    writeln!(
        out,
        "\n# an HTTP API as a pack (kind: openapi): the example task API on a loopback port"
    )
    .context("cannot write the transcript")?;
    writeln!(out, "$ hcp-example-api &").context("cannot write the transcript")?;
    let mut server = demo
        .command(
            &demo.bin_dir.join("hcp-example-api").display().to_string(),
            &demo.work,
        )
        // The demo holds its stdin and stops it by closing it.
        .arg("--until-stdin-closes")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("cannot start `hcp-example-api`")?;
    let mut origin = String::new();
    if let Some(o) = server.stdout.take() {
        std::io::BufReader::new(o)
            .read_line(&mut origin)
            .context("cannot read the example API's origin")?;
    }
    let origin = origin.trim().to_owned();
    let result = (|| -> Result<()> {
        if !origin.starts_with("http://127.0.0.1:") {
            bail!("`hcp-example-api` printed `{origin}`, not its origin");
        }
        writeln!(out, "  ok · {origin}").context("cannot write the transcript")?;
        // The operator points the pack at the server with `hcp config set`, which keeps
        // every other key of config.json (the witness among them).
        let server = format!("{origin}/v1");
        let exec = |args: &[&str], e: Expect| {
            let mut all = vec!["exec"];
            all.extend_from_slice(args);
            step("hcp", &all, e)
        };
        let tasks = demo.packs.join("tasks").display().to_string();
        let steps = vec![
            step(
                "hcp",
                &["config", "set", "packs.tasks.server", &server],
                Expect::Ok,
            ),
            step("hcp", &["install", "--activate", &tasks], Expect::Ok),
            step("hcp", &["show", "tasks"], Expect::Ok).full(),
            // The owner reviewed the new pack: its verbs join the tool lock.
            step("hcp", &["policy", "lock"], Expect::Ok),
            exec(&["tasks.list"], Expect::Refused("missing_grant")).agent(),
            step(
                "hcp",
                &[
                    "grant",
                    AGENT,
                    "tasks",
                    "verb.exec.read",
                    "verb.exec.write",
                    "pack.connect",
                ],
                Expect::Ok,
            ),
            exec(&["tasks.list"], Expect::Refused("binding_required")).agent(),
            step(
                "hcp",
                &["connect", "tasks", "--user", "agent-1"],
                Expect::Ok,
            )
            .agent(),
            exec(
                &["tasks.add", "Write the report", "--priority", "high"],
                Expect::Ok,
            )
            .agent(),
            exec(&["tasks.list", "--status", "open"], Expect::Ok).agent(),
            exec(
                &["tasks.list", "--limit", "500"],
                Expect::Refused("arg_invalid"),
            )
            .agent(),
            exec(
                &["tasks.show", "../../admin"],
                Expect::Refused("arg_invalid"),
            )
            .agent(),
            exec(
                &["tasks.remove", "t-1"],
                Expect::Refused("confirm_required"),
            )
            .agent(),
            // The starting policy puts a confirmed write to the owner as well.
            exec(
                &["tasks.remove", "t-1", "--confirm", "--json"],
                Expect::Refused("requires_confirmation"),
            )
            .agent()
            .capture("APPROVAL"),
            step("hcp", &["approve", "$APPROVAL"], Expect::Ok),
            exec(&["tasks.remove", "t-1", "--confirm"], Expect::Ok).agent(),
            step("hcp", &["audit", "verify"], Expect::Ok),
        ];
        let mut vars = BTreeMap::new();
        for s in &steps {
            run_step(demo, s, agent, &mut vars, out, sum)?;
        }
        Ok(())
    })();
    // Closing its stdin stops the server.
    drop(server.stdin.take());
    let _ = server.wait();
    result
}

fn run_step(
    demo: &Demo,
    s: &Step,
    token: Option<&str>,
    vars: &mut BTreeMap<&'static str, String>,
    out: &mut dyn std::io::Write,
    sum: &mut Summary,
) -> Result<()> {
    let mut line = String::from("$ ");
    if let Some(d) = s.cwd {
        line.push_str(&format!("(cd {d} && "));
    }
    if s.agent {
        line.push_str("HCP_SESSION=$AGENT ");
    }
    for (k, v) in &s.env {
        line.push_str(&format!("{k}={} ", quote(v)));
    }
    line.push_str(s.program);
    for a in &s.args {
        line.push(' ');
        let shown = a
            .replace(&demo.policy.display().to_string(), "examples/policy.yaml")
            .replace(&demo.hcp_home.display().to_string(), "$HCP_HOME")
            .replace(&demo.packs.display().to_string(), "packs");
        line.push_str(&if shown.starts_with("$HCP_HOME/") {
            shown
        } else {
            quote(&shown)
        });
    }
    if s.cwd.is_some() {
        line.push(')');
    }
    writeln!(out, "{line}").context("cannot write the transcript")?;
    let cwd = s.cwd.map_or(demo.work.clone(), |d| demo.work.join(d));
    let mut c = demo.command(s.program, &cwd);
    for a in &s.args {
        match a.strip_prefix('$').and_then(|v| vars.get(v)) {
            Some(value) => c.arg(value),
            None => c.arg(a),
        };
    }
    if s.agent {
        let Some(t) = token else {
            bail!("an agent step before the session started");
        };
        c.env("HCP_SESSION", t);
    }
    for (k, v) in &s.env {
        c.env(k, v);
    }
    let o = c
        .output()
        .with_context(|| format!("cannot run `{}`", s.program))?;
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let exit = o.status.code().unwrap_or(-1);
    // A refusal's code is on its `  code: …` line of stderr, or in the object `--json`
    // prints.
    let answer: Option<Value> = serde_json::from_str(stdout.trim()).ok();
    let code = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("code: "))
        .map(str::to_owned)
        .or_else(|| {
            answer
                .as_ref()
                .and_then(|v| v["code"].as_str())
                .map(str::to_owned)
        });
    if let (Some(var), Some(id)) = (
        s.capture,
        answer.as_ref().and_then(|v| v["approval_id"].as_str()),
    ) {
        vars.insert(var, id.to_owned());
        writeln!(out, "  (APPROVAL={id})").context("cannot write the transcript")?;
    }
    let error = if error_of(&stderr).is_empty() {
        answer
            .as_ref()
            .and_then(|v| v["error"].as_str())
            .unwrap_or("")
            .to_owned()
    } else {
        error_of(&stderr)
    };
    match (&s.expect, exit, code.as_deref()) {
        (Expect::Ok, 0, _) => {
            sum.ok += 1;
            let shown = if stdout.trim().is_empty() {
                String::new()
            } else if s.full {
                let lines: Vec<String> = stdout.lines().map(|l| format!("    {l}")).collect();
                format!("\n{}", lines.join("\n"))
            } else {
                format!(" · {}", excerpt(&shown_output(&stdout)))
            };
            writeln!(out, "  ok{shown}").context("cannot write the transcript")?;
            Ok(())
        }
        (Expect::Refused(want), _, Some(got)) if *want == got && exit != 0 => {
            sum.refused += 1;
            writeln!(out, "  refused · {got} (exit {exit}): {error}")
                .context("cannot write the transcript")?;
            Ok(())
        }
        (e, _, _) => {
            writeln!(
                out,
                "  UNEXPECTED (exit {exit}){}\n{}{}",
                code.map(|c| format!(" code {c}")).unwrap_or_default(),
                stdout,
                stderr
            )
            .context("cannot write the transcript")?;
            bail!("step `{line}` answered exit {exit}, expected {e:?}")
        }
    }
}

/// The `error: …` line of stderr.
fn error_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or("")
        .to_owned()
}

/// The child output as a person would read it: a JSON object compacted to its keys'
/// first values, else the text.
fn shown_output(stdout: &str) -> String {
    match serde_json::from_str::<Value>(stdout.trim()) {
        Ok(v) => v.to_string(),
        Err(_) => stdout.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Write as _;

    #[test]
    fn quoting_for_the_shell_line() {
        assert_eq!(quote("transit.plan"), "transit.plan");
        assert_eq!(quote("--message=x"), "--message=x");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    /// Runs the whole script against the bins built next to this test (`cargo test
    /// --workspace` builds them; `cargo test -p xtask` alone may not, and then this test
    /// says so where a plain `cargo test` shows it and does nothing; under `CI=true` that
    /// is a failure).
    #[test]
    fn the_script_answers_as_scripted_against_the_built_bins() {
        let bins = profile_dir().unwrap();
        if !bins.join("hcp").is_file() || !bins.join("hcp-example-transit").is_file() {
            let reason = format!("no built `hcp` and example bins in {}", bins.display());
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI=true and the demo cannot run: {reason}"
            );
            // Straight to the process's stderr: the test harness does not capture it.
            let _ = writeln!(
                std::io::stderr().lock(),
                "skipped: the_script_answers_as_scripted_against_the_built_bins: {reason}"
            );
            hcp_examples::skipped::record(
                "demo::tests::the_script_answers_as_scripted_against_the_built_bins",
                &reason,
            );
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let packs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs");
        let demo = Demo::new(bins, tmp.path().join("demo"), packs).unwrap();
        let mut transcript = Vec::new();
        let sum = script(&demo, &mut transcript).unwrap();
        let text = String::from_utf8(transcript).unwrap();
        assert_eq!(
            sum,
            Summary {
                ok: 46,
                refused: 17
            },
            "{text}"
        );
        assert!(
            text.contains("refused · requires_confirmation (exit 77)"),
            "{text}"
        );
        assert!(text.contains("refused · arg_invalid (exit 65)"), "{text}");
        assert!(text.contains("→ the person answers `accept`"), "{text}");
        assert!(
            text.contains("refused · confirm_required: confirm required"),
            "{text}"
        );
        assert!(demo.work.join("approved.txt").exists());
        assert!(!demo.work.join("declined.txt").exists());
        assert!(text.contains("refused · confirm_required (exit 77): confirm required"));
        assert!(text.contains("audit trail intact"), "{text}");
        assert!(text.contains("extends the witness (directory"), "{text}");
        assert!(
            text.contains("act       owner (uid")
                && text.contains("  revoke  all=false capabilities="),
            "{text}"
        );
        assert!(!demo.work.join("pwned").exists());
    }
}
