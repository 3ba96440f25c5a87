//! The runtime configuration, `$HCP_HOME/config.json` (RUNTIME §5 "The child",
//! "Confinement of every land", §7, §9, §10): how every call's child is confined, the
//! resource limits of every child, what each pack's children may read and write beyond
//! their land's defaults, the folders where activation also writes each active pack's
//! skill, what the runtime policy's `resource` constraints and `escalate` are answered by,
//! and where a fleet's shared state is.
//!
//! ```json
//! {
//!   "sandbox": {
//!     "require": false,
//!     "network": "deny",
//!     "read": ["/nix/store"],
//!     "homes": "/srv/hcp-homes",
//!     "protect_in_workdir": [".git/hooks", ".envrc"]
//!   },
//!   "packs": {
//!     "mail": { "write": ["/srv/mail"], "network": "deny" },
//!     "gh": { "network": {"allow": ["api.github.com:443"]} },
//!     "tasks": { "server": "https://tasks.internal/v1" }
//!   },
//!   "limits": {
//!     "cpu_seconds": 60,
//!     "address_space_bytes": 4294967296,
//!     "open_files": 1024,
//!     "file_size_bytes": 1073741824,
//!     "processes": 4096,
//!     "tmp_bytes": 67108864,
//!     "memory_bytes": 2147483648,
//!     "cgroup": "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/hcp"
//!   },
//!   "skills": { "export": ["~/.agents/skills", "~/.claude/skills"] },
//!   "resolvers": { "ledger.ledger.post": "ledger.ledger.balance" },
//!   "escalation": "approvals",
//!   "policy_mode": "enforce",
//!   "mcp": { "approve_by_elicitation": false, "elicitation_timeout_s": 300 },
//!   "state": { "url": "host=/run/postgresql dbname=hcp user=hcp", "schema": "hcp" },
//!   "audit": { "witness": "/srv/hcp-witness" }
//! }
//! ```
//!
//! `state` (RUNTIME §9) points a machine of a fleet at the shared PostgreSQL state; absent,
//! the state is the files of `$HCP_HOME`. The runtime reads it once per call
//! ([`StateConfig::load`]) and never falls back from one to the other.
//!
//! Every key is optional and takes the default shown ([`RuntimeConfig::default`]); the
//! network of every land is `deny` unless `sandbox.network` or the pack's `network` says
//! `host` or `{"allow": [DEST…]}` (RUNTIME §5.3). A missing file is the defaults. Reading
//! is strict: an unknown or repeated key, a wrong type, a zero limit, an export folder
//! that is neither absolute nor `~/…`, a `read`/`write` path, `sandbox.homes` or
//! `limits.cgroup` that is not absolute, a protected name that is not relative, a path
//! holding `..` or listed twice, a key of `packs` that is not a pack id, the network
//! `"allow"` of earlier versions, or a `server` that is not an `http(s)` URL is a
//! [`ConfigError`] naming the file, line and column, and
//! `hcp exec` stops there (fail closed) rather than run with a configuration it did not
//! understand. The per-exec overrides of the limits can only tighten them
//! (`hcp_adapter::ResourceLimits::tightened`). `sandbox.protect` and `sandbox.tmpdir`, keys
//! of the confinement before the view (RUNTIME §5.3 "Earlier configurations"), are read
//! and ignored: [`RuntimeConfig::ignored_keys`] names them for `hcp doctor`.

pub mod edit;
pub mod schema;

use hcp_model::strict::{ParseError, StrictMap, parse_strict};
use hcp_model::{Code, Location};
use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

/// The file name under `$HCP_HOME`.
pub const CONFIG_FILE: &str = "config.json";

/// Default `limits.cpu_seconds`: 60 s of CPU, the default wall timeout (RUNTIME §5).
pub const DEFAULT_CPU_SECONDS: u64 = 60;
/// Default `limits.address_space_bytes`: 4 GiB of virtual memory. Runtimes that reserve
/// address space up front (a JVM, V8/node) need more.
pub const DEFAULT_ADDRESS_SPACE_BYTES: u64 = 4 << 30;
/// Default `limits.open_files`: 1024 descriptors.
pub const DEFAULT_OPEN_FILES: u64 = 1024;
/// Default `limits.file_size_bytes`: 1 GiB, the largest file a child may write.
pub const DEFAULT_FILE_SIZE_BYTES: u64 = 1 << 30;
/// Default `limits.processes`: 4096 processes and threads of the user. `RLIMIT_NPROC`
/// counts all of the user's processes and threads, not only the child's (a desktop
/// session alone can hold a thousand threads), so a tight value makes every `fork` of
/// the child fail; for root it is the `pids.max` of the call's pids cgroup.
pub const DEFAULT_PROCESSES: u64 = 4096;
/// Default `limits.tmp_bytes`: 64 MiB, the call's `/tmp` and `/dev/shm` together (RUNTIME
/// §5.1).
pub const DEFAULT_TMP_BYTES: u64 = 64 << 20;
/// Default `limits.memory_bytes`: 2 GiB for all the call's processes together (RUNTIME
/// §5.4).
pub const DEFAULT_MEMORY_BYTES: u64 = 2 << 30;

/// `$HCP_HOME/config.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// The confinement of every call's child.
    pub sandbox: SandboxConfig,
    /// The resource limits of every child.
    pub limits: LimitsConfig,
    /// Where activation also writes the skills (RUNTIME §10).
    pub skills: SkillsConfig,
    /// The shared state of a fleet (RUNTIME §9); absent, the state is the files of
    /// `$HCP_HOME`. Never written out with the rest (its URL may hold a password): `hcp config
    /// get` shows it with the password as `***`. `hcp config` works while it cannot be
    /// used (a URL that does not parse, a database that cannot be reached), recording its
    /// acts in the store's own trail then, so `hcp config set state.url URL` or `hcp config
    /// unset state` repairs it.
    #[serde(skip_serializing)]
    pub state: Option<StateConfig>,
    /// `packs`: per pack id, what its children may read and write beyond their land's
    /// defaults, their network (RUNTIME §5 "Confinement of every land"), and the server of a `kind:
    /// openapi` pack (RUNTIME §1.3).
    pub packs: StrictMap<PackConfig>,
    /// `resolvers` (default none): tool (`PACK_ID.VERB_KEY`) → the `read` verb
    /// (`PACK.VERB`) whose JSON stdout is the resource its `resource` constraints are
    /// checked against (RUNTIME §7). A tool without one is refused
    /// (`no_resource_resolver`).
    pub resolvers: hcp_model::strict::StrictMap<String>,
    /// `escalation` (default none): what answers a tool's `escalate`; without it the
    /// answer is `no_escalation_tier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalation: Option<EscalationMode>,
    /// How `hcp mcp` asks the person (RUNTIME §10).
    pub mcp: McpConfig,
    /// The audit trail's witness (RUNTIME §6).
    pub audit: AuditConfig,
    /// `policy_mode` (default `"enforce"`): `"observe"` runs the runtime policy without
    /// enforcing it (RUNTIME §11): a call it would refuse runs, and its intent records
    /// `would_refuse`.
    #[serde(skip_serializing_if = "PolicyMode::is_enforce")]
    pub policy_mode: PolicyMode,
}

/// `audit`: where the trail's signed checkpoints are witnessed (RUNTIME §6).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// `audit.witness`: an absolute directory, which must exist, or `"state"` for the
    /// fleet's PostgreSQL database (needs `state`); absent, no witness. The runtime reads
    /// it through [`AuditConfig::witness`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<String>,
}

/// The witness `config.json` names, or why it cannot be known.
pub type WitnessChoice = Result<Option<WitnessConfig>, Box<ConfigError>>;

/// The `state` and the witness of `config.json`, as [`StateConfig::load_with_witness`]
/// reads them.
pub type StateChoice = Result<(Option<StateConfig>, WitnessChoice), ConfigError>;

/// Where checkpoints are witnessed (`audit.witness`, RUNTIME §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WitnessConfig {
    /// A directory (absolute), which must exist.
    Dir(PathBuf),
    /// The fleet's database (`state`).
    State,
}

impl AuditConfig {
    /// The witness, as configured.
    pub fn witness(&self) -> Option<WitnessConfig> {
        self.witness.as_deref().map(|w| {
            if w == "state" {
                WitnessConfig::State
            } else {
                WitnessConfig::Dir(PathBuf::from(w))
            }
        })
    }

    /// Why `audit.witness` is refused, if it is.
    fn fault(&self, has_state: bool) -> Option<String> {
        let w = self.witness.as_deref()?;
        if w == "state" {
            return (!has_state).then(|| {
                "`audit.witness` `state` names the fleet's database, and `state` is not set".into()
            });
        }
        let p = Path::new(w);
        if !p.is_absolute() {
            return Some(format!(
                "`audit.witness` `{w}` is neither `state` nor an absolute directory"
            ));
        }
        if p.components().any(|c| c == Component::ParentDir) || w.contains('\0') {
            return Some(format!("`audit.witness` `{w}` holds `..` or a NUL"));
        }
        None
    }
}

