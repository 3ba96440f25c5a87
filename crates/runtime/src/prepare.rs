//! Child preparation (RUNTIME §5 step 9, "The child" and "Confinement of every land"),
//! after the gate and before admission: the verified bin, argv, the environment's layers,
//! the configuration's limits and the kernel confinement of the child, whatever its land
//! ([`confine`]: `hcp_adapter::Confinement::for_call` with every input it needs). Nothing
//! here spends: a failure refuses the call with every approval and counter slot untouched.

use crate::call::Caller;
use crate::refusal::Refusal;
use hcp_adapter::{
    CallPolicy, CallSandbox, CallVars, ChildEnv, Confinement, PrivateTmp, SandboxReport,
    SessionValues, VerifiedBin,
};
use hcp_gate::Allowed;
use hcp_model::{ArgValue, Land, Principal};
use hcp_store::Home;
use hcp_store::config::{ConfigError, LimitsConfig, NetworkMode, RuntimeConfig, TmpdirMode};
use hcp_store::pack::InstalledPack;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What the bootstrap pack (`hcp-cli`, whose pinned bin is the running `hcp`) may not read
/// of the store it otherwise reads (RUNTIME §5): the credentials, the sessions, the audit
/// trail's args-digest secret and its checkpoint signing key, the operator's runtime
/// policy (RUNTIME §7: its canaries and rules are not the agent's to read) and its
/// compiled cache. Relative to `$HCP_HOME`.
pub const BOOTSTRAP_HIDDEN: [&str; 7] = [
    "state/bindings",
    "state/sessions",
    "audit/digest.secret",
    "audit/checkpoint.key",
    "policy.json",
    "policy.yaml",
    "cache",
];

/// A child ready to run.
#[derive(Debug)]
pub struct Child {
    /// The verified, open bin.
    pub bin: VerifiedBin,
    /// `argv[0]`: the CLI name.
    pub argv0: OsString,
    /// `argv[1..]`.
    pub args: Vec<OsString>,
    /// The exact environment.
    pub env: ChildEnv,
    /// The working directory.
    pub cwd: PathBuf,
    /// The kernel confinement (drop it after the run: it removes the call's cgroup and
    /// what covers the hidden paths).
    pub confinement: Confinement,
    /// The private `TMPDIR`, removed after the run.
    pub private_tmp: Option<PrivateTmp>,
    /// The result's and the audit record's `sandbox` field (RUNTIME §5):
    /// `{"filesystem", "network", "processes"}`, each `"enforced"`, `"allowed"` or why not.
    pub sandbox: Option<Value>,
}

/// What preparation needs of the call.
#[derive(Debug, Clone, Copy)]
pub struct ChildSpec<'a> {
    /// The pack.
    pub pack: &'a InstalledPack,
    /// The verb key or stimulus ref (`HCP_VERB_KEY`).
    pub key: &'a str,
    /// The gate's answer.
    pub allowed: &'a Allowed,
    /// The values after the runtime policy's `bind`.
    pub values: &'a BTreeMap<String, ArgValue>,
    /// Who calls.
    pub principal: &'a Principal,
    /// The credential object, for the binding's variables.
    pub secret: Option<&'a Map<String, Value>>,
    /// `config.json` as the snapshot read it; its failure refuses here, after the bin
    /// and argv checks (RUNTIME §5's order as exec has always answered it).
    pub config: &'a Result<RuntimeConfig, ConfigError>,
    /// The sessions' working directories, as the snapshot read them
    /// ([`crate::snapshot::Snapshot::sandboxes`]).
    pub sandboxes: &'a Result<Vec<(String, PathBuf)>, Refusal>,
}

