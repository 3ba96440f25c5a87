//! Child preparation (RUNTIME §5 step 9, "The child", §5.1–§5.4), after the gate and before
//! admission: the verified bin, argv, the environment's layers, the configuration's limits
//! and the kernel confinement of the child, whatever its land ([`confine`]:
//! `hcp_adapter::Confinement::for_call` with every input it needs: the tenant home, the
//! `/etc` index, the operator's paths, the network). Nothing here spends: a failure refuses
//! the call with every approval and counter slot untouched.

use crate::caller::Caller;
use crate::refusal::Refusal;
use hcp_adapter::{
    CallPolicy, CallSandbox, CallVars, ChildEnv, Confinement, SandboxReport, SessionValues,
    VerifiedBin,
};
use hcp_gate::Allowed;
use hcp_model::{ArgValue, CallFacts, Code, Land, Operation, Principal};
use hcp_store::Home;
use hcp_store::config::{ConfigError, LimitsConfig, NetworkMode, RuntimeConfig};
use hcp_store::pack::InstalledPack;
use hcp_store::tenant::{OWNER_TENANT, Tenant, ensure_tenant_home, tenant_home_path};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What the bootstrap pack (`hcp-cli`, whose pinned bin is the running `hcp`) may not read
/// of the store it otherwise reads (RUNTIME §5.1): the credentials, the sessions, the audit
/// trail's keys (`hcp_store::audit::KEY_FILES`: chain key, args-digest secret, checkpoint
/// signing key), the operator's runtime policy (RUNTIME §7: its canaries and rules are not
/// the agent's to read) and its compiled cache, the tenant homes (other tenants' data) and
/// the quarantine (what other calls planted). Relative to `$HCP_HOME`; each that exists is
/// covered in its view.
pub const BOOTSTRAP_HIDDEN: [&str; 10] = [
    "state/bindings",
    "state/sessions",
    "audit/chain.key",
    "audit/digest.secret",
    "audit/checkpoint.key",
    "policy.json",
    "policy.yaml",
    "cache",
    "homes",
    "quarantine",
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
    /// The working directory, in the child's view.
    pub cwd: PathBuf,
    /// The kernel confinement (drop it after the run: it releases the call's cgroups).
    pub confinement: Confinement,
    /// The result's and the audit record's `sandbox` field (RUNTIME §5.4):
    /// `{"filesystem", "processes", "privileges", "memory", "network"}`.
    pub sandbox: Option<Value>,
    /// The hint the result carries when the child tried a socket under `network: deny`
    /// (RUNTIME §5.3), naming the key.
    pub network_hint: String,
    /// Under `{"allow": …}`: the egress proxy the child's listener is served by
    /// (RUNTIME §5.5, [`crate::egress`]).
    pub egress: Option<crate::egress::CallEgress>,
    /// The fingerprints of the bins hashed to verify it, kept once the call is admitted
    /// ([`crate::pins::Fresh::keep`]).
    pub fresh: crate::pins::Fresh,
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
}