impl WitnessConfig {
    /// The witness `$HCP_HOME/config.json` names; `None` for none (or no file).
    ///
    /// # Errors
    /// As [`RuntimeConfig::load`].
    pub fn load(home: &Path) -> Result<Option<Self>, ConfigError> {
        Ok(RuntimeConfig::load(home)?.audit.witness())
    }
}

/// `policy_mode`: whether the runtime policy (RUNTIME §7) is enforced or only observed
/// (RUNTIME §11).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicyMode {
    /// `"enforce"`: the policy refuses, binds, counts and controls output.
    #[default]
    Enforce,
    /// `"observe"`: the policy decides each call and its intent records the first
    /// refusal it would have made (`would_refuse`); nothing else of it takes effect.
    Observe,
}

impl PolicyMode {
    /// Whether this is the default, `enforce`.
    pub fn is_enforce(&self) -> bool {
        *self == Self::Enforce
    }
}

impl<'de> Deserialize<'de> for PolicyMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        match v.as_str() {
            Some("enforce") => Ok(Self::Enforce),
            Some("observe") => Ok(Self::Observe),
            _ => Err(serde::de::Error::custom(format!(
                "`policy_mode` is `\"enforce\"` or `\"observe\"`, not `{v}`"
            ))),
        }
    }
}

/// The text of `config.json` at `path`, read as every store record is read for what
/// could block or flood a call: a link is followed (an operator may keep it elsewhere), but
/// a FIFO, a device or a socket in its place is never waited on or read to its end
/// ([`crate::atomic::read_regular`]), and a file over [`crate::atomic::RECORD_CAP`] bytes or
/// not UTF-8 is an I/O error naming why.
fn read_config_text(path: &Path) -> std::io::Result<String> {
    let bytes = crate::atomic::read_regular(path, crate::atomic::RECORD_CAP)?.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("it holds more than {} bytes", crate::atomic::RECORD_CAP),
        )
    })?;
    String::from_utf8(bytes)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))
}

impl RuntimeConfig {
    /// The entry of `packs` for `pack_id`, or the empty one.
    pub fn pack(&self, pack_id: &str) -> &PackConfig {
        static NONE: PackConfig = PackConfig {
            read: Vec::new(),
            write: Vec::new(),
            network: None,
            server: None,
        };
        self.packs.get(pack_id).unwrap_or(&NONE)
    }

    /// The network of a child of `pack_id` (RUNTIME §5.3): the pack's `network`, else
    /// `sandbox.network` (default `deny`).
    pub fn network_for(&self, pack_id: &str) -> &NetworkMode {
        self.pack(pack_id)
            .network
            .as_ref()
            .unwrap_or(&self.sandbox.network)
    }

    /// The read-only paths of a child of `pack_id`: `sandbox.read`, then the pack's `read`.
    pub fn read_for(&self, pack_id: &str) -> Vec<PathBuf> {
        self.sandbox
            .read
            .iter()
            .chain(&self.pack(pack_id).read)
            .map(ConfigPath::path)
            .collect()
    }

    /// Keys read and ignored, for `hcp doctor`'s warning (RUNTIME §5.3 "Earlier
    /// configurations"): `sandbox.protect`, `sandbox.tmpdir`.
    pub fn ignored_keys(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.sandbox.protect.is_some() {
            out.push("sandbox.protect");
        }
        if self.sandbox.tmpdir.is_some() {
            out.push("sandbox.tmpdir");
        }
        out
    }
}

/// One pack's entry of `packs` (RUNTIME §5.1, §5.3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PackConfig {
    /// `read`: absolute paths in the view of the pack's children, at their own path,
    /// read-only (RUNTIME §5.1). Refused as `sandbox.read` is: `/`, the store or a
    /// directory that holds it, a home or a directory that holds one.
    pub read: Vec<ConfigPath>,
    /// `write`: absolute paths in the view of the pack's children, at their own path,
    /// read-write. A socket listed here is reachable, and then so is every pathname socket
    /// of the view (`socket(2)` of `AF_UNIX` passes). Refused as `read` is.
    pub write: Vec<ConfigPath>,
    /// `network`: `"deny"`, `"host"` or `{"allow": [DEST…]}` for this pack's children, over
    /// `sandbox.network`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkMode>,
    /// `server`: for a `kind: openapi` pack, the base URL its requests go to instead of
    /// the document's first server (RUNTIME §1.3): an absolute `http(s)` URL without user
    /// name, password, query or fragment. Checked when the file is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// A path of `sandbox.protect` or of a pack's `read` / `write`, as written, with its place
/// in the file. `~` and `~/…` are allowed in `sandbox.protect` only
/// ([`ConfigPath::resolve_in`]); grants are absolute, since `~` would follow the caller's
/// `HOME`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct ConfigPath {
    /// The text of the entry.
    pub raw: String,
    /// Where the entry is in `config.json` (0:0 for one not read from a file).
    #[serde(skip)]
    pub at: Location,
}

impl ConfigPath {
    /// The path, with trailing `/` and `.` components dropped; an entry starting with `~`
    /// is expanded once per home in `homes` (RUNTIME §5: `~` is both `$HOME` and the
    /// password database's home), so that a changed `HOME` never narrows what is
    /// protected.
    pub fn resolve_in(&self, homes: &[PathBuf]) -> Vec<PathBuf> {
        let raw = self.raw.as_str();
        if raw == "~" || raw.starts_with("~/") {
            let rest = raw.trim_start_matches('~').trim_start_matches('/');
            homes
                .iter()
                .filter(|h| h.is_absolute())
                .map(|h| h.join(rest).components().collect())
                .collect()
        } else {
            vec![Path::new(raw).components().collect()]
        }
    }

    /// The path of an absolute entry (a grant), trailing `/` and `.` dropped.
    pub fn path(&self) -> PathBuf {
        Path::new(&self.raw).components().collect()
    }

    /// Why the entry is refused when the file is read, if it is. `tilde`: `~/…` allowed.
    fn fault(&self, tilde: bool) -> Option<String> {
        let raw = self.raw.as_str();
        if raw.is_empty() {
            return Some("a path may not be empty".into());
        }
        if raw.contains('\0') {
            return Some("a path may not hold a NUL".into());
        }
        if tilde && raw.starts_with('~') && raw != "~" && !raw.starts_with("~/") {
            return Some(format!(
                "`{raw}`: only `~` and `~/…` are expanded; write the path in full"
            ));
        }
        let absolute = raw.starts_with('/') || (tilde && raw.starts_with('~'));
        if !absolute {
            return Some(if tilde {
                format!("`{raw}` is relative; a protected path is absolute or starts with `~/`")
            } else if raw.starts_with('~') {
                format!(
                    "`{raw}`: a grant is an absolute path (`~` would follow the caller's `HOME`)"
                )
            } else {
                format!("`{raw}` is relative; a grant is an absolute path")
            });
        }
        if Path::new(raw)
            .components()
            .any(|c| c == Component::ParentDir)
        {
            return Some(format!("`{raw}` holds `..`; name the path itself"));
        }
        None
    }
}

/// Why a grant of `grant` (an absolute entry of `sandbox.read` or a pack's `read` /
/// `write`) would hand a call the host rather than a part of it, defeating the view
/// built per call (RUNTIME §5.1): `/`, the store (beside `config_file`) or a directory
/// that holds it (its keys and trail would be in the view), a home (`$HOME`, `/root`) or
/// a directory that holds one (`/home`: every dot-directory of the user). A path inside
/// a home (`~/projects`) is a grant like any other. Pure: compares paths, reads nothing.
pub fn whole_host(grant: &Path, config_file: &Path) -> Option<String> {
    let shown = grant.display();
    if grant == Path::new("/") {
        return Some(format!(
            "`{shown}` is the whole host: a call would see every file of the machine; grant the directories it needs"
        ));
    }
    if let Some(store) = config_file.parent()
        && store.starts_with(grant)
    {
        return Some(format!(
            "`{shown}` holds the store (`{}`): a call would see its keys and its trail; grant a directory beside it",
            store.display()
        ));
    }
    let homes = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .into_iter()
        .chain([PathBuf::from("/root"), PathBuf::from("/home")]);
    for home in homes {
        let home: PathBuf = home.components().collect();
        if home.starts_with(grant) {
            return Some(format!(
                "`{shown}` holds the home `{}`: a call would see its dot-directories (keys, tokens); grant a directory inside it",
                home.display()
            ));
        }
    }
    None
}

