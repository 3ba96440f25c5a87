//! The one origin a pack's requests go to (RUNTIME §1.3).

use crate::error::BadOpenapi;
use crate::pointer::shorten;

/// An absolute `http` or `https` base URL without query, fragment or credentials: the
/// document's first server, or the operator's per-pack `server`. Every request of the pack
/// goes to its origin (scheme, host, port) and under its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    url: url::Url,
}

impl ServerUrl {
    /// Parses an operator's `server` setting (`config.json`, `"packs": {"ID": {"server":
    /// URL}}`).
    ///
    /// # Errors
    /// [`BadOpenapi`] (pointer empty) for a URL that does not parse, is relative, has a
    /// scheme other than `http`/`https`, carries a user name or password, a query or a
    /// fragment.
    pub fn parse(text: &str) -> Result<Self, BadOpenapi> {
        let url = url::Url::parse(text)
            .map_err(|e| BadOpenapi::at("", format!("server URL `{}`: {e}", shorten(text))))?;
        Self::from_url(url, "")
    }

    pub(crate) fn from_url(url: url::Url, at: &str) -> Result<Self, BadOpenapi> {
        let shown = shorten(url.as_str());
        if !matches!(url.scheme(), "http" | "https") {
            return Err(BadOpenapi::at(
                at,
                format!(
                    "server URL `{shown}` has scheme `{}`; hcp sends only to `http` or `https`",
                    url.scheme()
                ),
            ));
        }
        if url.host().is_none() {
            return Err(BadOpenapi::at(
                at,
                format!("server URL `{shown}` has no host"),
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(BadOpenapi::at(
                at,
                "a server URL may not carry a user name or password; credentials come from the binding",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(BadOpenapi::at(
                at,
                format!("server URL `{shown}` has a query or fragment"),
            ));
        }
        Ok(Self { url })
    }

    /// The URL as text (`https://api.example.com/v1`).
    pub fn as_str(&self) -> &str {
        self.url.as_str()
    }

    /// The origin, `scheme://host:port` with the port always written
    /// (`https://api.example.com:443`).
    pub fn origin(&self) -> String {
        origin_of(&self.url)
    }

    pub(crate) fn url(&self) -> &url::Url {
        &self.url
    }
}

/// `scheme://host:port` of an absolute URL, the port always written.
pub(crate) fn origin_of(u: &url::Url) -> String {
    format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str().unwrap_or(""),
        u.port_or_known_default().unwrap_or(0)
    )
}

impl std::fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.url.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn only_plain_http_origins() {
        let s = ServerUrl::parse("http://127.0.0.1:8080/v1").unwrap();
        assert_eq!(s.origin(), "http://127.0.0.1:8080");
        assert_eq!(
            ServerUrl::parse("https://api.example.com")
                .unwrap()
                .origin(),
            "https://api.example.com:443"
        );
        for bad in [
            "ftp://example.com",
            "file:///etc/passwd",
            "javascript:alert(1)",
            "http://user:pw@example.com",
            "http://example.com/?q=1",
            "/v1",
        ] {
            assert!(ServerUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