/// Prepares the child of `spec`, in this order: the verified bin, argv, the environment
/// (parent's allowed names, `HCP_HOME` for the bootstrap pack), the configuration, the
/// confinement ([`confine`]), then `HOME`, `TMPDIR`, `PATH` and the proxy variables of the
/// view, the pack's `agent_env`, the call's `HCP_*` and the binding.
///
/// # Errors
/// The pin's (`bin_missing`, `bin_changed` …), `bad_workdir` (64) for a `local` workdir
/// that may not be one ([`crate::workdir::check`]), the adapter's (`arg_invalid`,
/// `sandbox_unavailable`, `sandbox_failed`, `env_refused` …), the configuration's
/// (`bad_config`), the store's when the tenant home cannot be made,.
pub fn child(home: &Home, caller: &Caller, spec: &ChildSpec<'_>) -> Result<Child, Refusal> {
    let allowed = spec.allowed;
    let pack = spec.pack;
    let (bin, fresh) = crate::pins::verify_deferred(pack, &allowed.plan.program)?;
    let session_values = SessionValues {
        principal_id: spec.principal.id.clone(),
        project_id: allowed.project.clone(),
        workdir: allowed.workdir.clone(),
    };
    let args = hcp_adapter::render(&allowed.plan.args, spec.values, &session_values, spec.key)
        .map_err(|e| Refusal::adapter(&e))?;
    let mut env = ChildEnv::from_parent(caller.parent_env.iter().cloned());
    let bootstrap = is_bootstrap(pack, bin.path());
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
    if allowed.land == hcp_model::Land::Local {
        // RUNTIME §4: the session's workdir, else the caller's directory, by the rules of
        // `session start` (the live sessions of others apart: calls never read them).
        let around = crate::workdir::Around {
            stores: crate::workdir::stores_of(
                home.root(),
                crate::home::homes_of(home.root(), config),
            ),
            homes: crate::workdir::machine_homes(std::env::var_os("HOME").map(PathBuf::from)),
            others: Vec::new(),
            writable: allowed.operation == Operation::Write,
        };
        crate::workdir::check(&allowed.workdir, &around)?;
    }
    let confined = confine(
        home,
        caller,
        &ConfineSpec {
            land: allowed.land,
            caller: spec.principal.kind(),
            principal_id: &spec.principal.id,
            project: allowed.project.as_deref(),
            writes: allowed.operation == Operation::Write,
            workdir: &allowed.workdir,
            bin: &bin,
            bootstrap,
            pack_id: pack.id.as_str(),
            config,
        },
    )?;
    let env = confined.env(env);
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
        cwd: confined.cwd.clone(),
        sandbox: Some(confined.report.field_json()),
        network_hint: network_hint(pack.id.as_str()),
        egress: crate::egress::for_call(config, pack.id.as_str(), confined.proxy.is_some())?,
        fresh,
        confinement: confined.confinement,
    })
}

/// What the run of `child` taught about its call, added to the result and the outcome
/// record (RUNTIME §5.1, §5.3): its `sandbox` field says when the kernel refused the call a
/// `/proc` of its own, and a call whose child tried to make a socket under `network: deny`
/// carries the hint naming the key ([`network_hint`]) and, in its record,
/// `socket_attempts`.
pub fn after_run(child: &Child, outcome: &hcp_adapter::Outcome, facts: &mut CallFacts) {
    if outcome.no_proc && facts.sandbox.is_some() {
        facts.sandbox_after_run().insert(
            "filesystem".into(),
            "enforced, without a /proc: the kernel refused the call one of its own".into(),
        );
    }
    if outcome.socket_attempts > 0 {
        facts.hint = Some(child.network_hint.clone());
        facts.socket_attempts = Some(outcome.socket_attempts);
    }
}

/// The error of a call whose processes together reached `limits.memory_bytes` (RUNTIME
/// §5.4, `memory_exceeded`).
pub const MEMORY_EXCEEDED: &str =
    "the verb's processes together reached `limits.memory_bytes`; the whole call was ended";

/// The hint of a call whose child tried a socket under `network: deny` (RUNTIME §5.3).
pub fn network_hint(pack_id: &str) -> String {
    format!(
        "the verb tried to open a network socket, and its network is `deny`; the owner may set `packs.{pack_id}.network` in `config.json` to `{{\"allow\": [\"HOST:PORT\"]}}` or `\"host\"`"
    )
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
    /// Whose call: the owner's (no nested-call marker) or a session's.
    pub caller: hcp_model::principal::Kind,
    /// The caller's principal id (`owner` without a session).
    pub principal_id: &'a str,
    /// The call's project (a `brain` call's tenant).
    pub project: Option<&'a str>,
    /// A `write` verb or trigger: a `local` workdir read-write, with its protected names,
    /// and a `personal`/`brain` tenant home read-write; a `read` one gets both read-only.
    pub writes: bool,
    /// The gate's working directory (the workdir of a `local` call).
    pub workdir: &'a Path,
    /// The verified bin.
    pub bin: &'a VerifiedBin,
    /// Whether the bin is the running `hcp` (the bootstrap pack).
    pub bootstrap: bool,
    /// The pack, for its entry of `config.json` `packs`.
    pub pack_id: &'a str,
    /// `config.json`.
    pub config: &'a RuntimeConfig,
}