/// Checks the destinations of one `network.allow` list of `config.json` (RUNTIME §5.5)
/// with `hcp_egress::AllowList::parse`: `at` is the path of the list in the file
/// (`["packs", "gh", "network", "allow"]`), `key` its dotted name for the message.
///
/// # Errors
/// [`ConfigError::Invalid`] (`bad_config`) at the line and column of the first entry
/// that is not a destination or is listed twice.
pub fn check_allow(
    text: &str,
    path: &Path,
    at: &[&str],
    key: &str,
    entries: &[String],
) -> Result<(), ConfigError> {
    let Err((i, e)) = hcp_egress::AllowList::parse(entries) else {
        return Ok(());
    };
    let idx = i.to_string();
    let mut p: Vec<&str> = at.to_vec();
    p.push(&idx);
    let loc = hcp_model::locate(text, &p);
    Err(ConfigError::Invalid {
        path: path.to_owned(),
        line: loc.map_or(0, |l| l.line),
        column: loc.map_or(0, |l| l.column),
        message: format!("`{key}[{i}]`: {e}"),
    })
}

/// `state`: the PostgreSQL database that holds a fleet's sessions, grants, approvals,
/// counters and audit (RUNTIME §9). The runtime's backend (`hcp-state-pg`) parses the URL
/// itself and reports a URL it cannot use as `bad_config` at [`StateConfig::url_at`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// A libpq connection string: `postgresql://user@host/db?sslmode=…` or the key-word
    /// form `host=/path/to/socket dbname=… user=…`. `hcp config set` refuses one the
    /// backend cannot parse (its form, a host, `sslmode`, `sslrootcert`), without
    /// connecting.
    pub url: String,
    /// The PostgreSQL schema (namespace) of hcp's tables, `^[a-z_][a-z0-9_]{0,62}$`, not
    /// starting with `pg_`; absent, `hcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Where the key `state.url` is in `config.json` (0:0 for one not read from a file).
    #[serde(skip)]
    pub url_at: Location,
}

/// The PostgreSQL schema of hcp's tables when `state.schema` names none.
pub const DEFAULT_SCHEMA: &str = "hcp";

/// Whether `s` is a usable PostgreSQL schema name for hcp's tables.
pub fn valid_schema_name(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !s.starts_with("pg_")
}

impl StateConfig {
    /// A `state` of `url`, in the default schema ([`DEFAULT_SCHEMA`]), not read from a
    /// file.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            ..Self::default()
        }
    }

    /// The same in `schema`.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// The schema named, else [`DEFAULT_SCHEMA`] (unchecked: [`valid_schema_name`]).
    pub fn schema_name(&self) -> &str {
        self.schema.as_deref().unwrap_or(DEFAULT_SCHEMA)
    }

    /// The `state` of `$HCP_HOME/config.json` (RUNTIME §9), for choosing the backend before
    /// any state is touched: `None` for a missing file or one without `state`. A file that
    /// does not parse refuses unless it is a JSON object with no `state` key at all (then
    /// the state is certainly the files, and the fault is reported where the call reads
    /// the rest of the configuration): when `state` may be in it, guessing would risk a
    /// fall-back to local state.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] (`bad_config`, with line and column) and
    /// [`ConfigError::Io`] as [`RuntimeConfig::load`].
    pub fn load(home: &Path) -> Result<Option<Self>, ConfigError> {
        let path = RuntimeConfig::path(home);
        let text = match read_config_text(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ConfigError::Io { path, source }),
        };
        match RuntimeConfig::parse(&text, &path) {
            Ok(c) => Ok(c.state),
            Err(_) if names_no_state(&text) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The `state` and the `audit.witness` of `config.json`, read once, for choosing the
    /// backend and its witness: as [`StateConfig::load`]. When the file does not parse
    /// and cannot name a `state` ([`names_no_state`]), the state is the files and the
    /// witness is that error (an act of authority then refuses it: a witness it cannot
    /// read is not "none"), so a call refused for the bad file is recorded in the file
    /// trail (RUNTIME §6).
    ///
    /// # Errors
    /// As [`StateConfig::load`].
    pub fn load_with_witness(home: &Path) -> StateChoice {
        Self::load_with_config(home).0
    }

    /// [`StateConfig::load_with_witness`], and the whole configuration from the same read
    /// when it loads ([`RuntimeConfig::load`]'s `Ok`: the defaults for no file); `None`
    /// when it does not (its error is for the one who reads it again to report).
    ///
    /// # Errors
    /// The first part's, as [`StateConfig::load`].
    pub fn load_with_config(home: &Path) -> (StateChoice, Option<RuntimeConfig>) {
        let path = RuntimeConfig::path(home);
        let text = match read_config_text(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return (Ok((None, Ok(None))), Some(RuntimeConfig::default()));
            }
            Err(source) => return (Err(ConfigError::Io { path, source }), None),
        };
        match RuntimeConfig::parse(&text, &path) {
            Ok(c) => (Ok((c.state.clone(), Ok(c.audit.witness()))), Some(c)),
            Err(e) if names_no_state(&text) => (Ok((None, Err(Box::new(e)))), None),
            Err(e) => (Err(e), None),
        }
    }

    /// Why the entry is refused when the file is read, and at which key, if it is.
    fn fault(&self) -> Option<(&'static str, String)> {
        if self.url.trim().is_empty() {
            return Some(("url", "`state.url` may not be empty".into()));
        }
        if self.url.contains('\0') {
            return Some(("url", "`state.url` may not hold a NUL".into()));
        }
        match self.schema.as_deref() {
            Some(s) if !valid_schema_name(s) => Some((
                "schema",
                format!(
                    "`state.schema` `{s}` must match `^[a-z_][a-z0-9_]{{0,62}}$` and not start with `pg_`"
                ),
            )),
            _ => None,
        }
    }
}

/// Whether a `config.json` that does not parse (`text`) cannot name a fleet's `state`,
/// so that its store's trail is the files' and a call it refuses is recorded there: a
/// JSON object without a `state` key, or text that is no JSON object and holds no
/// `"state"` at all. A file with a `state` key that is bad, or anything bad beside a
/// `state` key, or unparseable text that mentions `"state"` (perhaps a fleet's, perhaps
/// an `audit.witness` of `"state"`), leaves the trail unknown: the call is refused
/// unrecorded (`bad_config`), as RUNTIME §6 allows for a trail it cannot reach.
pub fn names_no_state(text: &str) -> bool {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(m)) => !m.contains_key("state"),
        _ => !text.contains("\"state\""),
    }
}

/// Default `mcp.elicitation_timeout_s`: how long `hcp mcp` waits for the person to answer
/// an elicitation, 300 s (the default window of a runtime-policy approval).
pub const DEFAULT_ELICITATION_TIMEOUT_S: u64 = 300;

/// The longest `mcp.elicitation_timeout_s` accepted: one day.
pub const MAX_ELICITATION_TIMEOUT_S: u64 = 86_400;

/// `mcp`: how `hcp mcp` puts the person in the loop, and what `hcp mcp --http` lets in
/// (RUNTIME §10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// `approve_by_elicitation` (default `false`): a call the runtime policy pauses for
    /// `confirmation` is put to the person through the MCP client's elicitation, and an
    /// accept approves that pending approval as `hcp approve` would. Off, the owner answers
    /// with `hcp approve` only.
    pub approve_by_elicitation: bool,
    /// `elicitation_timeout_s` (default 300): seconds `hcp mcp` waits for the person's
    /// answer, 1 to 86400 (one day, [`MAX_ELICITATION_TIMEOUT_S`]); an answer after that is
    /// ignored and the call is refused as if declined.
    pub elicitation_timeout_s: u64,
    /// `http`: what `hcp mcp --http` lets in.
    pub http: McpHttpConfig,
}

impl Default for McpConfig {
    fn default() -> Self {
        Self {
            approve_by_elicitation: false,
            elicitation_timeout_s: DEFAULT_ELICITATION_TIMEOUT_S,
            http: McpHttpConfig::default(),
        }
    }
}

/// `mcp.http`: what `hcp mcp --http` lets in (RUNTIME §10, "Streamable HTTP").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct McpHttpConfig {
    /// `origins` (default none): the browser origins whose requests are served, each
    /// `http://HOST[:PORT]` or `https://HOST[:PORT]` exactly as a browser sends `Origin`
    /// (no path, no trailing `/`). A request with any other `Origin` is refused (403), as
    /// is one whose `Host` is neither the bound address nor the host of a listed origin
    /// (DNS rebinding). Requests without `Origin` (every non-browser client) are not
    /// affected.
    pub origins: Vec<HttpOrigin>,
}

/// One entry of `mcp.http.origins`: `http://HOST[:PORT]` or `https://HOST[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct HttpOrigin(String);

impl HttpOrigin {
    /// The origin as written (what a browser's `Origin` header must equal).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its `HOST[:PORT]` (what a `Host` header of its pages names).
    pub fn authority(&self) -> &str {
        self.0.split_once("://").map_or("", |(_, a)| a)
    }

