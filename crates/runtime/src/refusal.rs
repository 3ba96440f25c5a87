//! A refusal or failure of a call: its [`Code`] (which gives the exit status), message and
//! hint; and the conversions from every library error into one.

use hcp_model::Code;
use hcp_store::pack::PackError;

/// A refusal of a call: code, lowercase message, hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code; its [`Code::exit_status`] is the call's exit status.
    pub code: Code,
    /// The message (`confirm required` for the confirm gate).
    pub message: String,
    /// How to proceed.
    pub hint: Option<String>,
}

impl std::fmt::Display for Refusal {
    /// The message alone (the code and the hint are their own fields).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Refusal {
    /// A refusal without a hint.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            hint: None,
        }
    }

    /// Adds a hint.
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The exit status of the call it refuses (RUNTIME §5).
    pub fn exit(&self) -> u8 {
        self.code.exit_status()
    }

    /// The gate's refusal (steps 1–6).
    pub fn from_gate(r: &hcp_gate::check::Refusal) -> Self {
        Self {
            code: r.code,
            message: r.message.clone(),
            hint: r.hint.clone(),
        }
    }

    /// A store failure, with its own code.
    pub fn store(e: &hcp_store::StoreError) -> Self {
        Self {
            code: e.code(),
            message: e.to_string(),
            hint: e.hint().map(str::to_owned),
        }
    }

    /// An adapter failure, with its code.
    pub fn adapter(e: &hcp_adapter::AdapterError) -> Self {
        let mut message = e.to_string();
        if matches!(
            e,
            hcp_adapter::AdapterError::SpawnFailed { .. }
                | hcp_adapter::AdapterError::SandboxFailed { .. }
        ) && let Some(cause) = std::error::Error::source(e)
        {
            // The OS error is what tells a spawn or sandbox failure apart.
            message = format!("{message}: {cause}");
        }
        let mut r = Self::new(e.code(), message);
        if matches!(e, hcp_adapter::AdapterError::ArgTooLong { .. }) {
            r.hint = Some("pass large content through a file in the working directory".into());
        }
        r
    }
}

/// A pack refusal or failure with its code and the hint `hcp` gives for it (install,
/// uninstall, activation, and every face that loads a pack by id).
pub fn pack_refusal(e: &PackError) -> Refusal {
    let r = Refusal::new(e.code(), e.to_string());
    match e {
        // What `hcp lint` says of the same directory (RUNTIME §2: one set of path rules).
        PackError::Unreadable { path, source } => {
            let b = hcp_lint::bad_pack_dir(path, source);
            Refusal::new(e.code(), b.message).hint(b.hint)
        }
        PackError::AlreadyInstalled { .. } => r.hint("pass `--force` to replace it"),
        PackError::NotInstalled { .. } => r.hint("`hcp list` shows the installed packs"),
        PackError::BinMissing { .. } => {
            r.hint("install the program or put it on `PATH`; install pins it by path and digest")
        }
        PackError::BinUnsafe {
            code: Code::HcpBinReserved,
            ..
        } => r.hint("only the bootstrap pack `hcp-cli` wraps hcp; wrap another CLI"),
        PackError::BinUnsafe { .. } => {
            r.hint("name a regular file inside the pack directory, or a bare command on `PATH`")
        }
        PackError::Export(x) => r.hint(x.hint()),
        PackError::FamilyClaimed { family, .. } => r.hint(format!(
            "packs of one family share each principal's credential; if this pack may have it, install it with `hcp install DIR --join-family {family}`"
        )),
        PackError::FamilyNotDeclared { .. } => {
            r.hint("`--join-family` takes the family the pack's surface.json declares in `binding.family`")
        }
        PackError::Openapi(_) => {
            r.hint("`hcp lint DIR` checks a document beside the pack; install reads one at a URL")
        }
        PackError::Store(hcp_store::StoreError::Damaged { reason, .. })
            if reason.ends_with(hcp_store::ledger::UNBELIEVED) =>
        {
            r.hint(hcp_store::ledger::UNBELIEVED_HINT)
        }
        PackError::Store(hcp_store::StoreError::Damaged { path, .. }) => {
            match damaged_pack_id(path) {
                Some(id) => r.hint(format!(
                    "it refuses pack `{id}` alone: `hcp install --force DIR` from the pack's source writes it again, or `hcp uninstall {id}`; `hcp doctor` lists it"
                )),
                None => r,
            }
        }
        _ => r,
    }
}

/// The pack a damaged file of an installed pack belongs to (`…/packs/<id>/<file>`, RUNTIME
/// §4 "Fault isolation"), when `path` is one.
fn damaged_pack_id(path: &std::path::Path) -> Option<String> {
    let parts: Vec<_> = path
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let at = parts
        .iter()
        .rposition(|c| c == "packs")
        .filter(|&i| i + 2 < parts.len())?;
    let id = parts.get(at + 1)?;
    hcp_model::PackId::parse(id).ok().map(|_| id.clone())
}
