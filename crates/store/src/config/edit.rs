//! `hcp config get` / `set` / `unset` over the text of `config.json` (RUNTIME §3): dotted
//! keys, strict, the rest kept.
//!
//! There is no list of keys here: a key is known when [`RuntimeConfig`]'s strict parse
//! takes a document that holds it, so the keys `hcp config` accepts are exactly the ones a
//! call reads, and an unknown key is refused with the nearest keys the parser names. An
//! edit is computed as the whole new text and checked by the same parse (and its range
//! checks) before the caller writes anything; a refused edit writes nothing. Writing, the
//! store lock and the act of authority are the caller's (`hcp_runtime::authority`).
//!
//! A key is its segments joined by `.` (`limits.cpu_seconds`, `packs.mail.network`). A map
//! whose keys hold a `.` (`resolvers`, keyed by `PACK.VERB`) takes the rest of the key as
//! one segment when the plain reading is not a key: `resolvers.mail.search` is the entry
//! `"mail.search"` of `resolvers`.

use super::{ConfigError, RuntimeConfig};
use hcp_model::strict::{ParseCode, ParseError, parse_strict};
use serde_json::{Map, Value};
use std::path::Path;

/// Why `hcp config` refuses (nothing written).
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// `bad_config_key`: a key `config.json` does not have (`nearest`: the dotted keys
    /// the parser would take at that place, closest first, at most 3).
    #[error("`{key}` is not a key of `config.json`")]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The nearest keys, dotted.
        nearest: Vec<String>,
    },
    /// `bad_config_key`: the key exists; the value is not one it takes.
    #[error("`{key}` does not take {value}: {message}")]
    WrongValue {
        /// The key as given.
        key: String,
        /// The value as read (JSON text).
        value: String,
        /// The parser's reason, naming the expected type (`expected u64`).
        message: String,
        /// The key as `docs/config.md` documents it: its section and the type it takes
        /// (`None` for a key the reference documents with its parent).
        doc: Option<super::schema::KeyDoc>,
    },
    /// `bad_config_key`: an empty key or an empty segment (`limits.`, `.x`).
    #[error("`{key}` is not a dotted key")]
    BadKey {
        /// The key as given.
        key: String,
    },
    /// The file as it is does not load (`bad_config`, naming file, line and column).
    #[error(transparent)]
    Damaged(#[from] ConfigError),
}

/// A new `config.json` text and what it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The whole new file (pretty JSON, a newline at the end).
    pub text: String,
    /// The key as stored (its segments).
    pub segments: Vec<String>,
}

/// The document of `text` (`None`: no file: `{}`), loaded strictly first so a damaged file
/// is refused as every call refuses it.
fn document(text: Option<&str>, path: &Path) -> Result<Map<String, Value>, EditError> {
    let Some(text) = text else {
        return Ok(Map::new());
    };
    RuntimeConfig::parse(text, path)?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(m)) => Ok(m),
        // The strict parse took it, so it is an object; anything else is damage.
        _ => Err(EditError::Damaged(ConfigError::Invalid {
            path: path.to_owned(),
            line: 0,
            column: 0,
            message: "not a JSON object".into(),
        })),
    }
}

/// The segments of `key`, or [`EditError::BadKey`].
fn segments(key: &str) -> Result<Vec<String>, EditError> {
    let s: Vec<String> = key.split('.').map(str::to_owned).collect();
    if key.is_empty() || s.iter().any(String::is_empty) {
        return Err(EditError::BadKey { key: key.into() });
    }
    Ok(s)
}

/// The readings of `key`: the plain one first, then the ones whose last segment is the
/// rest of the key joined (for a map keyed by dotted names), longest prefix first.
fn readings(key: &str) -> Result<Vec<Vec<String>>, EditError> {
    let plain = segments(key)?;
    let mut out = vec![plain.clone()];
    for i in (1..plain.len() - 1).rev() {
        let mut r = plain[..i].to_vec();
        r.push(plain[i..].join("."));
        out.push(r);
    }
    Ok(out)
}