/// Prepares the child of `spec`, in this order: the verified bin, argv, the environment
/// (parent's allowed names, `HCP_HOME` for the bootstrap pack), the configuration, the
/// confinement and its private `TMPDIR` ([`confine`]), then the land's `HOME`, the pack's
/// `agent_env`, the call's `HCP_*` and the binding.
///
/// # Errors
/// The pin's (`bin_missing`, `bin_changed` …), the adapter's (`arg_invalid`,
/// `sandbox_unavailable`, `sandbox_failed`, `env_refused` …), the configuration's
/// (`bad_config`), the state's when the sessions could not be listed.
pub fn child(home: &Home, caller: &Caller, spec: &ChildSpec<'_>) -> Result<Child, Refusal> {
    let allowed = spec.allowed;
    let pack = spec.pack;
    let bin = crate::pins::verify(pack, &allowed.plan.program)?;
    let session_values = SessionValues {
        principal_id: spec.principal.id.clone(),
        project_id: allowed.project.clone(),
        workdir: allowed.workdir.clone(),
    };
    let args = hcp_adapter::render(&allowed.plan.args, spec.values, &session_values, spec.key)
        .map_err(|e| Refusal::adapter(&e))?;
    let mut env = ChildEnv::from_parent(caller.parent_env.iter().cloned());
    let bootstrap = is_running_hcp(bin.path());
    if bootstrap {
        // The bootstrap pack (hcp-cli) wraps hcp itself: it reads this store (DESIGN.md).
        env = env.hcp_home(home.root());
        if !spec.principal.is_owner() {
            // …as the caller, never as the owner: an agent granted hcp-cli does not read
            // the owner-only audit through it.
            env = env.not_the_owner();
        }
    }
    let config = config_of(spec.config)?;
    let sandboxes = spec.sandboxes.as_ref().map_err(Clone::clone)?;
    let confined = confine(
        home,
        caller,
        &ConfineSpec {
            land: allowed.land,
            principal: spec.principal,
            workdir: &allowed.workdir,
            bin: bin.path(),
            bootstrap,
            pack_id: pack.id.as_str(),
            config,
            sandboxes,
        },
    )?;
    env = env.tmpdir(confined.tmp.path());
    if allowed.land == Land::Local {
        env = env.home(&allowed.workdir);
    }
    let env = layer_env(
        env,
        pack,
        spec.key,
        &spec.principal.id,
        allowed,
        spec.secret,
    )
    .map_err(|e| Refusal::adapter(&e))?;
    let argv0 = pack
        .manifest
        .cli_bin
        .clone()
        .unwrap_or_else(|| allowed.plan.program.clone());
    Ok(Child {
        bin,
        argv0: argv0.into(),
        args,
        env,
        cwd: allowed.workdir.clone(),
        confinement: confined.confinement,
        private_tmp: Some(confined.tmp),
        sandbox: Some(confined.report.field_json()),
    })
}

/// `config.json`, or the refusal of a configuration that does not load.
///
/// # Errors
/// `bad_config` (78) or `store_io` (74).
pub fn config_of(config: &Result<RuntimeConfig, ConfigError>) -> Result<&RuntimeConfig, Refusal> {
    config.as_ref().map_err(|e| {
        Refusal::new(e.code(), e.to_string())
            .hint("fix `config.json` in the store; every call is refused until it parses")
    })
}

/// What [`confine`] needs of one call.
#[derive(Debug, Clone, Copy)]
pub struct ConfineSpec<'a> {
    /// The verb's (or trigger's) land.
    pub land: Land,
    /// Who calls (the owner's child gets no nested-call marker).
    pub principal: &'a Principal,
    /// The child's working directory (the gate's: the sandbox of a `local` call).
    pub workdir: &'a Path,
    /// The verified bin.
    pub bin: &'a Path,
    /// Whether the bin is the running `hcp` (the bootstrap pack).
    pub bootstrap: bool,
    /// The pack, for its entry of `config.json` `packs`.
    pub pack_id: &'a str,
    /// `config.json`.
    pub config: &'a RuntimeConfig,
    /// Every session's working directory with its principal (the snapshot's).
    pub sandboxes: &'a [(String, PathBuf)],
}

/// A child's confinement, its report and its private `TMPDIR`.
#[derive(Debug)]
pub struct Confined {
    /// What the child applies between `clone` and `execve`; drop it after the run.
    pub confinement: Confinement,
    /// What holds (`report.field_json()` is the `sandbox` field).
    pub report: SandboxReport,
    /// The private `TMPDIR`, removed after the run (after the confinement is dropped).
    pub tmp: PrivateTmp,
}

