//! The child's environment (RUNTIME §5 "The child"): cleared, then an allow-list from the
//! parent, then `wrap.agent_env`, then the `HCP_*` call facts, then the binding.
//!
//! Everything here is a pure function over explicit inputs: nothing reads the real
//! process environment, so the caller passes `std::env::vars_os()` (or a test list).

use crate::AdapterError;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Names taken from the parent's environment, besides every `LC_*` (RUNTIME §5).
pub const PARENT_ALLOWED: [&str; 5] = ["PATH", "HOME", "LANG", "TZ", "TMPDIR"];

/// The names the runtime sets from the call itself (RUNTIME §5), in this order.
pub const HCP_VARS: [&str; 5] = [
    "HCP_PACK_ID",
    "HCP_VERB_KEY",
    "HCP_PRINCIPAL_ID",
    "HCP_PROJECT_ID",
    "HCP_WORKDIR",
];

/// The prefix of binding variables (RUNTIME §8): field `token` is `HCP_BINDING_TOKEN`.
pub const BINDING_PREFIX: &str = "HCP_BINDING_";

/// Names `wrap.agent_env` may not set, because the runtime owns them.
const RUNTIME_OWNED: [&str; 3] = ["PATH", "HOME", "TMPDIR"];

/// Prefixes `wrap.agent_env` may not set: the runtime's own (`HCP_`) and those that make
/// the dynamic loader, a shell or git run code of the pack's choosing.
const REFUSED_PREFIXES: [&str; 5] = ["HCP_", "LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG"];

/// The proxy variables the runtime sets under a `{"allow": …}` network (RUNTIME §5), the
/// lower-case forms included; `wrap.agent_env` may name none of them, nor `NO_PROXY`.
pub const PROXY_VARS: [&str; 7] = [
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "https_proxy",
    "http_proxy",
    "all_proxy",
    "NODE_USE_ENV_PROXY",
];

/// Exact names `wrap.agent_env` may not set: each makes a common program (the dynamic
/// loader, glibc, a shell, an interpreter, git, a pager or editor) load or run code
/// named by the variable, which would turn a wrapped system CLI into a code runner.
const REFUSED_NAMES: [&str; 40] = [
    "GLIBC_TUNABLES",
    "GCONV_PATH",
    "NLSPATH",
    "HOSTALIASES",
    "RES_OPTIONS",
    "LOCALDOMAIN",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "CDPATH",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_EXEC_PATH",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "GIT_EDITOR",
    "PAGER",
    "EDITOR",
    "VISUAL",
];

/// Why `wrap.agent_env` may not set `name`, or `None` when it may.
///
/// Refused: names that are not `^[A-Za-z_][A-Za-z0-9_]*$`; the runtime's own (`PATH`,
/// `HOME`, `TMPDIR`, every `HCP_*`); and names that inject code into the programs a pack
/// wraps (`LD_*`, `DYLD_*`, `GLIBC_TUNABLES`, `BASH_ENV`, `ENV`, `BASH_FUNC_*`,
/// `PYTHONPATH`, `NODE_OPTIONS`, `GIT_CONFIG*`, `GIT_SSH_COMMAND`, `PAGER`, `EDITOR` …).
/// Compared without regard to ASCII case. `LANG`, `LC_*` and `TZ` may be set.
/// `hcp lint` should report the same names at install (a suggested rule).
pub fn agent_env_refusal(name: &str) -> Option<&'static str> {
    let mut chars = name.chars();
    let portable = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !portable {
        return Some("not a portable variable name");
    }
    let upper = name.to_ascii_uppercase();
    if RUNTIME_OWNED.contains(&upper.as_str())
        || upper.starts_with("HCP_")
        || PROXY_VARS.contains(&upper.as_str())
        || upper == "NO_PROXY"
    {
        return Some("the runtime sets it");
    }
    if REFUSED_NAMES.contains(&upper.as_str())
        || REFUSED_PREFIXES.iter().any(|p| upper.starts_with(p))
    {
        return Some("it makes the wrapped program load or run other code");
    }
    None
}

/// Settings that only take code-running configuration away, and so pass
/// [`agent_env_value_refusal`] although their prefix is refused: `GIT_CONFIG_NOSYSTEM`
/// (any value), `GIT_CONFIG_GLOBAL` and `GIT_CONFIG_SYSTEM` set to exactly `/dev/null`.
pub const HARDENING: [(&str, Option<&str>); 3] = [
    ("GIT_CONFIG_NOSYSTEM", None),
    ("GIT_CONFIG_GLOBAL", Some("/dev/null")),
    ("GIT_CONFIG_SYSTEM", Some("/dev/null")),
];

