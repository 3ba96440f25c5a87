//! The request head a child sends the proxy: read bounded and timed, parsed strictly with
//! `httparse`, into a `CONNECT` or a plain HTTP request to forward (rewritten to origin
//! form, hop-by-hop headers dropped).

use super::Limits;
use crate::destination::{DestinationError, Target};
use tokio::io::{AsyncRead, AsyncReadExt};

/// What a child asked for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// `CONNECT host:port`: a tunnel.
    Connect(Target),
    /// `METHOD http://host[:port]/path`: one request, its head rewritten for the origin.
    Forward {
        /// Where it goes.
        target: Target,
        /// The head to send the origin: origin-form request line, the child's end-to-end
        /// headers, `Host`, `Connection: close`.
        head: Vec<u8>,
    },
}

/// Why a head is refused; each is answered and logged.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// The connection closed before a whole head came (nothing is answered).
    Closed,
    /// More than [`Limits::head_bytes`] without the end of the head, or more than
    /// [`Limits::headers`] header fields (431).
    TooLarge,
    /// Not HTTP/1.x as RFC 9112 writes it (400).
    Malformed(String),
    /// Well-formed, but not a destination (400): the text of the target and why.
    BadTarget(DestinationError),
    /// HTTP, but not what the proxy does: a request to the proxy itself, `https://` in an
    /// absolute URI (400).
    Unsupported(String),
}

/// Reads until the end of the head (the empty line), at most `limits.head_bytes`.
/// Returns the bytes read and the length of the head within them; what follows is the
/// beginning of the body or of the tunnelled stream.
pub(crate) async fn read<R: AsyncRead + Unpin>(
    r: &mut R,
    limits: &Limits,
) -> Result<(Vec<u8>, usize), HeadError> {
    let mut buf = vec![0u8; limits.head_bytes];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            return Err(HeadError::TooLarge);
        }
        let n = r
            .read(&mut buf[filled..])
            .await
            .map_err(|_| HeadError::Closed)?;
        if n == 0 {
            return Err(HeadError::Closed);
        }
        let from = filled.saturating_sub(3);
        filled += n;
        // The end of the head is the first empty line (`\r\n\r\n`, or `\n\n` which RFC
        // 9112 §2.2 lets a recipient take); httparse then parses the whole head once.
        if let Some(end) = head_end(&buf[..filled], from) {
            buf.truncate(filled);
            return Ok((buf, end));
        }
    }
}

/// The length of the head in `b` (through its empty line), searching from `from`.
fn head_end(b: &[u8], from: usize) -> Option<usize> {
    (from..b.len()).find_map(|i| {
        if b[i..].starts_with(b"\r\n\r\n") {
            Some(i + 4)
        } else if b[i..].starts_with(b"\n\n") {
            Some(i + 2)
        } else if b[i..].starts_with(b"\n\r\n") {
            Some(i + 3)
        } else {
            None
        }
    })
}

/// Headers that concern one hop only (RFC 9110 §7.6.1) and are not sent on, beside those
/// the `Connection` header names. `Transfer-Encoding` stays: the body is relayed as the
/// child framed it.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
];

