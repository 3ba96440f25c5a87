//! Child preparation (RUNTIME §5 step 9 and "The child"), after the gate and before
//! admission: the verified bin, argv, the environment's layers, the configuration's
//! limits and the sandbox of `local` land. Nothing here spends: a failure refuses the call
//! with every approval and counter slot untouched.

use crate::call::Caller;
use crate::refusal::Refusal;
use hcp_adapter::{CallVars, ChildEnv, Confinement, PrivateTmp, SessionValues, VerifiedBin};
use hcp_gate::Allowed;
use hcp_model::{ArgValue, Land};
use hcp_store::Home;
use hcp_store::config::{ConfigError, LimitsConfig, NetworkMode, RuntimeConfig, TmpdirMode};
use hcp_store::pack::InstalledPack;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

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
    /// Resource limits, and for `local` land the Landlock ruleset.
    pub confinement: Confinement,
    /// The private `TMPDIR` of a `local` call, removed after the run.
    pub private_tmp: Option<PrivateTmp>,
    /// What the sandbox enforces (`landlock abi N`, `unconfined`), for `local` land.
    pub sandbox: Option<String>,
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
    /// The principal id.
    pub principal_id: &'a str,
    /// Whether the principal is the owner.
    pub owner: bool,
    /// The credential object, for the binding's variables.
    pub secret: Option<&'a Map<String, Value>>,
    /// `config.json` as the snapshot read it; its failure refuses here, after the bin
    /// and argv checks (RUNTIME §5's order as exec has always answered it).
    pub config: &'a Result<RuntimeConfig, ConfigError>,
}

/// Prepares the child of `spec`, in this order: the verified bin, argv, the environment
/// (parent's allowed names, `HCP_HOME` for the bootstrap pack), the configuration's
/// limits tightened by `HCP_LIMITS`, the `local` sandbox and private `TMPDIR`, then the
/// pack's `agent_env`, the call's `HCP_*` and the binding.
///
/// # Errors
/// The pin's (`bin_missing`, `bin_changed` …), the adapter's (`arg_invalid`,
/// `sandbox_unavailable`, `env_refused` …).
pub fn child(home: &Home, caller: &Caller, spec: &ChildSpec<'_>) -> Result<Child, Refusal> {
    let allowed = spec.allowed;
    let pack = spec.pack;
    let bin = crate::pins::verify(pack, &allowed.plan.program)?;
    let session_values = SessionValues {
        principal_id: spec.principal_id.to_owned(),
        project_id: allowed.project.clone(),
        workdir: allowed.workdir.clone(),
    };
    let args = hcp_adapter::render(&allowed.plan.args, spec.values, &session_values, spec.key)
        .map_err(|e| Refusal::adapter(&e))?;
    let mut env = ChildEnv::from_parent(caller.parent_env.iter().cloned());
    if is_running_hcp(bin.path()) {
        // The bootstrap pack (hcp-cli) wraps hcp itself: it reads this store (DESIGN.md).
        env = env.hcp_home(home.root());
        if !spec.owner {
            // …as the caller, never as the owner: an agent granted hcp-cli does not read
            // the owner-only audit through it.
            env = env.not_the_owner();
        }
    }
    let config = spec.config.as_ref().map_err(|e| {
        Refusal::new(e.code(), e.to_string())
            .hint("fix `config.json` in the store; every call is refused until it parses")
    })?;
    let mut policy = sandbox_policy(config);
    policy.limits = policy.limits.tightened(&caller.limit_overrides);
    let mut private_tmp = None;
    let mut sandbox = None;
    let confinement = if allowed.land == Land::Local {
        env = env.home(&allowed.workdir);
        let base = match config.sandbox.tmpdir {
            TmpdirMode::Memory => PrivateTmp::default_base(),
            TmpdirMode::System => std::env::temp_dir(),
        };
        PrivateTmp::sweep(&base);
        let tmp = PrivateTmp::create_in(&base).map_err(|e| Refusal::adapter(&e))?;
        env = env.tmpdir(tmp.path());
        // The store is never writable from a sandbox. Homes (the caller's `$HOME` and
        // every home in /etc/passwd: the environment alone could hide the user's) may
        // hold sandboxes, outside their dot-directories, but may not be or lie in one.
        let not_above = user_homes(
            caller
                .parent_env
                .iter()
                .filter(|(k, _)| k == "HOME")
                .map(|(_, v)| PathBuf::from(v)),
        );
        let protected = [home.root().to_path_buf()];
        let paths = hcp_adapter::SandboxPaths {
            workdir: &allowed.workdir,
            tmpdir: tmp.path(),
            bin: bin.path(),
            extra_ro: &[],
            protected: &protected,
            not_above: &not_above,
        };
        let (c, report) =
            Confinement::for_local_land(&paths, &policy).map_err(|e| Refusal::adapter(&e))?;
        sandbox = Some(report.summary());
        private_tmp = Some(tmp);
        c
    } else {
        Confinement::with_limits(&policy.limits)
    };
    // A child never outlives a killed hcp (SIGKILL cannot be caught).
    let confinement = confinement.die_with_parent();
    let env = layer_env(env, pack, spec.key, spec.principal_id, allowed, spec.secret)
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
        confinement,
        private_tmp,
        sandbox,
    })
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

/// The adapter's sandbox policy from the runtime configuration (the limits before any
/// per-call tightening).
pub fn sandbox_policy(config: &RuntimeConfig) -> hcp_adapter::SandboxPolicy {
    hcp_adapter::SandboxPolicy {
        require: config.sandbox.require,
        network: match config.sandbox.network {
            NetworkMode::Allow => hcp_adapter::Network::Allow,
            NetworkMode::Deny => hcp_adapter::Network::Deny,
        },
        limits: resource_limits(&config.limits),
    }
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
fn is_running_hcp(bin: &Path) -> bool {
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