    /// Checks `text` is an origin as a browser writes it.
    ///
    /// # Errors
    /// Why it is not.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((scheme, authority)) = text.split_once("://") else {
            return Err(format!(
                "`{text}` is not an origin: write `http://HOST[:PORT]` or `https://HOST[:PORT]`"
            ));
        };
        if scheme != "http" && scheme != "https" {
            return Err(format!(
                "origin `{text}`: the scheme is `http` or `https`, not `{scheme}`"
            ));
        }
        let bad = authority.is_empty()
            || authority
                .bytes()
                .any(|b| !(b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)));
        if bad {
            return Err(format!(
                "origin `{text}`: after the scheme comes `HOST[:PORT]` alone (no path, no `/`, no user)"
            ));
        }
        Ok(Self(text.to_owned()))
    }
}

impl<'de> Deserialize<'de> for HttpOrigin {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `escalation`: the semantic tier of the runtime policy's `escalate` (RUNTIME §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EscalationMode {
    /// `"approvals"`: the owner's approval queue answers (`hcp approvals` lists the
    /// request as an escalation; `hcp approve ID` says yes, `hcp deny ID` says no).
    Approvals,
}

impl<'de> Deserialize<'de> for EscalationMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        match v.as_str() {
            Some("approvals") => Ok(Self::Approvals),
            _ => Err(serde::de::Error::custom(format!(
                "`escalation` is `\"approvals\"` (the owner's approval queue), not `{v}`"
            ))),
        }
    }
}

/// Why a `resolvers` entry (`TOOL` or `PACK.VERB`) is refused, if it is: each side is a
/// pack id, a `.`, and a verb key.
fn tool_fault(what: &str, text: &str) -> Option<String> {
    let Some((pack, verb)) = text.split_once('.') else {
        return Some(format!("{what} `{text}` is not `PACK.VERB`"));
    };
    if hcp_model::PackId::parse(pack).is_err() {
        return Some(format!("{what} `{text}`: `{pack}` is not a pack id"));
    }
    if verb.is_empty() || verb.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some(format!("{what} `{text}`: `{verb}` is not a verb key"));
    }
    None
}

/// `skills`: the folders where harnesses look for skills (RUNTIME §10).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// `export` (default none): activation also writes `DIR/ID/SKILL.md` in each folder,
    /// marked as hcp's; deactivate and uninstall remove only what hcp wrote
    /// (`hcp_store::skill`). A JSON array, also on the command line: `hcp config set
    /// skills.export '["~/.agents/skills"]'` (a bare word is a string, which it does not
    /// take).
    pub export: Vec<ExportDir>,
}

/// One folder of `skills.export`, as written: an absolute path, or `~` / `~/…`, which is
/// expanded from `HOME` when the folder is used ([`ExportDir::resolve`]). `~user` is not
/// expanded, a relative path and a `..` component are refused when the file is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct ExportDir {
    /// The text of the entry.
    pub raw: String,
    /// Where the entry is in `config.json` (0:0 for one not read from a file).
    #[serde(skip)]
    pub at: Location,
}

impl ExportDir {
    /// The folder as an absolute path: `~` and a leading `~/` replaced by `home` (the
    /// caller's `HOME`), trailing `/` and `.` components dropped.
    ///
    /// # Errors
    /// Why it cannot be resolved, lowercase: `~` with `HOME` unset, empty or relative.
    pub fn resolve(&self, home: Option<&OsStr>) -> Result<PathBuf, String> {
        let raw = self.raw.as_str();
        let path = if raw == "~" || raw.starts_with("~/") {
            let home = home
                .filter(|h| !h.is_empty())
                .map(PathBuf::from)
                .filter(|h| h.is_absolute())
                .ok_or_else(|| {
                    format!("`{raw}` starts with `~` but `HOME` is unset or not an absolute path")
                })?;
            home.join(raw.trim_start_matches('~').trim_start_matches('/'))
        } else {
            PathBuf::from(raw)
        };
        Ok(path.components().collect())
    }

    /// Why the entry is refused when the file is read, if it is.
    fn fault(&self) -> Option<String> {
        let raw = self.raw.as_str();
        if raw.is_empty() {
            return Some("an export folder may not be empty".into());
        }
        if raw.contains('\0') {
            return Some("an export folder may not hold a NUL".into());
        }
        if raw.starts_with('~') && raw != "~" && !raw.starts_with("~/") {
            return Some(format!(
                "`{raw}`: only `~` and `~/…` are expanded (from `HOME`); write the path in full"
            ));
        }
        if !raw.starts_with('/') && !raw.starts_with('~') {
            return Some(format!(
                "`{raw}` is relative; an export folder is absolute or starts with `~/`"
            ));
        }
        if Path::new(raw)
            .components()
            .any(|c| c == Component::ParentDir)
        {
            return Some(format!("`{raw}` holds `..`; name the folder itself"));
        }
        None
    }
}

/// `sandbox`: what every call's view holds and how a missing mechanism is answered
/// (RUNTIME §5.1–§5.4).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// `require` (default `false`): refuse the owner's calls (`sandbox_unavailable`) where
    /// the kernel cannot give the view, and any call whose `processes` or `memory` part
    /// cannot be enforced. A session's call is refused without its view whatever this says.
    pub require: bool,
    /// `network` (default `"deny"`): every pack's network without its own (RUNTIME §5.3).
    pub network: NetworkMode,
    /// `read` (default none): absolute paths every call's view holds, read-only, at their
    /// own path (programs kept outside the system directories: `/nix/store`). `/`, the
    /// store or a directory that holds it, and a home or a directory that holds one
    /// (`/home`) are refused: they would hand every call the host.
    pub read: Vec<ConfigPath>,
    /// `homes` (default `$HCP_HOME/homes`): an absolute directory holding the tenant homes
    /// (RUNTIME §5.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homes: Option<ConfigPath>,
    /// `protect_in_workdir`: names relative to a writable workdir that a call may read and
    /// never write; absent, the default list `hcp_adapter::PROTECTED_IN_WORKDIR` (RUNTIME
    /// §5.1). A list given here replaces the default one: keep its names and add yours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protect_in_workdir: Option<Vec<String>>,
    /// `tmpdir`: read and ignored (the call's `/tmp` is its own tmpfs now).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmpdir: Option<TmpdirMode>,
    /// `protect`: read and ignored (what a call was not given is not in its view).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protect: Option<Vec<ConfigPath>>,
}

/// `sandbox.tmpdir` of earlier versions, read and ignored.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TmpdirMode {
    /// `"memory"`.
    #[default]
    Memory,
    /// `"system"`.
    System,
}

/// A call's network (RUNTIME §5.3): `sandbox.network`, `packs.ID.network`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NetworkMode {
    /// `"deny"`: no socket at all but a `socketpair`.
    #[default]
    Deny,
    /// `"host"`: the host's network namespace.
    Host,
    /// `{"allow": [DEST…]}`: only those destinations, through hcp's egress proxy; each
    /// `HOST:PORT` as written (the egress proxy reads them).
    Allow(Vec<String>),
}

impl NetworkMode {
    /// `deny`, `host` or `allow`.
    pub fn mode(&self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Host => "host",
            Self::Allow(_) => "allow",
        }
    }
}

impl Serialize for NetworkMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Self::Deny => s.serialize_str("deny"),
            Self::Host => s.serialize_str("host"),
            Self::Allow(d) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("allow", d)?;
                m.end()
            }
        }
    }
}

/// The schema of a network: `"deny"`, `"host"` or `{"allow": [DEST…]}` (for
/// `docs/config.md`).
impl schemars::JsonSchema for NetworkMode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NetworkMode".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "oneOf": [
                {"const": "deny", "type": "string", "description": "No socket at all but a `socketpair`."},
                {"const": "host", "type": "string", "description": "The host's network."},
                {
                    "type": "object",
                    "description": "Only these destinations (`HOST:PORT`, `*.DOMAIN:PORT`), through hcp's egress proxy.",
                    "properties": {"allow": {"type": "array", "items": {"type": "string"}}},
                    "required": ["allow"],
                    "additionalProperties": false
                }
            ]
        })
    }
}