/// Why `wrap.agent_env` may not set `name` to `value`: [`agent_env_refusal`], except for the
/// [`HARDENING`] settings, which are allowed.
pub fn agent_env_value_refusal(name: &str, value: &str) -> Option<&'static str> {
    let hardening = HARDENING
        .iter()
        .any(|(n, v)| *n == name && v.is_none_or(|want| want == value));
    if hardening {
        None
    } else {
        agent_env_refusal(name)
    }
}

/// Whether the parent's variable `name` passes to the child: `PATH`, `HOME`, `LANG`,
/// `TZ`, `TMPDIR` and `LC_<X>` (RUNTIME §5).
pub fn parent_allowed(name: &OsStr) -> bool {
    let b = name.as_bytes();
    PARENT_ALLOWED.iter().any(|a| a.as_bytes() == b)
        || b.strip_prefix(b"LC_").is_some_and(|rest| {
            !rest.is_empty() && rest.iter().all(|c| c.is_ascii_uppercase() || *c == b'_')
        })
}

/// The facts of the call the child sees as `HCP_*` variables (RUNTIME §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallVars<'a> {
    /// `HCP_PACK_ID`.
    pub pack_id: &'a str,
    /// `HCP_VERB_KEY`.
    pub verb_key: &'a str,
    /// `HCP_PRINCIPAL_ID`.
    pub principal_id: &'a str,
    /// `HCP_PROJECT_ID`; the variable is absent (not empty) without a project.
    pub project_id: Option<&'a str>,
    /// `HCP_WORKDIR`; absent (not empty) in `personal` and `brain` land (RUNTIME §5).
    pub workdir: Option<&'a Path>,
}

/// The exact environment of a child, built in layers (RUNTIME §5).
///
/// ```
/// # use hcp_adapter::{CallVars, ChildEnv};
/// # use std::path::Path;
/// let env = ChildEnv::from_parent([("PATH", "/usr/bin"), ("AWS_SECRET_ACCESS_KEY", "x")])
///     .agent_env([("LANG", "C.UTF-8")])?
///     .call(&CallVars {
///         pack_id: "mail",
///         verb_key: "send",
///         principal_id: "owner",
///         project_id: None,
///         workdir: Some(Path::new("/tmp")),
///     })?;
/// assert_eq!(env.get("AWS_SECRET_ACCESS_KEY"), None);
/// assert_eq!(env.get("HCP_VERB_KEY").unwrap(), "send");
/// # Ok::<(), hcp_adapter::AdapterError>(())
/// ```
///
/// A later layer overrides an earlier one for the same name; the layers that could
/// spoof a runtime variable (`agent_env`) refuse those names instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    vars: BTreeMap<OsString, OsString>,
}

impl ChildEnv {
    /// An empty environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts from the parent's variables, keeping only [`parent_allowed`] names.
    /// Pass `std::env::vars_os()` in production.
    pub fn from_parent<I, K, V>(parent: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<OsString>,
        V: Into<OsString>,
    {
        let vars = parent
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(k, v)| {
                parent_allowed(k) && !v.as_bytes().contains(&0) && !k.as_bytes().contains(&0)
            })
            .collect();
        Self { vars }
    }

    /// Sets `HOME` (the sandbox working directory for `local` land).
    pub fn home(mut self, dir: &Path) -> Self {
        self.vars.insert("HOME".into(), dir.as_os_str().to_owned());
        self
    }

    /// Sets `TMPDIR` (the call's `/tmp`).
    pub fn tmpdir(mut self, dir: &Path) -> Self {
        self.vars
            .insert("TMPDIR".into(), dir.as_os_str().to_owned());
        self
    }

    /// Sets `PATH` (the parent's entries that lie in the call's view), or removes it when
    /// `None`.
    pub fn path(mut self, path: Option<&OsStr>) -> Self {
        match path {
            Some(p) => {
                self.vars.insert("PATH".into(), p.to_owned());
            }
            None => {
                self.vars.remove(OsStr::new("PATH"));
            }
        }
        self
    }

    /// Sets the proxy variables of a `{"allow": …}` network (RUNTIME §5): [`PROXY_VARS`]
    /// name `url`, `NODE_USE_ENV_PROXY` is `1`.
    pub fn egress_proxy(mut self, url: &str) -> Self {
        for name in PROXY_VARS {
            let v = if name == "NODE_USE_ENV_PROXY" {
                "1"
            } else {
                url
            };
            self.vars.insert(name.into(), v.into());
        }
        self
    }

    /// Sets `HCP_HOME`: only for a child that is hcp itself (the bootstrap `hcp-cli`
    /// pack), so it reads the store it was called from rather than the default one. The
    /// caller decides that the pinned bin is the running hcp.
    pub fn hcp_home(mut self, dir: &Path) -> Self {
        self.vars
            .insert("HCP_HOME".into(), dir.as_os_str().to_owned());
        self
    }