/// A child's confinement, its report, and what the child's environment and working
/// directory are in its view.
#[derive(Debug)]
pub struct Confined {
    /// What the child applies between `clone` and `execve`; drop it after the run.
    pub confinement: Confinement,
    /// What holds (`report.field_json()` is the `sandbox` field).
    pub report: SandboxReport,
    /// `HOME`: `/home/hcp` (the tenant home) or a `local` call's workdir; the tenant home's
    /// host path for an owner's call without a view.
    pub home: PathBuf,
    /// The working directory: `HOME` in `personal` and `brain`, the workdir in `local`.
    pub cwd: PathBuf,
    /// `TMPDIR`: the view's `/tmp` (the host's temporary directory without a view).
    pub tmpdir: PathBuf,
    /// `PATH`: the parent's entries that lie in the view (`None`: the parent's, without a
    /// view).
    pub path: Option<OsString>,
    /// The proxy URL of a `{"allow": …}` network.
    pub proxy: Option<&'static str>,
}

impl Confined {
    /// `env` (the parent's allowed names) with the view's `HOME`, `TMPDIR`, `PATH` and, under
    /// `{"allow": …}`, the proxy variables (RUNTIME §5 "The child").
    pub fn env(&self, env: ChildEnv) -> ChildEnv {
        let mut env = env.home(&self.home).tmpdir(&self.tmpdir);
        if let Some(p) = &self.path {
            env = env.path(Some(p.as_os_str()));
        }
        if let Some(url) = self.proxy {
            env = env.egress_proxy(url);
        }
        env
    }
}

/// The kernel confinement of one call's child, every land (RUNTIME §5.1–§5.4), from
/// `config.json` and the store: the tenant home (made on first use), the `/etc` index
/// ([`crate::view_index::view_index`]), the pack's and `sandbox`'s paths, the protected names
/// of a writable workdir, the network (`packs.ID.network`, else `sandbox.network`), the
/// limits tightened by `HCP_LIMITS`.
///
/// # Errors
/// The adapter's `sandbox_unavailable` (77) and `sandbox_failed` (126); `store_io` (74) when
/// the tenant home cannot be made; `project_required` (77) for a `brain` call without a
/// project.
pub fn confine(home: &Home, caller: &Caller, s: &ConfineSpec<'_>) -> Result<Confined, Refusal> {
    let inputs = Inputs::read(home, caller, s, true)?;
    let (call, policy) = inputs.call(home, caller, s);
    let parent_path = inputs.parent_path.clone();
    let tenant_home = inputs.tenant_home.clone();
    let (confinement, report) =
        Confinement::for_call(&call, &policy).map_err(|e| Refusal::adapter(&e))?;
    let local = s.land == Land::Local;
    let (home_dir, tmpdir, path) = match confinement.view() {
        Some(v) => (
            v.home().to_owned(),
            PathBuf::from(hcp_adapter::VIEW_TMP),
            Some(
                parent_path
                    .as_deref()
                    .map_or_else(OsString::new, |p| v.path_var(p)),
            ),
        ),
        None => (
            if local {
                s.workdir.to_owned()
            } else {
                tenant_home.clone().unwrap_or_else(|| s.workdir.to_owned())
            },
            std::env::temp_dir(),
            None,
        ),
    };
    let cwd = if local {
        s.workdir.to_owned()
    } else {
        home_dir.clone()
    };
    Ok(Confined {
        proxy: confinement
            .has_egress()
            .then_some(hcp_adapter::EGRESS_PROXY_URL),
        confinement,
        report,
        home: home_dir,
        cwd,
        tmpdir,
        path,
    })
}

/// The protected names of a writable workdir (RUNTIME §5.1): `sandbox.protect_in_workdir`,
/// else [`hcp_adapter::PROTECTED_IN_WORKDIR`]. What the view binds read-only and what the
/// quarantine watches ([`crate::quarantine`]).
pub fn protected_in_workdir(config: &RuntimeConfig) -> Vec<String> {
    config
        .sandbox
        .protect_in_workdir
        .clone()
        .unwrap_or_else(|| {
            hcp_adapter::PROTECTED_IN_WORKDIR
                .iter()
                .map(|n| (*n).to_owned())
                .collect()
        })
}

/// What a call's view is made of, read from `config.json`, the store and the caller (owned,
/// so that [`confine`] and [`describe_view`] build the same [`CallSandbox`] from it).
struct Inputs {
    parent_path: Option<OsString>,
    homes: Vec<PathBuf>,
    tenant_home: Option<PathBuf>,
    read: Vec<PathBuf>,
    write: Vec<PathBuf>,
    protect: Vec<String>,
    etc: hcp_adapter::EtcIndex,
    interpreters: Vec<PathBuf>,
}