impl<'de> Deserialize<'de> for NetworkMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        match &v {
            serde_json::Value::String(s) if s == "deny" => Ok(Self::Deny),
            serde_json::Value::String(s) if s == "host" => Ok(Self::Host),
            serde_json::Value::String(s) if s == "allow" => Err(D::Error::custom(
                "the network `\"allow\"` of earlier versions is no longer read: write `\"host\"` for the host's network, or `{\"allow\": [DEST…]}` for some destinations",
            )),
            serde_json::Value::Object(m) => {
                if let Some(k) = m.keys().find(|k| *k != "allow") {
                    return Err(D::Error::custom(format!(
                        "unknown field `{k}` of a network: the object form is `{{\"allow\": [DEST…]}}`"
                    )));
                }
                let Some(serde_json::Value::Array(list)) = m.get("allow") else {
                    return Err(D::Error::custom(
                        "a network object is `{\"allow\": [DEST…]}`, a list of `HOST:PORT` strings",
                    ));
                };
                let mut dests = Vec::with_capacity(list.len());
                for d in list {
                    match d.as_str() {
                        Some(s) if !s.trim().is_empty() && !s.contains('\0') => {
                            dests.push(s.to_owned());
                        }
                        _ => {
                            return Err(D::Error::custom(format!(
                                "a destination of `allow` is a `HOST:PORT` string, not `{d}`"
                            )));
                        }
                    }
                }
                Ok(Self::Allow(dests))
            }
            _ => Err(D::Error::custom(format!(
                "a network is `\"deny\"`, `\"host\"` or `{{\"allow\": [DEST…]}}`, not `{v}`"
            ))),
        }
    }
}

/// `limits`: soft = hard resource limits of every child (`setrlimit`), the bounds of its
/// tmpfs and of its memory, and the delegated cgroup an ordinary user's memory bound is
/// made in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Seconds of CPU time ([`DEFAULT_CPU_SECONDS`]).
    pub cpu_seconds: u64,
    /// Bytes of address space ([`DEFAULT_ADDRESS_SPACE_BYTES`]).
    pub address_space_bytes: u64,
    /// Open file descriptors ([`DEFAULT_OPEN_FILES`]).
    pub open_files: u64,
    /// Bytes of the largest file written ([`DEFAULT_FILE_SIZE_BYTES`]).
    pub file_size_bytes: u64,
    /// Processes of the user ([`DEFAULT_PROCESSES`]).
    pub processes: u64,
    /// Bytes of the call's `/tmp` and `/dev/shm` together ([`DEFAULT_TMP_BYTES`]).
    pub tmp_bytes: u64,
    /// Bytes of memory of all the call's processes together ([`DEFAULT_MEMORY_BYTES`]),
    /// where a memory cgroup can be made.
    pub memory_bytes: u64,
    /// `cgroup` (default none): an absolute path of a delegated cgroup (v2, or of a v1
    /// memory hierarchy) this user may make cgroups in, for the memory bound of an ordinary
    /// user's calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<ConfigPath>,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            cpu_seconds: DEFAULT_CPU_SECONDS,
            address_space_bytes: DEFAULT_ADDRESS_SPACE_BYTES,
            open_files: DEFAULT_OPEN_FILES,
            file_size_bytes: DEFAULT_FILE_SIZE_BYTES,
            processes: DEFAULT_PROCESSES,
            tmp_bytes: DEFAULT_TMP_BYTES,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            cgroup: None,
        }
    }
}

impl LimitsConfig {
    /// The numeric limits by name, in file order.
    pub fn named(&self) -> [(&'static str, u64); 7] {
        [
            ("cpu_seconds", self.cpu_seconds),
            ("address_space_bytes", self.address_space_bytes),
            ("open_files", self.open_files),
            ("file_size_bytes", self.file_size_bytes),
            ("processes", self.processes),
            ("tmp_bytes", self.tmp_bytes),
            ("memory_bytes", self.memory_bytes),
        ]
    }
}

/// Why the runtime configuration cannot be used. Every exec stops on it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `bad_config`: the file does not parse, or a value is out of range.
    #[error("configuration `{}` is invalid at line {line}, column {column}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 when unknown).
        line: usize,
        /// 1-based column (0 when unknown).
        column: usize,
        /// What is wrong, lowercase.
        message: String,
    },
    /// `store_io`: the file exists but cannot be read.
    #[error("cannot read configuration `{}`", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ConfigError {
    /// The stable code: `bad_config` or `store_io`.
    pub fn code(&self) -> Code {
        match self {
            Self::Invalid { .. } => Code::BadConfig,
            Self::Io { .. } => Code::StoreIo,
        }
    }

    /// The exit status of the code: 78 (`EX_CONFIG`) for `bad_config`, 74 for `store_io`.
    pub fn exit_status(&self) -> u8 {
        self.code().exit_status()
    }
}

impl RuntimeConfig {
    /// The configuration file of the store at `home`.
    pub fn path(home: &Path) -> PathBuf {
        home.join(CONFIG_FILE)
    }

    /// Reads `$HCP_HOME/config.json`; a missing file (or home) is the defaults.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a file that does not parse strictly or holds a zero
    /// limit; [`ConfigError::Io`] when it exists and cannot be read.
    pub fn load(home: &Path) -> Result<Self, ConfigError> {
        let path = Self::path(home);
        match read_config_text(&path) {
            Ok(text) => Self::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(ConfigError::Io { path, source }),
        }
    }