    /// Sets `HCP_SESSION` to a value no session token has: for a child that is hcp itself
    /// run for a session principal, so it never acts as the owner (its owner-only
    /// commands refuse with `owner_only`, and a call it would make is `bad_session`).
    pub fn not_the_owner(mut self) -> Self {
        self.vars
            .insert("HCP_SESSION".into(), "not-the-owner".into());
        self
    }

    /// Adds `wrap.agent_env`.
    ///
    /// # Errors
    /// [`AdapterError::EnvRefused`] for a name [`agent_env_refusal`] refuses or a value
    /// holding NUL.
    pub fn agent_env<'a, I>(mut self, env: I) -> Result<Self, AdapterError>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        for (k, v) in env {
            if let Some(reason) = agent_env_value_refusal(k, v) {
                return Err(refused(k, reason));
            }
            if v.contains('\0') {
                return Err(refused(k, "its value holds a NUL byte"));
            }
            self.vars.insert(k.into(), v.into());
        }
        Ok(self)
    }

    /// Sets `HCP_PACK_ID`, `HCP_VERB_KEY`, `HCP_PRINCIPAL_ID`, `HCP_PROJECT_ID` (only with
    /// a project) and `HCP_WORKDIR` (only with a workdir).
    ///
    /// # Errors
    /// [`AdapterError::EnvRefused`] when a value holds NUL.
    pub fn call(mut self, call: &CallVars<'_>) -> Result<Self, AdapterError> {
        let values: [Option<&OsStr>; 5] = [
            Some(OsStr::new(call.pack_id)),
            Some(OsStr::new(call.verb_key)),
            Some(OsStr::new(call.principal_id)),
            call.project_id.map(OsStr::new),
            call.workdir.map(Path::as_os_str),
        ];
        for (name, value) in HCP_VARS.iter().zip(values) {
            match value {
                Some(v) if v.as_bytes().contains(&0) => {
                    return Err(refused(name, "its value holds a NUL byte"));
                }
                Some(v) => {
                    self.vars.insert((*name).into(), v.to_owned());
                }
                None => {
                    self.vars.remove(OsStr::new(name));
                }
            }
        }
        Ok(self)
    }

    /// Adds the binding (RUNTIME §8): each top-level string field `k` of the credential
    /// becomes `HCP_BINDING_<K>` (ASCII upper-cased, any other character than `A-Z0-9`
    /// as `_`); other fields are ignored.
    ///
    /// # Errors
    /// [`AdapterError::EnvRefused`] for an empty field name, two fields that map to the
    /// same variable, or a value holding NUL.
    pub fn binding(
        mut self,
        credential: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, AdapterError> {
        let mut added: Vec<String> = Vec::new();
        for (k, v) in credential {
            let serde_json::Value::String(v) = v else {
                continue;
            };
            if k.is_empty() {
                return Err(refused(BINDING_PREFIX, "a binding field has an empty name"));
            }
            let mut name = String::with_capacity(BINDING_PREFIX.len() + k.len());
            name.push_str(BINDING_PREFIX);
            name.extend(k.chars().map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            }));
            if added.contains(&name) {
                return Err(refused(&name, "two binding fields map to this name"));
            }
            if v.contains('\0') {
                return Err(refused(&name, "its value holds a NUL byte"));
            }
            self.vars.insert(name.clone().into(), v.into());
            added.push(name);
        }
        Ok(self)
    }

    /// The value of `name`, when set.
    pub fn get(&self, name: impl AsRef<OsStr>) -> Option<&OsStr> {
        self.vars.get(name.as_ref()).map(OsString::as_os_str)
    }

    /// The variables, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// How many variables the child gets.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether the child gets no variable at all.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
}

