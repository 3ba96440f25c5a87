//! `secret_file` (error): a `.env`, a `secrets/` directory or a private key in the pack.
//!
//! ## What it does
//! Reports any entry, at any depth, named `.env`, `.env.*` or `.envrc`; a directory named
//! `secrets` or `.secrets` (once, not each file in it); a private key or credential store:
//! `id_rsa`, `id_dsa`, `id_ecdsa`, `id_ed25519` (not their `.pub`), `*.pem`, `*.key`,
//! `*.p12`, `*.pfx`, `*.jks`, `*.keystore`, `.netrc`, `.pgpass`, `.git-credentials`.
//!
//! ## Why is this bad?
//! Secrets stay out of a pack: the pack names a binding
//! mode and the runtime's hub mints the credential per principal. A pack is copied,
//! shared and published; a key inside it is a key given to everyone who installs it.
//!
//! ## Example
//! ```text
//! packs/mail/
//!   surface.json  policy.json  HARNESS.md
//!   .env          <- MAIL_TOKEN=…
//! ```

use crate::context::{Ctx, tick};
use crate::diagnostic::Diagnostic;

/// The rule's code.
pub(crate) const CODE: hcp_model::Code = hcp_model::Code::SecretFile;

/// Whether an entry named `name` (a basename) holds secrets; `dir` when it is a directory.
pub(crate) fn is_secret(name: &str, dir: bool) -> bool {
    let lower = name.to_lowercase();
    if dir {
        return lower == "secrets" || lower == ".secrets";
    }
    lower == ".env"
        || lower.starts_with(".env.")
        || lower == ".envrc"
        || matches!(
            lower.as_str(),
            "id_rsa"
                | "id_dsa"
                | "id_ecdsa"
                | "id_ed25519"
                | ".netrc"
                | ".pgpass"
                | ".git-credentials"
        )
        || [".pem", ".key", ".p12", ".pfx", ".jks", ".keystore"]
            .iter()
            .any(|ext| lower.len() > ext.len() && lower.ends_with(ext))
}

pub(crate) fn run(cx: &Ctx<'_>, out: &mut Vec<Diagnostic>) {
    let mut secret_dirs: Vec<String> = Vec::new();
    for e in &cx.source.entries {
        if secret_dirs
            .iter()
            .any(|d| e.rel.starts_with(&format!("{d}/")))
        {
            continue;
        }
        let name = e.rel.rsplit('/').next().unwrap_or(&e.rel);
        let dir = e.kind == crate::source::EntryKind::Dir;
        if !is_secret(name, dir) {
            continue;
        }
        let what = if dir {
            secret_dirs.push(e.rel.clone());
            "a secrets directory"
        } else {
            "a secret or private key"
        };
        out.push(
            Diagnostic::error(CODE, format!("{} looks like {what}", tick(&e.rel)))
                .in_file(e.rel.clone())
                .hint("remove it: secrets stay out of a pack; the binding mode says how the runtime mints a credential"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::is_secret;

    #[test]
    fn names() {
        for n in [
            ".env",
            ".env.local",
            ".ENV",
            "id_rsa",
            "server.pem",
            "tls.key",
            ".netrc",
        ] {
            assert!(is_secret(n, false), "{n}");
        }
        for n in ["id_rsa.pub", "environment.md", ".key", "keys.json", "envoy"] {
            assert!(!is_secret(n, false), "{n}");
        }
        assert!(is_secret("secrets", true));
        assert!(!is_secret("secrets", false));
    }
}