/// Parses a whole head (`head` ends with its empty line).
pub(crate) fn parse(head: &[u8], limits: &Limits) -> Result<Request, HeadError> {
    let mut headers = vec![httparse::EMPTY_HEADER; limits.headers];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        Ok(_) => {
            return Err(HeadError::Malformed(
                "the request head is incomplete".into(),
            ));
        }
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(e) => {
            return Err(HeadError::Malformed(format!(
                "the request head is not HTTP/1.1: {e}"
            )));
        }
    }
    let (Some(method), Some(path), Some(version)) = (req.method, req.path, req.version) else {
        return Err(HeadError::Malformed(
            "the request line is incomplete".into(),
        ));
    };
    if method == "CONNECT" {
        let target = Target::parse(path).map_err(HeadError::BadTarget)?;
        return Ok(Request::Connect(target));
    }
    let Some((scheme, rest)) = path.split_once("://") else {
        return Err(HeadError::Unsupported(format!(
            "`{method} {}` asks the proxy itself; a request through it names an absolute `http://` URI, or is a `CONNECT host:port`",
            cut(path)
        )));
    };
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(HeadError::Unsupported(format!(
            "`{}://` is not forwarded; a client reaches an `https://` URL with `CONNECT`",
            cut(scheme)
        )));
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, origin) = rest.split_at(end);
    if origin.contains('#') {
        return Err(HeadError::Malformed(
            "a request target has no fragment (`#…`)".into(),
        ));
    }
    let bad = |message: String| {
        HeadError::BadTarget(DestinationError {
            entry: authority.to_owned(),
            message,
        })
    };
    if authority.contains('@') {
        return Err(bad("a user name in the URI is not forwarded".into()));
    }
    let (host, port) = split_authority(authority).map_err(&bad)?;
    let target = Target {
        host: Target::parse_host(host).map_err(&bad)?,
        port: match port {
            None => 80,
            Some(p) => {
                Target::parse(&format!("a:{p}"))
                    .map_err(|e| bad(e.message))?
                    .port
            }
        },
    };
    let origin = if origin.is_empty() {
        "/".to_owned()
    } else if origin.starts_with('?') {
        format!("/{origin}")
    } else {
        origin.to_owned()
    };
    let named: Vec<String> = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("connection"))
        .flat_map(|h| {
            String::from_utf8_lossy(h.value)
                .split(',')
                .map(|t| t.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut out = Vec::with_capacity(head.len() + 64);
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(origin.as_bytes());
    out.extend_from_slice(if version == 0 {
        b" HTTP/1.0\r\n"
    } else {
        b" HTTP/1.1\r\n"
    });
    out.extend_from_slice(b"Host: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in req.headers.iter() {
        let lower = h.name.to_ascii_lowercase();
        if lower == "host" || HOP_BY_HOP.contains(&lower.as_str()) || named.contains(&lower) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request::Forward { target, head: out })
}

/// `HOST` and the optional `PORT` of a URI's authority (`[V6]` bracketed).
fn split_authority(a: &str) -> Result<(&str, Option<&str>), String> {
    if a.is_empty() {
        return Err("the URI names no host".into());
    }
    if a.starts_with('[') {
        let close = a
            .find(']')
            .ok_or("an IPv6 address opened with `[` is closed with `]`")?;
        let (host, after) = a.split_at(close + 1);
        return match after {
            "" => Ok((host, None)),
            p => p
                .strip_prefix(':')
                .map(|p| (host, Some(p)))
                .ok_or_else(|| "`]` is followed by `:PORT` or nothing".into()),
        };
    }
    Ok(match a.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (a, None),
    })
}

/// At most 100 characters of what a child sent, for a message.
fn cut(s: &str) -> String {
    s.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn limits() -> Limits {
        Limits::default()
    }

    fn forward(head: &str) -> (String, String) {
        match parse(head.as_bytes(), &limits()) {
            Ok(Request::Forward { target, head }) => {
                (target.to_string(), String::from_utf8(head).unwrap())
            }
            other => panic!("{head}: {other:?}"),
        }
    }

    #[test]
    fn connect() {
        let r = parse(
            b"CONNECT API.github.com:443 HTTP/1.1\r\nHost: x\r\n\r\n",
            &limits(),
        );
        assert_eq!(
            r,
            Ok(Request::Connect(
                Target::parse("api.github.com:443").unwrap()
            ))
        );
        let r = parse(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n", &limits());
        assert_eq!(r, Ok(Request::Connect(Target::parse("[::1]:443").unwrap())));
    }

    #[test]
    fn a_forwarded_request_is_rewritten_for_its_origin() {
        let (t, h) = forward(
            "GET http://Example.org:8080/a/b?c=d HTTP/1.1\r\nHost: evil.example\r\nProxy-Connection: keep-alive\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nProxy-Authorization: Basic e30=\r\nAccept: */*\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert_eq!(t, "example.org:8080");
        assert_eq!(
            h,
            "GET /a/b?c=d HTTP/1.1\r\nHost: Example.org:8080\r\nAccept: */*\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        let (t, h) = forward("POST http://example.org?x HTTP/1.0\n\n");
        assert_eq!(t, "example.org:80");
        assert_eq!(
            h,
            "POST /?x HTTP/1.0\r\nHost: example.org\r\nConnection: close\r\n\r\n"
        );
        let (t, _) = forward("GET http://[2001:db8::1]/ HTTP/1.1\r\n\r\n");
        assert_eq!(t, "[2001:db8::1]:80");
        let (t, _) = forward("GET HTTP://10.0.0.7:81 HTTP/1.1\r\n\r\n");
        assert_eq!(t, "10.0.0.7:81");
    }

    #[test]
    fn what_is_refused() {
        let e = |h: &str| parse(h.as_bytes(), &limits()).unwrap_err();
        assert!(matches!(
            e("GET / HTTP/1.1\r\n\r\n"),
            HeadError::Unsupported(_)
        ));
        assert!(matches!(
            e("GET https://example.org/ HTTP/1.1\r\n\r\n"),
            HeadError::Unsupported(_)
        ));
        assert!(matches!(
            e("GET http://u:p@example.org/ HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("GET http://example.org/#f HTTP/1.1\r\n\r\n"),
            HeadError::Malformed(_)
        ));
        assert!(matches!(
            e("GET http:///x HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("GET http://example.org:/x HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("GET http://example.org:0/x HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("GET http://127.1/x HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("GET http://ex ample.org/ HTTP/1.1\r\n\r\n"),
            HeadError::Malformed(_)
        ));
        assert!(matches!(
            e("CONNECT example.org HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("CONNECT *.example.org:443 HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("CONNECT example.org.:443 HTTP/1.1\r\n\r\n"),
            HeadError::BadTarget(_)
        ));
        assert!(matches!(
            e("CONNECT example.org:443 HTTP/2.0\r\n\r\n"),
            HeadError::Malformed(_)
        ));
        assert!(matches!(
            e("\x16\x03\x01\x02\x00\r\n\r\n"),
            HeadError::Malformed(_)
        ));
        assert!(matches!(
            e("CONNECT a:1 HTTP/1.1\r\nBad Header: x\r\n\r\n"),
            HeadError::Malformed(_)
        ));
        let many: String = (0..200).map(|i| format!("X-{i}: v\r\n")).collect();
        assert_eq!(
            e(&format!("CONNECT a.example:1 HTTP/1.1\r\n{many}\r\n")),
            HeadError::TooLarge
        );
    }

    #[tokio::test]
    async fn reading_is_bounded() {
        let l = limits();
        let mut big = b"CONNECT a.example:443 HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'x', 20_000));
        assert_eq!(
            read(&mut big.as_slice(), &l).await,
            Err(HeadError::TooLarge)
        );
        assert_eq!(
            read(&mut &b"CONNECT a.example:443 HTTP/1.1\r\n"[..], &l).await,
            Err(HeadError::Closed)
        );
        let with_tail = b"CONNECT a.example:443 HTTP/1.1\r\n\r\n\x16\x03\x01";
        let (buf, end) = read(&mut &with_tail[..], &l).await.unwrap();
        assert_eq!(&buf[end..], b"\x16\x03\x01");
    }
}