/// `doc` with `value` at `segments` (objects made on the way; a non-object on the way is
/// replaced, and the parse then names what the key takes).
fn with(doc: &Map<String, Value>, segments: &[String], value: Value) -> Map<String, Value> {
    fn put(m: &mut Map<String, Value>, s: &[String], value: Value) {
        match s {
            [] => {}
            [last] => {
                m.insert(last.clone(), value);
            }
            [first, rest @ ..] => {
                let slot = m
                    .entry(first.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(inner) = slot {
                    put(inner, rest, value);
                }
            }
        }
    }
    let mut doc = doc.clone();
    put(&mut doc, segments, value);
    doc
}

/// `doc` without `segments` (`None` when it is not set); objects left empty on the way
/// are removed too.
fn without(doc: &Map<String, Value>, segments: &[String]) -> Option<Map<String, Value>> {
    fn go(m: &mut Map<String, Value>, s: &[String]) -> bool {
        match s {
            [] => false,
            [last] => m.remove(last).is_some(),
            [first, rest @ ..] => {
                let Some(Value::Object(inner)) = m.get_mut(first) else {
                    return false;
                };
                let removed = go(inner, rest);
                if removed && inner.is_empty() {
                    m.remove(first);
                }
                removed
            }
        }
    }
    let mut doc = doc.clone();
    go(&mut doc, segments).then_some(doc)
}

/// The value at `segments` in `v`, if set.
fn lookup<'a>(v: &'a Map<String, Value>, segments: &[String]) -> Option<&'a Value> {
    let (first, rest) = segments.split_first()?;
    let here = v.get(first)?;
    if rest.is_empty() {
        return Some(here);
    }
    match here {
        Value::Object(m) => lookup(m, rest),
        _ => None,
    }
}

/// The text of `doc` as `hcp config` writes it.
fn render(doc: &Map<String, Value>) -> String {
    let mut s = serde_json::to_string_pretty(doc).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// How the parser takes `doc`: `Ok`, or the strict parse's failure, or a range check's.
fn check(doc: &Map<String, Value>, path: &Path) -> Result<(), Failure> {
    let text = render(doc);
    parse_strict::<RuntimeConfig>(&text).map_err(Failure::Parse)?;
    RuntimeConfig::parse(&text, path).map_err(Failure::Range)?;
    Ok(())
}

enum Failure {
    Parse(ParseError),
    Range(ConfigError),
}

impl Failure {
    fn unknown(&self) -> bool {
        matches!(self, Self::Parse(e) if e.code == ParseCode::UnknownField)
    }
}

/// The error for `key` from the failure of its plain reading.
fn refusal(key: &str, value: &Value, f: Failure) -> EditError {
    match f {
        Failure::Parse(e) if e.code == ParseCode::UnknownField => EditError::UnknownKey {
            key: key.into(),
            nearest: nearest(&e),
        },
        Failure::Parse(e) => EditError::WrongValue {
            key: key.into(),
            value: value.to_string(),
            message: strip_at(&e.message),
            doc: documented(key),
        },
        Failure::Range(ConfigError::Invalid { message, .. }) => EditError::WrongValue {
            key: key.into(),
            value: value.to_string(),
            message,
            doc: documented(key),
        },
        Failure::Range(e) => EditError::Damaged(e),
    }
}

/// `key` as `docs/config.md` documents it, by the first of its readings the reference has.
fn documented(key: &str) -> Option<super::schema::KeyDoc> {
    readings(key)
        .ok()?
        .iter()
        .find_map(|r| super::schema::key_doc(r))
}

/// `message` without the parser's ` (at `PATH`)` tail (the key is named already).
fn strip_at(message: &str) -> String {
    match message.rfind(" (at `") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

/// The dotted keys serde names for an unknown field (`expected one of `a`, `b``), nearest
/// to the one given first, at most 3.
fn nearest(e: &ParseError) -> Vec<String> {
    let (parent, given) = match e.path.rsplit_once('.') {
        Some((p, g)) => (format!("{p}."), g),
        None => (String::new(), e.path.as_str()),
    };
    let Some((_, list)) = e.message.split_once("expected ") else {
        return Vec::new();
    };
    let list = strip_at(list);
    let mut fields: Vec<&str> = list
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|f| !f.is_empty())
        .collect();
    fields.sort_by_key(|f| (strsim::levenshtein(given, f), *f));
    // The nearest one, and the others about as near (a third of the letters differ).
    let near = (given.chars().count() / 3).max(2);
    let mut keep = 1;
    while keep < fields.len().min(3) && strsim::levenshtein(given, fields[keep]) <= near {
        keep += 1;
    }
    fields.truncate(keep);
    fields.into_iter().map(|f| format!("{parent}{f}")).collect()
}

/// `value` as `hcp config set` reads it: JSON when it parses, else the text as a string.
pub fn read_value(value: &str) -> Value {
    serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()))
}

