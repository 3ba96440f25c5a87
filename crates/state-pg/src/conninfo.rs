//! The two forms of a PostgreSQL connection string (libpq's), and the key words hcp
//! handles itself before the client sees the rest: `sslmode` (the client knows only
//! `disable`, `prefer` and `require`) and `sslrootcert`.

/// A connection string with hcp's own key words taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    /// The rest, in the form it was given, for the client's own parser.
    pub rest: String,
    /// `sslmode`, when given.
    pub sslmode: Option<String>,
    /// `sslrootcert`, when given.
    pub sslrootcert: Option<String>,
}

const OURS: [&str; 2] = ["sslmode", "sslrootcert"];

/// Splits `url` (`postgresql://…` / `postgres://…`, or `key=value …`).
///
/// # Errors
/// A lowercase reason when a key word's value cannot be read (an unterminated quote, a
/// bad percent escape).
pub(crate) fn split(url: &str) -> Result<Split, String> {
    if url.starts_with("postgresql://") || url.starts_with("postgres://") {
        split_url(url)
    } else {
        split_key_values(url)
    }
}

fn split_url(url: &str) -> Result<Split, String> {
    let mut out = Split {
        rest: url.to_owned(),
        sslmode: None,
        sslrootcert: None,
    };
    let Some((base, query)) = url.split_once('?') else {
        return Ok(out);
    };
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(k)?;
        if OURS.contains(&key.as_str()) {
            let value = percent_decode(v)?;
            if key == "sslmode" {
                out.sslmode = Some(value);
            } else {
                out.sslrootcert = Some(value);
            }
        } else {
            kept.push(pair);
        }
    }
    out.rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok(out)
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in `{s}`"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("`{s}` is not UTF-8 once decoded"))
}

/// libpq's key/value form: `key = value` pairs separated by white space; a value is bare
/// (backslash escapes) or in single quotes (`\'` and `\\` escaped).
fn split_key_values(s: &str) -> Result<Split, String> {
    let mut out = Split {
        rest: String::new(),
        sslmode: None,
        sslrootcert: None,
    };
    let mut kept: Vec<String> = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(format!("`{key}` has no `=` and value"));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("the value of `{key}` has no closing quote")),
                    Some('\'') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(format!("the value of `{key}` ends in `\\`")),
                    },
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    match chars.next() {
                        Some(e) => value.push(e),
                        None => return Err(format!("the value of `{key}` ends in `\\`")),
                    }
                } else {
                    value.push(c);
                }
            }
        }
        match key.as_str() {
            "sslmode" => out.sslmode = Some(value),
            "sslrootcert" => out.sslrootcert = Some(value),
            _ => kept.push(format!("{key}='{}'", quote(&value))),
        }
    }
    out.rest = kept.join(" ");
    Ok(out)
}

fn quote(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\'', "\\'")
}

/// The connection string with any password replaced by `***`, for messages.
pub(crate) fn redact(url: &str) -> String {
    if let Some(rest) = url
        .strip_prefix("postgresql://")
        .or_else(|| url.strip_prefix("postgres://"))
    {
        let scheme = &url[..url.len() - rest.len()];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let authority = match authority.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{user}:***@{host}"),
                None => authority.to_owned(),
            },
            None => authority.to_owned(),
        };
        let tail = match tail.split_once('?') {
            None => tail.to_owned(),
            Some((path, query)) => {
                let query = query
                    .split('&')
                    .map(|p| match p.split_once('=') {
                        Some(("password", _)) => "password=***".to_owned(),
                        _ => p.to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join("&");
                format!("{path}?{query}")
            }
        };
        return format!("{scheme}{authority}{tail}");
    }
    match split_key_values(url) {
        Ok(_) => url
            .split_whitespace()
            .map(|w| {
                if w.starts_with("password") {
                    "password=***".to_owned()
                } else {
                    w.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join(" "),
        Err(_) => "(unreadable)".to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn url_form_loses_only_our_key_words() {
        let s = split(
            "postgresql://u:p@h:5/db?sslmode=verify-full&connect_timeout=3&sslrootcert=%2Fca.pem",
        )
        .unwrap();
        assert_eq!(
            s,
            Split {
                rest: "postgresql://u:p@h:5/db?connect_timeout=3".into(),
                sslmode: Some("verify-full".into()),
                sslrootcert: Some("/ca.pem".into()),
            }
        );
        let s = split("postgres://h/db?sslmode=require").unwrap();
        assert_eq!(s.rest, "postgres://h/db");
        assert_eq!(split("postgres://h/db").unwrap().sslmode, None);
        assert!(split("postgres://h/db?sslmode=%zz").is_err());
    }

    #[test]
    fn key_value_form_handles_quotes_and_escapes() {
        let s = split(
            "host=/run/pg  user = me password='it\\'s a secret' sslmode=require sslrootcert='/a b.pem'",
        )
        .unwrap();
        assert_eq!(
            s,
            Split {
                rest: "host='/run/pg' user='me' password='it\\'s a secret'".into(),
                sslmode: Some("require".into()),
                sslrootcert: Some("/a b.pem".into()),
            }
        );
        assert!(split("host='/x").is_err());
        assert!(split("host").is_err());
        assert_eq!(split("").unwrap().rest, "");
    }

    #[test]
    fn redaction_hides_passwords_in_both_forms() {
        assert_eq!(
            redact("postgresql://u:secret@h/db?password=x&sslmode=require"),
            "postgresql://u:***@h/db?password=***&sslmode=require"
        );
        assert_eq!(redact("postgresql://h/db"), "postgresql://h/db");
        assert_eq!(
            redact("host=/s user=u password=secret"),
            "host=/s user=u password=***"
        );
    }
}