    /// Parses the text of `path` (named in errors only).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] as for [`load`](Self::load).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Self = parse_strict(text).map_err(|e: ParseError| ConfigError::Invalid {
            path: path.to_owned(),
            line: e.line,
            column: e.column,
            message: e.message,
        })?;
        let mut config = config;
        let located = |p: &[&str], message: String| {
            let at = hcp_model::locate(text, p);
            ConfigError::Invalid {
                path: path.to_owned(),
                line: at.map_or(0, |l| l.line),
                column: at.map_or(0, |l| l.column),
                message,
            }
        };
        for i in 0..config.skills.export.len() {
            let n = i.to_string();
            let p = ["skills", "export", n.as_str()];
            let entry = &config.skills.export[i];
            if let Some(fault) = entry.fault() {
                return Err(located(&p, format!("`skills.export[{i}]`: {fault}")));
            }
            if config.skills.export[..i].iter().any(|e| e.raw == entry.raw) {
                return Err(located(
                    &p,
                    format!("`skills.export[{i}]` `{}` is listed twice", entry.raw),
                ));
            }
            config.skills.export[i].at = hcp_model::locate(text, &p).unwrap_or_default();
        }
        if let Some(st) = &mut config.state {
            if let Some((key, message)) = st.fault() {
                return Err(located(&["state", key], message));
            }
            st.url_at = hcp_model::locate(text, &["state", "url"]).unwrap_or_default();
        }
        if let Some(message) = config.audit.fault(config.state.is_some()) {
            return Err(located(&["audit", "witness"], message));
        }
        let timeout = config.mcp.elicitation_timeout_s;
        if !(1..=MAX_ELICITATION_TIMEOUT_S).contains(&timeout) {
            return Err(located(
                &["mcp", "elicitation_timeout_s"],
                format!(
                    "`mcp.elicitation_timeout_s` must be 1 to {MAX_ELICITATION_TIMEOUT_S} seconds, not {timeout}"
                ),
            ));
        }
        let n = config.sandbox.read.len();
        for i in 0..n {
            let idx = i.to_string();
            let p = ["sandbox", "read", idx.as_str()];
            let entry = &config.sandbox.read[i];
            if let Some(fault) = entry
                .fault(false)
                .or_else(|| whole_host(&entry.path(), path))
            {
                return Err(located(&p, format!("`sandbox.read[{i}]`: {fault}")));
            }
            if config.sandbox.read[..i].iter().any(|e| e.raw == entry.raw) {
                return Err(located(
                    &p,
                    format!("`sandbox.read[{i}]` `{}` is listed twice", entry.raw),
                ));
            }
            config.sandbox.read[i].at = hcp_model::locate(text, &p).unwrap_or_default();
        }
        for (key, path) in [
            (["sandbox", "homes"], config.sandbox.homes.as_mut()),
            (["limits", "cgroup"], config.limits.cgroup.as_mut()),
        ] {
            if let Some(entry) = path {
                if let Some(fault) = entry.fault(false) {
                    return Err(located(&key, format!("`{}.{}`: {fault}", key[0], key[1])));
                }
                entry.at = hcp_model::locate(text, &key).unwrap_or_default();
            }
        }
        if let Some(names) = &config.sandbox.protect_in_workdir {
            for (i, name) in names.iter().enumerate() {
                let idx = i.to_string();
                let p = ["sandbox", "protect_in_workdir", idx.as_str()];
                let rel = Path::new(name);
                let normal = !name.is_empty()
                    && !name.contains('\0')
                    && rel.components().all(|c| matches!(c, Component::Normal(_)));
                if !normal {
                    return Err(located(
                        &p,
                        format!(
                            "`sandbox.protect_in_workdir[{i}]` `{name}` is not a name relative to the workdir (`.git/hooks`, `.envrc`)"
                        ),
                    ));
                }
                if names[..i].contains(name) {
                    return Err(located(
                        &p,
                        format!("`sandbox.protect_in_workdir[{i}]` `{name}` is listed twice"),
                    ));
                }
            }
        }
        // Destinations (RUNTIME §5.5): each entry of a `network.allow` is one.
        if let NetworkMode::Allow(list) = &config.sandbox.network {
            let at = ["sandbox", "network", "allow"];
            check_allow(text, path, &at, "sandbox.network.allow", list)?;
        }
        for (id, pack) in &config.packs.0 {
            if let Some(NetworkMode::Allow(list)) = &pack.network {
                let at = ["packs", id.as_str(), "network", "allow"];
                check_allow(text, path, &at, &format!("packs.{id}.network.allow"), list)?;
            }
        }
        for (id, pack) in &mut config.packs.0 {
            if let Err(why) = hcp_model::PackId::parse(id) {
                return Err(located(
                    &["packs", id.as_str()],
                    format!("`packs.{id}`: not a pack id: {why}"),
                ));
            }
            if let Some(server) = &pack.server
                && let Err(e) = hcp_openapi::ServerUrl::parse(server)
            {
                return Err(located(
                    &["packs", id.as_str(), "server"],
                    format!("`packs.{id}.server`: {}", e.message),
                ));
            }
            for (key, list) in [("read", &mut pack.read), ("write", &mut pack.write)] {
                for i in 0..list.len() {
                    let idx = i.to_string();
                    let p = ["packs", id.as_str(), key, idx.as_str()];
                    if let Some(fault) = list[i]
                        .fault(false)
                        .or_else(|| whole_host(&list[i].path(), path))
                    {
                        return Err(located(&p, format!("`packs.{id}.{key}[{i}]`: {fault}")));
                    }
                    if list[..i].iter().any(|e| e.raw == list[i].raw) {
                        return Err(located(
                            &p,
                            format!("`packs.{id}.{key}[{i}]` `{}` is listed twice", list[i].raw),
                        ));
                    }
                    list[i].at = hcp_model::locate(text, &p).unwrap_or_default();
                }
            }
        }
        for (tool, verb) in &config.resolvers {
            if let Some(fault) =
                tool_fault("tool", tool).or_else(|| tool_fault("resolver verb", verb))
            {
                return Err(located(
                    &["resolvers", tool.as_str()],
                    format!("`resolvers`: {fault}"),
                ));
            }
        }
        if let Some((name, _)) = config.limits.named().into_iter().find(|(_, v)| *v == 0) {
            let at = hcp_model::locate(text, &["limits", name]);
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                line: at.map_or(0, |l| l.line),
                column: at.map_or(0, |l| l.column),
                message: format!("`limits.{name}` must be at least 1"),
            });
        }
        Ok(config)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse(text: &str) -> Result<RuntimeConfig, ConfigError> {
        RuntimeConfig::parse(text, Path::new("/h/config.json"))
    }

    #[test]
    fn a_grant_of_the_whole_host_the_store_or_a_home_is_refused() {
        let file = Path::new("/srv/hcp/store/config.json");
        for p in ["/", "/srv", "/srv/hcp", "/srv/hcp/store", "/home", "/root"] {
            assert!(whole_host(Path::new(p), file).is_some(), "{p}");
        }
        for p in [
            "/nix/store",
            "/srv/hcp/other",
            "/home/alice/projects",
            "/root/x",
        ] {
            assert_eq!(whole_host(Path::new(p), file), None, "{p}");
        }
        let e = parse(r#"{"sandbox": {"read": ["/"]}}"#).unwrap_err();
        assert_eq!(e.code(), Code::BadConfig);
        assert!(
            e.to_string()
                .contains("`sandbox.read[0]`: `/` is the whole host"),
            "{e}"
        );
        let e = parse(r#"{"packs": {"mail": {"write": ["/h"]}}}"#).unwrap_err();
        assert!(e.to_string().contains("holds the store"), "{e}");
    }

    #[test]
    fn unparseable_text_names_no_state_unless_it_says_state() {
        assert!(names_no_state("{not json"));
        assert!(names_no_state(r#"{"bogus": 1}"#));
        assert!(!names_no_state(r#"{"state": 1}"#));
        assert!(!names_no_state(r#"{"state": "#));
        assert!(!names_no_state(r#"{"audit": {"witness": "state"}, "#));
    }

    #[test]
    fn a_missing_file_is_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            RuntimeConfig::load(dir.path()).unwrap(),
            RuntimeConfig::default()
        );
        assert_eq!(
            RuntimeConfig::load(&dir.path().join("absent")).unwrap(),
            RuntimeConfig::default()
        );
    }

    #[test]
    fn keys_are_optional() {
        let c = parse(r#"{"sandbox": {"network": "host"}, "limits": {"processes": 64}}"#).unwrap();
        assert_eq!(
            c,
            RuntimeConfig {
                sandbox: SandboxConfig {
                    network: NetworkMode::Host,
                    ..SandboxConfig::default()
                },
                limits: LimitsConfig {
                    processes: 64,
                    ..LimitsConfig::default()
                },
                ..RuntimeConfig::default()
            }
        );
        assert_eq!(parse("{}").unwrap(), RuntimeConfig::default());
        assert_eq!(RuntimeConfig::default().sandbox.network, NetworkMode::Deny);
        assert_eq!(RuntimeConfig::default().limits.tmp_bytes, 64 << 20);
        assert_eq!(RuntimeConfig::default().limits.memory_bytes, 2 << 30);
    }

    #[test]
    fn view_paths_networks_and_homes_are_read_with_their_place() {
        let c = parse(
            "{\"sandbox\": {\"read\": [\"/nix/store\"], \"homes\": \"/srv/homes/\",\n \"protect_in_workdir\": [\".git/hooks\", \".envrc\"]},\n \"packs\": {\"mail\": {\"write\": [\"/srv/mail\"],\n   \"read\": [\"/srv/ro\"], \"network\": {\"allow\": [\"imap.example.org:993\"]}}, \"git\": {}},\n \"limits\": {\"cgroup\": \"/sys/fs/cgroup/hcp\", \"tmp_bytes\": 1024}}",
        )
        .unwrap();
        let mail = c.pack("mail");
        assert_eq!(mail.write[0].path(), PathBuf::from("/srv/mail"));
        assert_eq!((mail.write[0].at.line, mail.write[0].at.column), (3, 31));
        assert_eq!(
            c.read_for("mail"),
            [PathBuf::from("/nix/store"), PathBuf::from("/srv/ro")]
        );
        assert_eq!(c.read_for("git"), [PathBuf::from("/nix/store")]);
        assert_eq!(
            c.network_for("mail"),
            &NetworkMode::Allow(vec!["imap.example.org:993".into()])
        );
        assert_eq!(c.network_for("git"), &NetworkMode::Deny);
        assert_eq!(c.network_for("absent"), &NetworkMode::Deny);
        assert_eq!(
            c.sandbox.homes.as_ref().map(ConfigPath::path),
            Some(PathBuf::from("/srv/homes"))
        );
        assert_eq!(
            c.sandbox.protect_in_workdir.as_deref(),
            Some(&[".git/hooks".to_owned(), ".envrc".to_owned()][..])
        );
        assert_eq!(
            c.limits.cgroup.as_ref().map(ConfigPath::path),
            Some(PathBuf::from("/sys/fs/cgroup/hcp"))
        );
        assert_eq!(c.limits.tmp_bytes, 1024);
        let c = parse(r#"{"sandbox": {"network": "host"}, "packs": {"a": {"network": "deny"}}}"#)
            .unwrap();
        assert_eq!(c.network_for("a"), &NetworkMode::Deny);
        assert_eq!(c.network_for("b"), &NetworkMode::Host);
        assert!(c.ignored_keys().is_empty());
    }

    #[test]
    fn the_keys_of_earlier_versions_are_read_and_ignored_or_refused() {
        let c = parse(r#"{"sandbox": {"tmpdir": "system", "protect": ["~/.password-store"]}}"#)
            .unwrap();
        assert_eq!(c.ignored_keys(), ["sandbox.protect", "sandbox.tmpdir"]);
        for text in [
            r#"{"sandbox": {"network": "allow"}}"#,
            "{\"packs\": {\"mail\":\n {\"network\": \"allow\"}}}",
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), "bad_config", "{text}");
            let m = e.to_string();
            assert!(
                m.contains("write `\"host\"`") && m.contains("{\"allow\": [DEST…]}"),
                "{m}"
            );
        }
        let e = parse("{\"packs\": {\"mail\":\n {\"network\": \"allow\"}}}").unwrap_err();
        let ConfigError::Invalid { line, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!(line, 2);
    }

    #[test]
    fn bad_view_paths_and_networks_are_refused_at_their_place() {
        for (text, needle) in [
            (
                r#"{"packs": {"mail": {"write": ["~/.mail"]}}}"#,
                "follow the caller's `HOME`",
            ),
            (
                r#"{"packs": {"mail": {"read": ["rel"]}}}"#,
                "a grant is an absolute path",
            ),
            (
                r#"{"packs": {"mail": {"write": ["/a", "/a"]}}}"#,
                "listed twice",
            ),
            (r#"{"packs": {"mail": {"write": ["/a\u0000"]}}}"#, "NUL"),
            (r#"{"packs": {"mail": {"writ": []}}}"#, "unknown field"),
            (
                r#"{"packs": {"mail": {"network": "maybe"}}}"#,
                "a network is",
            ),
            (
                r#"{"packs": {"mail": {"network": {"deny": []}}}}"#,
                "unknown field `deny`",
            ),
            (
                r#"{"packs": {"mail": {"network": {"allow": "x:1"}}}}"#,
                "a list of `HOST:PORT`",
            ),
            (
                r#"{"packs": {"mail": {"network": {"allow": [1]}}}}"#,
                "a `HOST:PORT` string",
            ),
            (r#"{"sandbox": {"read": ["rel"]}}"#, "is relative"),
            (r#"{"sandbox": {"read": ["/a/../b"]}}"#, "holds `..`"),
            (r#"{"sandbox": {"homes": "homes"}}"#, "is relative"),
            (r#"{"limits": {"cgroup": "~/cg"}}"#, "absolute"),
            (
                r#"{"sandbox": {"protect_in_workdir": ["/abs"]}}"#,
                "not a name relative",
            ),
            (
                r#"{"sandbox": {"protect_in_workdir": ["../x"]}}"#,
                "not a name relative",
            ),
            (
                r#"{"sandbox": {"protect_in_workdir": [".envrc", ".envrc"]}}"#,
                "listed twice",
            ),
            (r#"{"limits": {"tmp_bytes": 0}}"#, "at least 1"),
            (r#"{"packs": {"Bad_Id": {}}}"#, "not a pack id"),
            (r#"{"packs": {"mail": {}, "mail": {}}}"#, "duplicate"),
            (r#"{"packs": []}"#, "invalid type"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), "bad_config", "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let e = parse("{\"packs\": {\"mail\": {\"write\": [\"/ok\",\n   \"rel\"]}}}").unwrap_err();
        let ConfigError::Invalid { line, column, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!((line, column), (2, 4));
    }

    #[test]
    fn unknown_keys_are_refused_with_their_place() {
        let e = parse("{\n  \"sandbox\": {\"require\": true, \"requir\": false}\n}").unwrap_err();
        assert_eq!(e.code(), "bad_config");
        let ConfigError::Invalid { line, column, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!((*line, *column), (2, 39));
        assert!(e.to_string().starts_with(
            "configuration `/h/config.json` is invalid at line 2, column 39: unknown field `requir`"
        ));
    }

    #[test]
    fn bad_values_are_refused() {
        for text in [
            r#"{"sandbox": {"network": "maybe"}}"#,
            r#"{"sandbox": {"network": "allow"}}"#,
            r#"{"sandbox": {"tmpdir": "disk"}}"#,
            r#"{"sandbox": {"require": "yes"}}"#,
            r#"{"limits": {"cpu_seconds": -1}}"#,
            r#"{"limits": {"open_files": 0}}"#,
            r#"{"limits": {"processes": 1, "processes": 2}}"#,
            "{",
            "",
        ] {
            assert_eq!(parse(text).unwrap_err().code(), "bad_config", "{text}");
        }
    }

    #[test]
    fn a_zero_limit_is_located() {
        let e =
            parse("{\n  \"limits\": {\"cpu_seconds\": 5,\n    \"processes\": 0}\n}").unwrap_err();
        let ConfigError::Invalid { line, column, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!((line, column), (3, 5));
    }

    #[test]
    fn export_folders_are_read_with_their_place() {
        let c = parse(
            "{\"skills\": {\"export\": [\n  \"~/.agents/skills\", \"/srv/skills/\", \"~\"]}}",
        )
        .unwrap();
        let e = &c.skills.export;
        assert_eq!(e.len(), 3);
        assert_eq!(
            (e[0].raw.as_str(), e[0].at.line, e[0].at.column),
            ("~/.agents/skills", 2, 3)
        );
        let home = Some(OsStr::new("/home/u"));
        assert_eq!(
            e[0].resolve(home).unwrap(),
            PathBuf::from("/home/u/.agents/skills")
        );
        assert_eq!(e[1].resolve(None).unwrap(), PathBuf::from("/srv/skills"));
        assert_eq!(e[2].resolve(home).unwrap(), PathBuf::from("/home/u"));
        for h in [None, Some(OsStr::new("")), Some(OsStr::new("rel"))] {
            assert!(e[0].resolve(h).unwrap_err().contains("`HOME`"), "{h:?}");
        }
    }

    #[test]
    fn bad_export_folders_are_refused_at_their_place() {
        for (text, needle) in [
            (r#"{"skills": {"export": ["skills"]}}"#, "is relative"),
            (r#"{"skills": {"export": [""]}}"#, "may not be empty"),
            (
                r#"{"skills": {"export": ["~bob/skills"]}}"#,
                "only `~` and `~/…`",
            ),
            (r#"{"skills": {"export": ["/a/../b"]}}"#, "holds `..`"),
            (r#"{"skills": {"export": ["/a\u0000"]}}"#, "NUL"),
            (r#"{"skills": {"export": ["/a", "/a"]}}"#, "listed twice"),
            (r#"{"skills": {"export": "/a"}}"#, "invalid type"),
            (r#"{"skills": {"export": [1]}}"#, "invalid type"),
            (r#"{"skills": {"exports": []}}"#, "unknown field"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), "bad_config", "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let e = parse("{\"skills\": {\"export\": [\"/ok\",\n   \"rel\"]}}").unwrap_err();
        let ConfigError::Invalid { line, column, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!((line, column), (2, 4));
    }

    #[test]
    fn the_state_key_is_read_with_the_place_of_its_url() {
        let c = parse(
            "{\"state\": {\n  \"url\": \"host=/run/pg dbname=hcp\", \"schema\": \"fleet_1\"}}",
        )
        .unwrap();
        let st = c.state.unwrap();
        assert_eq!(st.url, "host=/run/pg dbname=hcp");
        assert_eq!(st.schema.as_deref(), Some("fleet_1"));
        assert_eq!((st.url_at.line, st.url_at.column), (2, 3));
        assert_eq!(parse("{}").unwrap().state, None);
        for (text, needle, at) in [
            (r#"{"state": {"url": ""}}"#, "may not be empty", (1, 12)),
            (
                r#"{"state": {"url": "host=/s", "schema": "Bad"}}"#,
                "`state.schema`",
                (1, 30),
            ),
            (
                r#"{"state": {"url": "host=/s", "schema": "pg_x"}}"#,
                "`state.schema`",
                (1, 30),
            ),
            (
                r#"{"state": {"url": "host=/s", "pool": 1}}"#,
                "unknown field",
                (1, 35),
            ),
            (
                r#"{"state": {"schema": "hcp"}}"#,
                "missing field `url`",
                (1, 27),
            ),
            (r#"{"state": "host=/s"}"#, "invalid type", (1, 19)),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), "bad_config", "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
            let ConfigError::Invalid { line, column, .. } = e else {
                panic!("{e:?}")
            };
            assert_eq!((line, column), at, "{text}");
        }
    }

    #[test]
    fn the_backend_is_chosen_only_from_a_file_that_cannot_hide_a_state_key() {
        let dir = tempfile::tempdir().unwrap();
        let write = |t: &str| std::fs::write(dir.path().join(CONFIG_FILE), t).unwrap();
        assert_eq!(StateConfig::load(dir.path()).unwrap(), None);
        write(r#"{"state": {"url": "host=/s"}}"#);
        assert_eq!(
            StateConfig::load(dir.path()).unwrap().unwrap().url,
            "host=/s"
        );
        // A fault elsewhere in a file that holds no `state`: the files, certainly.
        write(r#"{"sandbox": {"requir": true}}"#);
        assert_eq!(StateConfig::load(dir.path()).unwrap(), None);
        // A fault elsewhere beside a `state`, or a file that is not JSON: refused.
        for t in [
            r#"{"sandbox": {"requir": true}, "state": {"url": "host=/s"}}"#,
            r#"{"state": {"url": "host=/s"},"#,
            r#"{"state": {"url": "host=/s"}, "state": {"url": "host=/t"}}"#,
        ] {
            write(t);
            assert_eq!(
                StateConfig::load(dir.path()).unwrap_err().code(),
                Code::BadConfig,
                "{t}"
            );
        }
    }

    #[test]
    fn an_unreadable_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(CONFIG_FILE)).unwrap();
        let e = RuntimeConfig::load(dir.path()).unwrap_err();
        assert_eq!((e.code(), e.exit_status()), (Code::StoreIo, 74));
    }

    #[test]
    fn resolvers_and_escalation_are_read_strictly() {
        let c = parse(
            r#"{"resolvers": {"ledger.ledger.post": "ledger.ledger.balance"}, "escalation": "approvals"}"#,
        )
        .unwrap();
        assert_eq!(
            c.resolvers.get("ledger.ledger.post").map(String::as_str),
            Some("ledger.ledger.balance")
        );
        assert_eq!(c.escalation, Some(EscalationMode::Approvals));
        assert_eq!(parse("{}").unwrap().escalation, None);
        assert_eq!(parse("{}").unwrap().policy_mode, PolicyMode::Enforce);
        assert_eq!(
            parse(r#"{"policy_mode": "observe"}"#).unwrap().policy_mode,
            PolicyMode::Observe
        );
        assert!(parse(r#"{"policy_mode": "audit"}"#).is_err());
        assert!(parse(r#"{"policy_mode": true}"#).is_err());
        for (text, needle, at) in [
            (
                "{\"resolvers\": {\n  \"t.x\": \"nodot\"}}",
                "resolver verb `nodot` is not `PACK.VERB`",
                (2, 3),
            ),
            (
                "{\"resolvers\": {\"Bad.x\": \"p.v\"}}",
                "`Bad` is not a pack id",
                (1, 16),
            ),
            (
                "{\"resolvers\": {\"t.x\": \"p.\"}}",
                "`` is not a verb key",
                (1, 16),
            ),
            (
                "{\"resolvers\": {\"t.x\": \"p.v\", \"t.x\": \"p.w\"}}",
                "duplicate",
                (1, 0),
            ),
            ("{\"resolvers\": {\"t.x\": 1}}", "invalid type", (1, 0)),
            ("{\"resolvers\": [\"t.x\"]}", "invalid type", (1, 0)),
            ("{\n  \"escalation\": \"llm\"}", "not `\"llm\"`", (2, 0)),
            ("{\"escalation\": true}", "not `true`", (1, 0)),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), "bad_config", "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
            let ConfigError::Invalid { line, column, .. } = &e else {
                panic!("{e:?}")
            };
            assert_eq!(*line, at.0, "{text}: {e}");
            if at.1 > 0 {
                assert_eq!(*column, at.1, "{text}: {e}");
            } else {
                assert!(*column > 0, "{text}: {e}");
            }
        }
    }

    #[test]
    fn a_packs_server_is_an_http_url_at_its_place() {
        let c = parse(r#"{"packs": {"tasks": {"server": "http://127.0.0.1:9/v1"}, "git": {}}}"#)
            .unwrap();
        assert_eq!(
            c.pack("tasks").server.as_deref(),
            Some("http://127.0.0.1:9/v1")
        );
        assert_eq!(c.pack("git").server, None);
        assert_eq!(c.pack("absent").server, None);
        for (text, needle) in [
            (
                r#"{"packs": {"tasks": {"server": "ftp://x/v1"}}}"#,
                "scheme `ftp`",
            ),
            (r#"{"packs": {"tasks": {"server": "/v1"}}}"#, "relative URL"),
            (
                r#"{"packs": {"tasks": {"server": "http://u:p@x/"}}}"#,
                "user name",
            ),
            (r#"{"packs": {"tasks": {"server": 5}}}"#, "invalid type"),
            (
                r#"{"packs": {"tasks": {"servr": "http://x"}}}"#,
                "unknown field",
            ),
            (r#"{"packs": {"Tasks!": {}}}"#, "not a pack id"),
            (r#"{"packs": {"a": {}, "a": {}}}"#, "duplicate"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), "bad_config", "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let e = parse("{\"packs\": {\"tasks\":\n  {\"server\": \"gopher://x\"}}}").unwrap_err();
        let ConfigError::Invalid { line, column, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!((line, column), (2, 4));
    }

    #[test]
    fn the_mcp_key_is_read_strictly() {
        let c = parse(r#"{"mcp": {"approve_by_elicitation": true}}"#).unwrap();
        assert_eq!(
            c.mcp,
            McpConfig {
                approve_by_elicitation: true,
                elicitation_timeout_s: DEFAULT_ELICITATION_TIMEOUT_S,
                http: McpHttpConfig::default(),
            }
        );
        assert!(!RuntimeConfig::default().mcp.approve_by_elicitation);
        let c = parse(r#"{"mcp": {"elicitation_timeout_s": 5}}"#).unwrap();
        assert_eq!(c.mcp.elicitation_timeout_s, 5);
        let c = parse(r#"{"mcp": {"http": {"origins": ["https://app.example:8443", "http://localhost:3000"]}}}"#).unwrap();
        assert_eq!(c.mcp.http.origins[0].as_str(), "https://app.example:8443");
        assert_eq!(c.mcp.http.origins[1].authority(), "localhost:3000");
        for bad in [
            r#"{"mcp": {"http": {"origins": ["app.example"]}}}"#,
            r#"{"mcp": {"http": {"origins": ["ftp://app.example"]}}}"#,
            r#"{"mcp": {"http": {"origins": ["https://app.example/"]}}}"#,
            r#"{"mcp": {"http": {"origins": "https://app.example"}}}"#,
            r#"{"mcp": {"http": {"hosts": []}}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        for (text, needle) in [
            (
                r#"{"mcp": {"approve_by_elicitation": "yes"}}"#,
                "invalid type",
            ),
            (r#"{"mcp": {"approve_by_elicitation": 1}}"#, "invalid type"),
            (
                r#"{"mcp": {"approve_by_elicitaton": true}}"#,
                "unknown field",
            ),
            (
                r#"{"mcp": {"approve_by_elicitation": true, "approve_by_elicitation": false}}"#,
                "duplicate",
            ),
            (r#"{"mcp": true}"#, "invalid type"),
            (
                r#"{"mcp": {"elicitation_timeout_s": 0}}"#,
                "must be 1 to 86400",
            ),
            (
                r#"{"mcp": {"elicitation_timeout_s": 86401}}"#,
                "must be 1 to 86400",
            ),
            (r#"{"mcp": {"elicitation_timeout_s": -1}}"#, "invalid value"),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code(), "bad_config", "{text}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
        let e = parse("{\"mcp\": {\n  \"elicitation_timeout_s\": 0}}").unwrap_err();
        let ConfigError::Invalid { line, column, .. } = e else {
            panic!("{e:?}")
        };
        assert_eq!((line, column), (2, 3));
    }

    #[test]
    fn a_destination_that_is_not_one_is_refused_at_its_line_and_column() {
        let text = "{\"packs\": {\"gh\": {\"network\": {\"allow\": [\n  \"api.github.com:443\",\n  \"github.com\"]}}}}";
        let entries = vec!["api.github.com:443".to_owned(), "github.com".to_owned()];
        let at = ["packs", "gh", "network", "allow"];
        let e = check_allow(
            text,
            Path::new("config.json"),
            &at,
            "packs.gh.network.allow",
            &entries,
        )
        .unwrap_err();
        let ConfigError::Invalid {
            line,
            column,
            ref message,
            ..
        } = e
        else {
            panic!("{e:?}")
        };
        assert_eq!((line, column), (3, 3));
        assert_eq!(
            message,
            "`packs.gh.network.allow[1]`: `github.com` is not a destination: a port is required: `github.com:PORT` (for example `github.com:443`)"
        );
        assert_eq!(e.code(), "bad_config");
        assert!(check_allow(text, Path::new("config.json"), &at, "k", &entries[..1]).is_ok());
    }

    #[test]
    fn network_allow_entries_are_destinations() {
        let c = parse(r#"{"sandbox": {"network": {"allow": ["*.example.org:443"]}}, "packs": {"gh": {"network": {"allow": ["api.github.com:443", "[::1]:8080"]}}}}"#).unwrap();
        assert_eq!(
            c.network_for("gh"),
            &NetworkMode::Allow(vec!["api.github.com:443".into(), "[::1]:8080".into()])
        );
        for (text, at, needle) in [
            (
                "{\"packs\": {\"gh\": {\"network\": {\"allow\": [\"github.com\"]}}}}",
                (1, 41),
                "`packs.gh.network.allow[0]`: `github.com` is not a destination: a port is required",
            ),
            (
                "{\"sandbox\": {\"network\": {\"allow\": [\n \"a.example:443\", \"*.com:443\"]}}}",
                (2, 19),
                "`sandbox.network.allow[1]`: `*.com:443`",
            ),
            (
                "{\"packs\": {\"gh\": {\"network\": {\"allow\": [\"a.example:1\", \"A.example:1\"]}}}}",
                (1, 56),
                "listed twice",
            ),
        ] {
            let e = parse(text).unwrap_err();
            let ConfigError::Invalid {
                line,
                column,
                ref message,
                ..
            } = e
            else {
                panic!("{e:?}")
            };
            assert!(message.contains(needle), "{text}: {message}");
            assert_eq!((line, column), at, "{text}: {message}");
            assert_eq!(e.code(), "bad_config");
        }
    }
}