/// `hcp config set KEY VALUE` on `text` (the file's content; `None`: no file): the new
/// text, checked by the strict parse every call makes.
///
/// # Errors
/// [`EditError`]: the file does not load, the key is not one, or the value is not one
/// the key takes.
pub fn set(text: Option<&str>, path: &Path, key: &str, value: Value) -> Result<Edited, EditError> {
    let doc = document(text, path)?;
    let mut first = None;
    for r in readings(key)? {
        let new = with(&doc, &r, value.clone());
        match check(&new, path) {
            Ok(()) => {
                return Ok(Edited {
                    text: render(&new),
                    segments: r,
                });
            }
            // A key the plain reading does not know is unknown: a dotted map key is read
            // only where the plain reading stops at a map's value.
            Err(f) if first.is_none() && f.unknown() => return Err(refusal(key, &value, f)),
            Err(f) => {
                first.get_or_insert(f);
            }
        }
    }
    Err(match first {
        Some(f) => refusal(key, &value, f),
        None => EditError::BadKey { key: key.into() },
    })
}

/// `hcp config unset KEY` on `text`: the new text, or `None` when the key is a key of
/// `config.json` that the file does not set (nothing to change).
///
/// # Errors
/// [`EditError`]: the file does not load, the key is not one, or the file without it
/// does not load (a required key of a section that stays).
pub fn unset(text: Option<&str>, path: &Path, key: &str) -> Result<Option<Edited>, EditError> {
    let doc = document(text, path)?;
    for r in readings(key)? {
        if let Some(new) = without(&doc, &r) {
            return match check(&new, path) {
                Ok(()) => Ok(Some(Edited {
                    text: render(&new),
                    segments: r,
                })),
                Err(f) => Err(refusal(key, &Value::Null, f)),
            };
        }
    }
    known(&doc, path, key)?;
    Ok(None)
}

/// `Ok` when `key` is a key of `config.json` (set or not), else [`EditError::UnknownKey`].
fn known(doc: &Map<String, Value>, path: &Path, key: &str) -> Result<(), EditError> {
    let plain = segments(key)?;
    match check(&with(doc, &plain, Value::Null), path) {
        Err(f) if f.unknown() => Err(refusal(key, &Value::Null, f)),
        _ => Ok(()),
    }
}