/// The kernel confinement of one call's child, every land (RUNTIME §5 "Confinement of
/// every land"), from `config.json` and what the snapshot read: a fresh private `TMPDIR`,
/// then `hcp_adapter::Confinement::for_call` (which sweeps what killed calls left beside
/// it) with the store hidden (the bootstrap pack: [`BOOTSTRAP_HIDDEN`]), the caller's homes'
/// secrets, other principals' session working directories, `sandbox.protect`, the
/// agent and bus sockets the caller's environment names and the Unix sockets of a fleet's
/// state database (`state.url`); the pack's `read` and `write`
/// grants; its network (`packs.ID.network`, else `sandbox.network`, else the land's);
/// the limits tightened by `HCP_LIMITS`.
///
/// # Errors
/// The adapter's `sandbox_unavailable` (77) and `sandbox_failed` (126).
pub fn confine(home: &Home, caller: &Caller, s: &ConfineSpec<'_>) -> Result<Confined, Refusal> {
    let config = s.config;
    let base = match config.sandbox.tmpdir {
        TmpdirMode::Memory => PrivateTmp::default_base(),
        TmpdirMode::System => std::env::temp_dir(),
    };
    // `for_call` sweeps what killed calls left in `base`.
    let tmp = PrivateTmp::create_in(&base).map_err(|e| Refusal::adapter(&e))?;
    let home_env = caller
        .parent_env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v));
    let homes = hcp_adapter::own_homes(home_env.as_deref());
    // Homes a `local` sandbox may lie in but neither be nor hold: the caller's `$HOME` and
    // every home in /etc/passwd (the environment alone could hide the user's).
    let not_above = if s.land == Land::Local {
        user_homes(home_env.into_iter())
    } else {
        Vec::new()
    };
    let mut protect: Vec<PathBuf> = config
        .sandbox
        .protect
        .iter()
        .flat_map(|p| p.resolve_in(&homes))
        .collect();
    protect.extend(hcp_adapter::session_sockets(
        caller.parent_env.iter().map(|(k, v)| (k, v)),
    ));
    // A fleet's state database on a Unix socket: the child never reaches it, whatever
    // its network (the database is the store of RUNTIME §9; its role is the owner's).
    if let Some(state) = &config.state {
        protect.extend(hcp_state_pg::PgConfig::sockets(state));
    }
    let owner = s.principal.is_owner();
    let others = other_sandboxes(s.sandboxes, &s.principal.id, owner, s.workdir);
    let pack = config.pack(s.pack_id);
    let read: Vec<PathBuf> = pack.read.iter().map(|p| p.path()).collect();
    let write: Vec<PathBuf> = pack.write.iter().map(|p| p.path()).collect();
    let bootstrap: Vec<PathBuf> = BOOTSTRAP_HIDDEN
        .iter()
        .map(|p| home.root().join(p))
        .collect();
    let call = CallSandbox {
        land: s.land,
        owner,
        workdir: s.workdir,
        tmpdir: tmp.path(),
        bin: s.bin,
        hcp_home: home.root(),
        bootstrap: s.bootstrap.then_some(bootstrap.as_slice()),
        homes: &homes,
        not_above: &not_above,
        other_sandboxes: &others,
        protect: &protect,
        read: &read,
        write: &write,
        extra_ro: &[],
    };
    let policy = CallPolicy {
        require: config.sandbox.require,
        network: config.network_for(s.pack_id).map(network),
        limits: resource_limits(&config.limits).tightened(&caller.limit_overrides),
    };
    let (confinement, report) =
        Confinement::for_call(&call, &policy).map_err(|e| Refusal::adapter(&e))?;
    Ok(Confined {
        confinement,
        report,
        tmp,
    })
}

/// The adapter's network of a configured mode.
pub fn network(mode: NetworkMode) -> hcp_adapter::Network {
    match mode {
        NetworkMode::Allow => hcp_adapter::Network::Allow,
        NetworkMode::Deny => hcp_adapter::Network::Deny,
    }
}

