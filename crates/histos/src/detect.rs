//! Canary matching and secret detectors (HISTOS-ENGINE §7).

use std::sync::LazyLock;

use memchr::memmem;
use unicode_normalization::UnicodeNormalization;

/// Whether `c` is a Unicode format (Cf) character, from the reference's fixed
/// 170-codepoint table (HISTOS-ENGINE §7).
pub fn is_cf(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

fn is_sep(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '-' | '_' | '.' | '\u{b7}' | '\u{2022}' | '|' | ','
    )
}

/// Canary normalisation: NFKC → drop Cf → drop separators → casefold (HISTOS-ENGINE §7).
pub fn normalize(s: &str) -> String {
    let mut out = String::new();
    normalize_into(s, &mut out);
    out
}

/// [`normalize`] into a reused buffer (cleared first).
pub fn normalize_into(s: &str, out: &mut String) {
    out.clear();
    if s.is_ascii() {
        out.extend(
            s.bytes()
                .filter(|&b| !is_sep(b as char))
                .map(|b| b.to_ascii_lowercase() as char),
        );
        return;
    }
    let stripped: String = s.nfkc().filter(|&c| !is_cf(c) && !is_sep(c)).collect();
    out.push_str(&caseless::default_case_fold_str(&stripped));
}

thread_local! {
    static NORM: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Precompiled canary tokens: verbatim and normalised finders.
#[derive(Debug, Clone, Default)]
pub(crate) struct CanaryMatcher {
    tokens: Vec<(
        String,
        memmem::Finder<'static>,
        String,
        memmem::Finder<'static>,
    )>,
}

impl CanaryMatcher {
    pub(crate) fn new(canaries: &[String]) -> Self {
        let tokens = canaries
            .iter()
            .map(|c| {
                let n = normalize(c);
                let fv = memmem::Finder::new(c.as_bytes()).into_owned();
                let fn_ = memmem::Finder::new(n.as_bytes()).into_owned();
                (c.clone(), fv, n, fn_)
            })
            .collect();
        CanaryMatcher { tokens }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The first canary found in `text`, verbatim or after normalisation.
    pub(crate) fn find(&self, text: &str) -> Option<&str> {
        if self.tokens.is_empty() {
            return None;
        }
        for (tok, fv, _, _) in &self.tokens {
            if fv.find(text.as_bytes()).is_some() {
                return Some(tok);
            }
        }
        NORM.with(|cell| {
            let mut norm = cell.borrow_mut();
            normalize_into(text, &mut norm);
            self.tokens
                .iter()
                .find(|(_, _, _, fnorm)| fnorm.find(norm.as_bytes()).is_some())
                .map(|(t, ..)| t.as_str())
        })
    }

    /// Replaces verbatim then normalised hits (whole-string normalised hit replaces the
    /// whole string); returns the tokens found.
    pub(crate) fn redact(&self, text: &mut String, found: &mut Vec<String>) {
        for (tok, fv, _, _) in &self.tokens {
            if fv.find(text.as_bytes()).is_some() {
                *text = text.replace(tok.as_str(), CANARY_MARK);
                push_unique(found, format!("canary:{tok}"));
            }
        }
        let norm = normalize(text);
        for (tok, _, _, fnorm) in &self.tokens {
            if fnorm.find(norm.as_bytes()).is_some() {
                *text = CANARY_MARK.to_string();
                push_unique(found, format!("canary:{tok}"));
            }
        }
    }

    /// Whether a normalised token still appears in `text` (after per-leaf redaction).
    pub(crate) fn normalized_hit(&self, text: &str) -> bool {
        let norm = normalize(text);
        self.tokens
            .iter()
            .any(|(_, _, _, f)| f.find(norm.as_bytes()).is_some())
    }
}

pub(crate) fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// Replacement for a canary hit in output.
pub const CANARY_MARK: &str = "[REDACTED-CANARY]";
/// Replacement for a detected secret in output.
pub const SECRET_MARK: &str = "[REDACTED-SECRET]";

/// A checksum-confidence secret kind (the only kinds that deny pre-gate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretKind {
    /// Payment card number: issuer table + Luhn.
    Pan,
    /// ISO 13616 IBAN: mod-97.
    Iban,
    /// JWT whose header decodes to an object with `alg`.
    Jwt,
    /// AWS access key id (structural).
    AwsKey,
    /// GitHub token (structural).
    GithubToken,
    /// Slack token (structural).
    SlackToken,
    /// Stripe key (structural).
    StripeKey,
    /// Google API key (structural).
    GoogleApiKey,
    /// PEM private key block (structural).
    PemPrivateKey,
}

impl SecretKind {
    /// The reference's name for the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::Pan => "pan",
            SecretKind::Iban => "iban",
            SecretKind::Jwt => "jwt",
            SecretKind::AwsKey => "aws_key",
            SecretKind::GithubToken => "github_token",
            SecretKind::SlackToken => "slack_token",
            SecretKind::StripeKey => "stripe_key",
            SecretKind::GoogleApiKey => "google_api_key",
            SecretKind::PemPrivateKey => "pem_private_key",
        }
    }
}