impl Inputs {
    /// Reads them; `make_home`: make the tenant home when it does not exist yet.
    fn read(
        home: &Home,
        caller: &Caller,
        s: &ConfineSpec<'_>,
        make_home: bool,
    ) -> Result<Self, Refusal> {
        let config = s.config;
        let var = |name: &str| {
            caller
                .parent_env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let parent_path = var("PATH");
        let pack = config.pack(s.pack_id);
        Ok(Self {
            homes: crate::workdir::machine_homes(var("HOME").map(PathBuf::from)),
            tenant_home: tenant_home(home, config, s, make_home)?,
            read: config.read_for(s.pack_id),
            write: pack.write.iter().map(|p| p.path()).collect(),
            protect: protected_in_workdir(config),
            etc: crate::view_index::view_index(home),
            interpreters: s.bin.interpreters().map(Path::to_path_buf).collect(),
            parent_path,
        })
    }

    /// The adapter's inputs of the call.
    fn call<'a>(
        &'a self,
        home: &'a Home,
        caller: &Caller,
        s: &'a ConfineSpec<'a>,
    ) -> (CallSandbox<'a>, CallPolicy) {
        let config = s.config;
        let call = CallSandbox {
            land: s.land,
            caller: s.caller,
            writes: s.writes,
            workdir: s.workdir,
            tenant_home: self.tenant_home.as_deref(),
            bin: s.bin.path(),
            interpreters: &self.interpreters,
            hcp_home: home.root(),
            bootstrap: s.bootstrap.then_some(&BOOTSTRAP_HIDDEN[..]),
            homes: &self.homes,
            read: &self.read,
            write: &self.write,
            protect_in_workdir: &self.protect,
            etc: &self.etc,
        };
        let policy = CallPolicy {
            require: config.sandbox.require,
            network: adapter_network(config.network_for(s.pack_id)),
            limits: resource_limits(&config.limits).tightened(&caller.limit_overrides),
            cgroup: config.limits.cgroup.as_ref().map(|c| c.path()),
        };
        (call, policy)
    }
}

/// The view a call of `s` gets, described without running anything or making its tenant
/// home (for `hcp show --view`, RUNTIME §5.1): the very plan [`confine`] mounts, with the
/// network mode and the limits it would apply. List it with
/// [`hcp_adapter::View::describe`]; [`hcp_adapter::view::mounts_beneath`] names the host's
/// mounts that come along.
///
/// # Errors
/// The refusals [`confine`] would make of the view: `sandbox_unavailable` for a path of the
/// configuration no view may hold, `project_required` for a `brain` call without a project.
pub fn describe_view(
    home: &Home,
    caller: &Caller,
    s: &ConfineSpec<'_>,
) -> Result<(hcp_adapter::View, CallPolicy), Refusal> {
    let inputs = Inputs::read(home, caller, s, false)?;
    let (call, policy) = inputs.call(home, caller, s);
    let store = home
        .root()
        .canonicalize()
        .unwrap_or_else(|_| home.root().to_owned());
    let view = hcp_adapter::View::of_call(&call, &[store], policy.limits.effective().tmp_bytes)
        .map_err(|e| Refusal::adapter(&e))?;
    Ok((view, policy))
}

/// The working directory of a call's child in its view (RUNTIME §5 "The child"): the
/// tenant home at `/home/hcp` in `personal` and `brain` land, the workdir in `local`.
pub fn child_cwd(land: Land, workdir: &Path) -> PathBuf {
    if land == Land::Local {
        workdir.to_owned()
    } else {
        PathBuf::from(hcp_adapter::VIEW_HOME)
    }
}