/// Other principals' sandboxes (RUNTIME §5: hidden from every call): the working
/// directory of every session whose principal is not `principal_id`, except the ones that
/// are or hold the caller's own: for a session, its own working directory (the operator
/// gave two principals one sandbox), for the owner, the directory the call works in.
fn other_sandboxes(
    sandboxes: &[(String, PathBuf)],
    principal_id: &str,
    owner: bool,
    workdir: &Path,
) -> Vec<PathBuf> {
    let own: Vec<&PathBuf> = sandboxes
        .iter()
        .filter(|(p, _)| !owner && p == principal_id)
        .map(|(_, d)| d)
        .collect();
    let mut out: Vec<PathBuf> = sandboxes
        .iter()
        .filter(|(p, _)| owner || p != principal_id)
        .map(|(_, d)| d)
        .filter(|d| !own.iter().any(|o| o.starts_with(d)))
        .filter(|d| !(owner && workdir.starts_with(d)))
        .cloned()
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The last layers of a child's environment (RUNTIME §5), after the parent's allowed
/// names and the land's `HOME`/`TMPDIR`: the pack's `wrap.agent_env`, the call's `HCP_*`
/// variables, then the binding.
///
/// # Errors
/// The adapter's `env_refused` for an `agent_env` name or value it refuses.
pub fn layer_env(
    env: ChildEnv,
    pack: &InstalledPack,
    key: &str,
    principal_id: &str,
    allowed: &Allowed,
    secret: Option<&Map<String, Value>>,
) -> Result<ChildEnv, hcp_adapter::AdapterError> {
    let mut env = env;
    if let Some(agent_env) = pack
        .manifest
        .wrap
        .as_ref()
        .and_then(|w| w.agent_env.as_ref())
    {
        env = env.agent_env(agent_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))?;
    }
    env = env.call(&CallVars {
        pack_id: pack.id.as_str(),
        verb_key: key,
        principal_id,
        project_id: allowed.project.as_deref(),
        workdir: &allowed.workdir,
    })?;
    if let Some(s) = secret {
        env = env.binding(s)?;
    }
    Ok(env)
}

/// The adapter's resource limits from `limits` of the runtime configuration.
pub fn resource_limits(l: &LimitsConfig) -> hcp_adapter::ResourceLimits {
    hcp_adapter::ResourceLimits {
        cpu_seconds: l.cpu_seconds,
        address_space_bytes: l.address_space_bytes,
        open_files: l.open_files,
        file_size_bytes: l.file_size_bytes,
        processes: l.processes,
    }
}

/// Whether `bin` is the very file of the running hcp (same device and inode).
pub fn is_running_hcp(bin: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(me), Ok(it)) = (std::fs::metadata("/proc/self/exe"), std::fs::metadata(bin)) else {
        return false;
    };
    me.dev() == it.dev() && me.ino() == it.ino()
}

/// Home directories a sandbox may not be, hold, or lie in a dot-directory of:
/// `from_env` (the caller's `$HOME`) and every home in /etc/passwd (read directly, without
/// NSS; a user only known to a directory service is covered by `$HOME` alone), except
/// `/` and homes inside `hcp_adapter::NOT_A_SANDBOX` directories (no sandbox lies there
/// anyway). Deduplicated, in that order.
fn user_homes(from_env: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = from_env.filter(|h| h.is_absolute()).collect();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    for home in passwd
        .lines()
        .filter_map(|l| l.split(':').nth(5))
        .map(PathBuf::from)
    {
        let system = hcp_adapter::NOT_A_SANDBOX
            .iter()
            .any(|d| home.starts_with(d));
        if home.is_absolute() && home != Path::new("/") && !system && !homes.contains(&home) {
            homes.push(home);
        }
    }
    homes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_pack_never_reads_the_audit_secrets() {
        for f in [
            hcp_store::audit::DIGEST_SECRET_FILE,
            hcp_store::audit::checkpoint::KEY_FILE,
        ] {
            assert!(
                BOOTSTRAP_HIDDEN.contains(&format!("audit/{f}").as_str()),
                "{f}"
            );
        }
    }

    #[test]
    fn other_sandboxes_leave_out_the_callers_own() {
        let s = |p: &str, d: &str| (p.to_owned(), PathBuf::from(d));
        let all = [
            s("agent-1", "/w/a"),
            s("agent-2", "/w/b"),
            s("agent-2", "/w/shared"),
            s("agent-3", "/w/shared"),
            s("agent-3", "/w"),
        ];
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        // A session: the others' directories, but those that are or hold its own.
        assert_eq!(
            other_sandboxes(&all, "agent-2", false, Path::new("/w/b")),
            p(&["/w/a"])
        );
        assert_eq!(
            other_sandboxes(&all, "agent-1", false, Path::new("/w/a")),
            p(&["/w/b", "/w/shared"])
        );
        // The owner: every session's, but those its call works in.
        assert_eq!(
            other_sandboxes(&all, "owner", true, Path::new("/w/b/sub")),
            p(&["/w/a", "/w/shared"])
        );
        assert_eq!(
            other_sandboxes(&all, "owner", true, Path::new("/elsewhere")),
            p(&["/w", "/w/a", "/w/b", "/w/shared"])
        );
    }
}