#[allow(clippy::expect_used)]
fn re(p: &str) -> regex::Regex {
    regex::Regex::new(p).expect("detector pattern is valid")
}

static PAN_RE: LazyLock<regex::Regex> = LazyLock::new(|| re(r"\b[0-9][0-9 -]{10,21}[0-9]\b"));
static IBAN_RE: LazyLock<regex::Regex> = LazyLock::new(|| re(r"\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b"));
static JWT_RE: LazyLock<regex::Regex> =
    LazyLock::new(|| re(r"\beyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\b"));
/// One structural detector: its kind, the literals every match holds (a text without any
/// of them cannot match, so the pattern is not even compiled for it) and its pattern,
/// compiled on first use.
struct Structural {
    kind: SecretKind,
    literals: &'static [&'static str],
    re: LazyLock<regex::Regex>,
}

impl Structural {
    /// Whether `text` holds one of the literals every match of the pattern starts with (or,
    /// for GitHub's `gh?_`, holds at offsets 0, 1 and 3).
    fn may_match(&self, text: &[u8]) -> bool {
        if self.kind == SecretKind::GithubToken {
            return text
                .windows(4)
                .any(|w| w[0] == b'g' && w[1] == b'h' && b"opusr".contains(&w[2]) && w[3] == b'_');
        }
        self.literals
            .iter()
            .any(|l| memmem::find(text, l.as_bytes()).is_some())
    }
}