/// The tenant home of a `personal` or `brain` call (RUNTIME §5.2), made on first use when
/// `make`; `None` in `local` land.
fn tenant_home(
    home: &Home,
    config: &RuntimeConfig,
    s: &ConfineSpec<'_>,
    make: bool,
) -> Result<Option<PathBuf>, Refusal> {
    let principal = if s.caller == hcp_model::principal::Kind::Owner {
        OWNER_TENANT
    } else {
        s.principal_id
    };
    let Some(tenant) = Tenant::of_call(s.land, principal, s.project) else {
        if s.land == Land::Brain {
            return Err(Refusal::new(
                Code::ProjectRequired,
                "a `brain` call needs a project, whose home it runs in".to_owned(),
            ));
        }
        return Ok(None);
    };
    let homes = crate::home::homes_of(home.root(), config);
    let path = tenant_home_path(&homes, s.pack_id, tenant)
        .map_err(|e| Refusal::new(Code::SandboxUnavailable, e.to_string()))?;
    // The directory of every home made a link or a file: damage, whether or not this call
    // makes its home (a read's home is given read-only, and never through a link).
    if let Ok(m) = std::fs::symlink_metadata(&homes)
        && (m.file_type().is_symlink() || !m.is_dir())
    {
        return Err(Refusal::new(
            Code::StoreDamaged,
            format!(
                "the directory of the tenant homes `{}` is damaged: it is {}, not a directory",
                homes.display(),
                if m.file_type().is_symlink() {
                    "a symbolic link"
                } else {
                    "a file"
                }
            ),
        )
        .hint("`hcp doctor` lists it with its repair"));
    }
    if make {
        ensure_tenant_home(&homes, &path).map_err(|e| {
            // A home that is a file, a symlink or another user's is a damaged record of
            // this tenant alone (RUNTIME §4 "Fault isolation"); anything else is I/O.
            let damaged = matches!(
                e.kind(),
                std::io::ErrorKind::NotADirectory | std::io::ErrorKind::PermissionDenied
            );
            if damaged {
                Refusal::new(
                    Code::StoreDamaged,
                    format!("the tenant home is damaged: {e}"),
                )
                .hint("`hcp doctor` lists it with its repair (`hcp home rm PACK --principal ID`)")
            } else {
                Refusal::new(Code::StoreIo, format!("cannot make the tenant home: {e}"))
            }
        })?;
    }
    Ok(Some(path))
}

/// The adapter's network of a configured mode.
pub fn adapter_network(mode: &NetworkMode) -> hcp_adapter::Network {
    match mode {
        NetworkMode::Deny => hcp_adapter::Network::Deny,
        NetworkMode::Host => hcp_adapter::Network::Host,
        NetworkMode::Allow(_) => hcp_adapter::Network::Allow,
    }
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
        workdir: (allowed.land == Land::Local).then_some(allowed.workdir.as_path()),
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
        tmp_bytes: l.tmp_bytes,
        memory_bytes: l.memory_bytes,
    }
}

/// Whether a child of `pack` running `bin` is the bootstrap pack's (RUNTIME §5.1): the pack
/// is `hcp-cli` as lint knows it, and its pinned bin is the very file of the running `hcp`.
pub fn is_bootstrap(pack: &InstalledPack, bin: &Path) -> bool {
    is_running_hcp(bin) && hcp_lint::rules::hcp_bin_reserved::is_bootstrap(&pack.manifest)
}

/// Whether `bin` is the very file of the running hcp (same device and inode).
pub fn is_running_hcp(bin: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(me), Ok(it)) = (std::fs::metadata("/proc/self/exe"), std::fs::metadata(bin)) else {
        return false;
    };
    me.dev() == it.dev() && me.ino() == it.ino()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_pack_never_reads_the_audit_secrets() {
        for f in hcp_store::audit::KEY_FILES {
            assert!(BOOTSTRAP_HIDDEN.contains(&f), "{f}");
        }
        assert!(BOOTSTRAP_HIDDEN.contains(&hcp_store::tenant::HOMES_DIR));
    }

    #[test]
    fn the_bootstrap_pack_never_reads_other_tenants_homes_or_the_quarantine() {
        assert!(BOOTSTRAP_HIDDEN.contains(&hcp_store::tenant::HOMES_DIR));
        assert!(BOOTSTRAP_HIDDEN.contains(&hcp_store::StoreDir::Quarantine.name()));
    }

    #[test]
    fn personal_and_brain_children_start_in_their_home() {
        let w = Path::new("/w");
        assert_eq!(child_cwd(Land::Local, w), PathBuf::from("/w"));
        assert_eq!(child_cwd(Land::Personal, w), PathBuf::from("/home/hcp"));
        assert_eq!(child_cwd(Land::Brain, w), PathBuf::from("/home/hcp"));
    }
}