fn refused(name: &str, reason: &'static str) -> AdapterError {
    AdapterError::EnvRefused {
        name: name.to_owned(),
        reason,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parent() -> Vec<(&'static str, &'static str)> {
        vec![
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/u"),
            ("LANG", "en_US.UTF-8"),
            ("LC_ALL", "C"),
            ("LC_TIME", "C"),
            ("TZ", "UTC"),
            ("TMPDIR", "/tmp"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("OPENAI_API_KEY", "sk"),
            ("HCP_SESSION", "tok"),
            ("HCP_HOME", "/h"),
            ("LD_PRELOAD", "/evil.so"),
            ("BASH_ENV", "/evil.sh"),
            ("LC_", "x"),
            ("lc_all", "x"),
            ("SSH_AUTH_SOCK", "/s"),
        ]
    }

    fn call() -> CallVars<'static> {
        CallVars {
            pack_id: "mail",
            verb_key: "send",
            principal_id: "alice",
            project_id: Some("apollo"),
            workdir: Some(Path::new("/srv/w")),
        }
    }

    fn names(env: &ChildEnv) -> Vec<String> {
        env.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn layers_and_allow_list() {
        let mut cred = serde_json::Map::new();
        cred.insert("token".into(), "t0k".into());
        cred.insert("api-key".into(), "k".into());
        cred.insert("expires".into(), 5.into());
        let env = ChildEnv::from_parent(parent())
            .home(Path::new("/srv/w"))
            .agent_env([("LANG", "C.UTF-8"), ("MAIL_FORMAT", "json")])
            .unwrap()
            .call(&call())
            .unwrap()
            .binding(&cred)
            .unwrap();
        assert_eq!(
            names(&env),
            [
                "HCP_BINDING_API_KEY",
                "HCP_BINDING_TOKEN",
                "HCP_PACK_ID",
                "HCP_PRINCIPAL_ID",
                "HCP_PROJECT_ID",
                "HCP_VERB_KEY",
                "HCP_WORKDIR",
                "HOME",
                "LANG",
                "LC_ALL",
                "LC_TIME",
                "MAIL_FORMAT",
                "PATH",
                "TMPDIR",
                "TZ",
            ]
        );
        assert_eq!(env.get("HOME").unwrap(), "/srv/w");
        assert_eq!(env.get("LANG").unwrap(), "C.UTF-8");
        assert_eq!(env.get("HCP_BINDING_TOKEN").unwrap(), "t0k");
    }

    #[test]
    fn no_project_means_no_variable() {
        let mut c = call();
        c.project_id = None;
        let env = ChildEnv::new().call(&c).unwrap();
        assert_eq!(env.get("HCP_PROJECT_ID"), None);
    }

    #[test]
    fn agent_env_cannot_smuggle() {
        for name in [
            "LD_PRELOAD",
            "ld_library_path",
            "BASH_ENV",
            "ENV",
            "HCP_SESSION",
            "HCP_BINDING_TOKEN",
            "HCP_PRINCIPAL_ID",
            "PATH",
            "HOME",
            "TMPDIR",
            "GIT_CONFIG_PARAMETERS",
            "GIT_SSH_COMMAND",
            "BASH_FUNC_ls%%",
            "NODE_OPTIONS",
            "GLIBC_TUNABLES",
            "HTTPS_PROXY",
            "no_proxy",
            "NODE_USE_ENV_PROXY",
            "A=B",
            "",
            "1X",
        ] {
            let e = ChildEnv::new().agent_env([(name, "x")]).unwrap_err();
            assert_eq!(e.code(), "env_refused", "{name}");
        }
        let e = ChildEnv::new().agent_env([("OK", "a\0b")]).unwrap_err();
        assert_eq!(e.code(), "env_refused");
        // The parent's secrets never pass.
        let env = ChildEnv::from_parent(parent());
        for secret in [
            "AWS_SECRET_ACCESS_KEY",
            "OPENAI_API_KEY",
            "HCP_SESSION",
            "HCP_HOME",
            "LD_PRELOAD",
            "BASH_ENV",
            "SSH_AUTH_SOCK",
            "LC_",
            "lc_all",
        ] {
            assert_eq!(env.get(secret), None, "{secret}");
        }
    }

    #[test]
    fn binding_collisions_and_nul() {
        let mut cred = serde_json::Map::new();
        cred.insert("a-b".into(), "1".into());
        cred.insert("a_b".into(), "2".into());
        assert_eq!(
            ChildEnv::new().binding(&cred).unwrap_err().code(),
            "env_refused"
        );
        let mut cred = serde_json::Map::new();
        cred.insert("t".into(), "a\0".into());
        assert_eq!(
            ChildEnv::new().binding(&cred).unwrap_err().code(),
            "env_refused"
        );
    }
}

#[cfg(test)]
mod hardening_tests {
    use super::*;

    #[test]
    fn git_hardening_passes_only_with_its_safe_values() {
        assert_eq!(agent_env_value_refusal("GIT_CONFIG_NOSYSTEM", "1"), None);
        assert_eq!(
            agent_env_value_refusal("GIT_CONFIG_GLOBAL", "/dev/null"),
            None
        );
        assert!(agent_env_value_refusal("GIT_CONFIG_GLOBAL", "/tmp/evil").is_some());
        assert!(agent_env_value_refusal("GIT_CONFIG_PARAMETERS", "x").is_some());
        assert!(agent_env_value_refusal("LD_PRELOAD", "/dev/null").is_some());
    }
}