/// The structural detectors (HISTOS-ENGINE §7), in the order their spans are reported.
/// Compiling all six patterns costs more than a whole call of a trivial verb, so each is
/// compiled only for a text that holds its literal prefix.
static STRUCTURAL: [Structural; 6] = [
    Structural {
        kind: SecretKind::AwsKey,
        literals: &["AKIA", "ASIA", "AIDA", "AROA"],
        re: LazyLock::new(|| re(r"\b(?:AKIA|ASIA|AIDA|AROA)[A-Z0-9]{16}\b")),
    },
    Structural {
        kind: SecretKind::GithubToken,
        literals: &["gh"],
        re: LazyLock::new(|| re(r"\bgh[opusr]_[A-Za-z0-9]{36,}\b")),
    },
    Structural {
        kind: SecretKind::SlackToken,
        literals: &["xox"],
        re: LazyLock::new(|| re(r"\bxox[baprs]-[A-Za-z0-9-]{10,}\b")),
    },
    Structural {
        kind: SecretKind::StripeKey,
        literals: &["sk_live_", "sk_test_"],
        re: LazyLock::new(|| re(r"\bsk_(?:live|test)_[A-Za-z0-9]{16,}\b")),
    },
    Structural {
        kind: SecretKind::GoogleApiKey,
        literals: &["AIza"],
        re: LazyLock::new(|| re(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    },
    Structural {
        kind: SecretKind::PemPrivateKey,
        literals: &["-----BEGIN "],
        re: LazyLock::new(|| {
            re(
                r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\z)",
            )
        }),
    },
];

fn luhn(d: &[u8]) -> bool {
    let mut sum = 0u32;
    for (i, &c) in d.iter().rev().enumerate() {
        let mut v = u32::from(c - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

fn issuer_ok(d: &[u8]) -> bool {
    let n = d.len();
    let pre = |k: usize| -> u32 {
        d[..k.min(n)]
            .iter()
            .fold(0u32, |a, &c| a * 10 + u32::from(c - b'0'))
    };
    let (p1, p2, p3, p4) = (pre(1), pre(2), pre(3), pre(4));
    (p1 == 4 && matches!(n, 13 | 16 | 19))
        || ((51..=55).contains(&p2) && n == 16)
        || ((2221..=2720).contains(&p4) && n == 16)
        || (matches!(p2, 34 | 37) && n == 15)
        || ((p4 == 6011 || p2 == 65 || (644..=649).contains(&p3)) && matches!(n, 16 | 19))
        || ((p2 == 36 || (300..=305).contains(&p3) || p4 == 3095 || p2 == 38 || p2 == 39)
            && n == 14)
        || ((3528..=3589).contains(&p4) && matches!(n, 16 | 19))
        || (p2 == 62 && (16..=19).contains(&n))
        || ([5018, 5020, 5038, 5893, 6304, 6759, 6761, 6762, 6763].contains(&p4)
            && (12..=19).contains(&n))
}

/// Whether a PAN candidate is a card number (digits 12–19, issuer table, Luhn).
pub fn is_pan(candidate: &str) -> bool {
    let mut d = [0u8; 19];
    let mut n = 0;
    for b in candidate.bytes().filter(u8::is_ascii_digit) {
        if n == d.len() {
            return false;
        }
        d[n] = b;
        n += 1;
    }
    let d = &d[..n];
    (12..=19).contains(&n) && issuer_ok(d) && luhn(d)
}

/// ISO 13616 mod-97 check of a contiguous IBAN candidate.
pub fn is_iban(candidate: &str) -> bool {
    if candidate.len() < 5 || !candidate.is_ascii() {
        return false;
    }
    let (head, tail) = candidate.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'A'..='Z' => c as u32 - 'A' as u32 + 10,
            _ => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

fn b64url_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    if s.len() % 4 == 1 {
        return None;
    }
    for b in s.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'-' => 62,
            b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Whether a JWT candidate's header decodes to a JSON object containing `alg`.
pub fn is_jwt(candidate: &str) -> bool {
    let parts: Vec<&str> = candidate.split('.').collect();
    if parts.len() != 3 {
        return false;
    }
    let Some(bytes) = b64url_decode(parts[0]) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return false;
    };
    matches!(crate::json::parse(text), Ok(crate::value::Value::Map(m)) if m.contains_key("alg"))
}

/// A detected secret span (byte offsets into the scanned text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Kind.
    pub kind: SecretKind,
    /// Start byte.
    pub start: usize,
    /// End byte (exclusive).
    pub end: usize,
}

static JWT_PREFIX: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b"eyJ"));

/// Whether `text` has `[A-Z]{2}[0-9]{2}` somewhere: an IBAN candidate needs it, and a
/// candidate with a non-ASCII digit fails the checksum anyway.
fn iban_prefix(text: &[u8]) -> bool {
    text.windows(4).any(|w| {
        w[0].is_ascii_uppercase()
            && w[1].is_ascii_uppercase()
            && w[2].is_ascii_digit()
            && w[3].is_ascii_digit()
    })
}

fn checksum_spans(text: &str, out: &mut Vec<Span>, first_only: bool) {
    let digits = text.bytes().filter(u8::is_ascii_digit).count();
    if digits >= 12 {
        for m in PAN_RE.find_iter(text) {
            if is_pan(m.as_str()) {
                out.push(Span {
                    kind: SecretKind::Pan,
                    start: m.start(),
                    end: m.end(),
                });
                if first_only {
                    return;
                }
            }
        }
    }
    if digits >= 2 && text.len() >= 14 && iban_prefix(text.as_bytes()) {
        for m in IBAN_RE.find_iter(text) {
            if is_iban(m.as_str()) {
                out.push(Span {
                    kind: SecretKind::Iban,
                    start: m.start(),
                    end: m.end(),
                });
                if first_only {
                    return;
                }
            }
        }
    }
    if JWT_PREFIX.find(text.as_bytes()).is_some() {
        for m in JWT_RE.find_iter(text) {
            if is_jwt(m.as_str()) {
                out.push(Span {
                    kind: SecretKind::Jwt,
                    start: m.start(),
                    end: m.end(),
                });
                if first_only {
                    return;
                }
            }
        }
    }
}

/// The first checksum-confidence secret in `text`, scanned as written and again with
/// Cf characters removed (HISTOS-ENGINE §7). Only these deny pre-gate.
pub fn find_checksum_secret(text: &str) -> Option<SecretKind> {
    let mut v = Vec::with_capacity(0);
    checksum_spans(text, &mut v, true);
    if let Some(s) = v.first() {
        return Some(s.kind);
    }
    if !text.is_ascii() && text.chars().any(is_cf) {
        let stripped: String = text.chars().filter(|&c| !is_cf(c)).collect();
        checksum_spans(&stripped, &mut v, true);
        return v.first().map(|s| s.kind);
    }
    None
}

/// Every detector span (checksum and structural) in `text`.
pub fn all_spans(text: &str) -> Vec<Span> {
    let mut v = Vec::new();
    checksum_spans(text, &mut v, false);
    for d in &STRUCTURAL {
        if !d.may_match(text.as_bytes()) {
            continue;
        }
        for m in d.re.find_iter(text) {
            v.push(Span {
                kind: d.kind,
                start: m.start(),
                end: m.end(),
            });
        }
    }
    v
}

/// Replaces every detector span with [`SECRET_MARK`], recording `secret:<kind>`
/// (HISTOS-ENGINE §1e step 6). Text with Cf characters is scanned without them.
pub(crate) fn redact_secrets(text: &mut String, found: &mut Vec<String>) {
    let mut spans = all_spans(text);
    if spans.is_empty() && !text.is_ascii() && text.chars().any(is_cf) {
        let stripped: String = text.chars().filter(|&c| !is_cf(c)).collect();
        if !all_spans(&stripped).is_empty() {
            *text = stripped;
            spans = all_spans(text);
        }
    }
    if spans.is_empty() {
        return;
    }
    spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for s in spans {
        push_unique(found, format!("secret:{}", s.kind.as_str()));
        if s.start < pos {
            pos = pos.max(s.end);
            continue;
        }
        out.push_str(&text[pos..s.start]);
        out.push_str(SECRET_MARK);
        pos = s.end;
    }
    out.push_str(&text[pos..]);
    *text = out;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// The literal prefilter of each structural detector never hides a match: over
    /// samples of every kind, each embedded in other text and cut at every byte, a
    /// detector whose pattern matches always says it may match.
    #[test]
    fn structural_prefilter_never_hides_a_match() {
        let samples = [
            "AKIAABCDEFGHIJKLMNOP",
            "ASIAABCDEFGHIJKLMNOP",
            "AIDAABCDEFGHIJKLMNOP",
            "AROAABCDEFGHIJKLMNOP",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "gho_abcdefghijklmnopqrstuvwxyz0123456789AB",
            "ghs_abcdefghijklmnopqrstuvwxyz0123456789",
            "xoxb-1234567890-abcdef",
            "xoxp-abcdefghijkl",
            "sk_live_abcdefghijklmnop1234",
            "sk_test_abcdefghijklmnop1234",
            "AIzaSyA1234567890abcdefghijklmnopqrstuv",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----\nMIIE",
        ];
        for sample in samples {
            let found: Vec<SecretKind> = all_spans(sample).iter().map(|s| s.kind).collect();
            assert!(!found.is_empty(), "{sample:?} is found");
            for text in [
                sample.to_owned(),
                format!("{{\"token\": \"{sample}\"}}"),
                format!("before {sample} after"),
            ] {
                for cut in (0..=text.len()).filter(|&c| text.is_char_boundary(c)) {
                    let part = &text[..cut];
                    for d in &STRUCTURAL {
                        if d.re.is_match(part) {
                            assert!(d.may_match(part.as_bytes()), "{:?} in {part:?}", d.kind);
                        }
                    }
                }
            }
        }
        for text in ["{\"text\":\"hi\"}", "", "plain words, no secret"] {
            assert!(STRUCTURAL.iter().all(|d| !d.may_match(text.as_bytes())));
            assert!(all_spans(text).is_empty());
        }
    }

    #[test]
    fn canary_normalisation_catches_spacing_fullwidth_and_zero_width() {
        let m = CanaryMatcher::new(&["CANARY-7f3a-DO-NOT-LEAK".to_string()]);
        assert!(m.find("here: CANARY-7f3a-DO-NOT-LEAK").is_some());
        assert!(m.find("C A N A R Y-7f3a-DO-NOT-LEAK").is_some());
        assert!(m.find("ＣＡＮＡＲＹ7f3aDONOTLEAK").is_some());
        assert!(m.find("CAN\u{200b}ARY-7f3a-DO\u{00ad}-NOT-LEAK").is_some());
        assert!(m.find("Q0FOQVJZLTdmM2EtRE8tTk9ULUxFQUs=").is_none());
    }

    #[test]
    fn pan_needs_issuer_and_luhn() {
        assert!(is_pan("4111111111111111"));
        assert!(is_pan("4111 1111 1111 1111"));
        assert!(!is_pan("4111111111111112"));
        assert!(!is_pan("9111111111111111"));
        assert_eq!(
            find_checksum_secret("card 4111111111111111"),
            Some(SecretKind::Pan)
        );
        assert_eq!(
            find_checksum_secret("4111 1111 1111 1111"),
            Some(SecretKind::Pan)
        );
        assert_eq!(
            find_checksum_secret("4111111111\u{ad}111111"),
            Some(SecretKind::Pan)
        );
    }

    #[test]
    fn iban_mod97() {
        assert!(is_iban("GB82WEST12345698765432"));
        assert!(!is_iban("GB82WEST12345698765433"));
        assert_eq!(
            find_checksum_secret("pay GB82WEST12345698765432 now"),
            Some(SecretKind::Iban)
        );
        assert_eq!(find_checksum_secret("GB82 WEST 1234 5698 7654 32"), None);
    }

    #[test]
    fn jwt_needs_alg() {
        // {"alg":"HS256","typ":"JWT"}
        let t = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxIn0.c2ln";
        assert_eq!(find_checksum_secret(t), Some(SecretKind::Jwt));
        // {"typ":"JWT"}
        assert_eq!(
            find_checksum_secret("eyJ0eXAiOiJKV1QifQ.eyJzdWIiOiIxIn0.c2ln"),
            None
        );
    }

    #[test]
    fn redaction_replaces_spans() {
        let mut s = "key AKIAABCDEFGHIJKLMNOP and 4111111111111111".to_string();
        let mut f = Vec::new();
        redact_secrets(&mut s, &mut f);
        assert_eq!(s, "key [REDACTED-SECRET] and [REDACTED-SECRET]");
        assert_eq!(
            f,
            vec!["secret:aws_key".to_string(), "secret:pan".to_string()]
        );
    }
}