/// `hcp config get [KEY]` on `text`: the whole effective configuration (every default
/// filled in; the `state` URL, which may hold a password, left out), or the value of
/// `key` (as the file sets it, else its default; `null` for a key with neither).
///
/// # Errors
/// [`EditError`]: the file does not load, or the key is not one.
pub fn get(text: Option<&str>, path: &Path, key: Option<&str>) -> Result<Value, EditError> {
    let doc = document(text, path)?;
    let effective = match text {
        Some(t) => RuntimeConfig::parse(t, path)?,
        None => RuntimeConfig::default(),
    };
    let effective = match serde_json::to_value(&effective) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let Some(key) = key else {
        return Ok(Value::Object(effective));
    };
    for r in readings(key)? {
        if let Some(v) = lookup(&doc, &r).or_else(|| lookup(&effective, &r)) {
            return Ok(v.clone());
        }
    }
    known(&doc, path, key)?;
    Ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn p() -> &'static Path {
        Path::new("config.json")
    }

    #[test]
    fn set_keeps_the_rest_and_reads_a_bare_word_as_a_string() {
        let text = r#"{"limits": {"cpu_seconds": 5}, "policy_mode": "observe"}"#;
        let e = set(Some(text), p(), "sandbox.network", read_value("host")).unwrap();
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert_eq!(
            v,
            json!({"limits": {"cpu_seconds": 5}, "policy_mode": "observe", "sandbox": {"network": "host"}})
        );
        let e = set(Some(&e.text), p(), "limits.cpu_seconds", read_value("9")).unwrap();
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert_eq!(v["limits"], json!({"cpu_seconds": 9}));
    }

    #[test]
    fn an_unknown_key_names_the_nearest() {
        let Err(EditError::UnknownKey { nearest, .. }) =
            set(None, p(), "limits.cpu_second", json!(3))
        else {
            panic!("not refused")
        };
        assert_eq!(nearest[0], "limits.cpu_seconds");
        let Err(EditError::UnknownKey { nearest, .. }) = set(None, p(), "sandbx", json!(true))
        else {
            panic!("not refused")
        };
        assert_eq!(nearest[0], "sandbox");
    }

    #[test]
    fn a_wrong_type_names_the_expected_one() {
        let Err(EditError::WrongValue { message, doc, .. }) =
            set(None, p(), "limits.cpu_seconds", read_value("many"))
        else {
            panic!("not refused")
        };
        assert!(message.contains("expected u64"), "{message}");
        assert_eq!(
            doc.map(|d| (d.name, d.takes)),
            Some(("limits.cpu_seconds".to_owned(), "integer".to_owned()))
        );
        let Err(EditError::WrongValue { doc, .. }) =
            set(None, p(), "packs.mail.network", read_value("[1]"))
        else {
            panic!("not refused")
        };
        assert_eq!(
            doc.map(|d| d.name),
            Some("packs.PACK_ID.network".to_owned())
        );
        assert!(matches!(
            set(None, p(), "limits.cpu_seconds", json!(0)),
            Err(EditError::WrongValue { .. })
        ));
    }

    #[test]
    fn a_dotted_map_key_is_one_segment() {
        let e = set(None, p(), "resolvers.mail.search", read_value("mail.fetch")).unwrap();
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert_eq!(v, json!({"resolvers": {"mail.search": "mail.fetch"}}));
        assert_eq!(
            get(Some(&e.text), p(), Some("resolvers.mail.search")).unwrap(),
            json!("mail.fetch")
        );
        let gone = unset(Some(&e.text), p(), "resolvers.mail.search")
            .unwrap()
            .unwrap();
        assert_eq!(gone.text, "{}\n");
    }

    #[test]
    fn unset_of_a_key_not_set_changes_nothing_and_an_unknown_one_is_refused() {
        assert_eq!(unset(Some("{}"), p(), "limits.cpu_seconds").unwrap(), None);
        assert!(matches!(
            unset(Some("{}"), p(), "limits.nope"),
            Err(EditError::UnknownKey { .. })
        ));
    }

    #[test]
    fn get_gives_the_default_of_a_key_not_set() {
        assert_eq!(
            get(None, p(), Some("limits.cpu_seconds")).unwrap(),
            json!(super::super::DEFAULT_CPU_SECONDS)
        );
        assert!(matches!(
            get(None, p(), Some("limit")),
            Err(EditError::UnknownKey { .. })
        ));
    }

    #[test]
    fn a_damaged_file_is_refused_as_calls_refuse_it() {
        assert!(matches!(
            set(Some("{\"limits\": "), p(), "policy_mode", json!("observe")),
            Err(EditError::Damaged(ConfigError::Invalid { .. }))
        ));
    }
}
