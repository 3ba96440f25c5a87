//! Sending one OTLP/HTTP request (protobuf) to a collector and classifying its answer
//! (the OTLP specification's "OTLP/HTTP Response"): a 2xx acknowledges the batch (a
//! partial success names the spans the collector dropped); 429, 502, 503, 504, other
//! 5xx, a time-out and a connection that fails are retried with backoff (the collector's
//! `Retry-After` when it gives one); any other status is fatal.

use std::io::Read;
use std::time::Duration;

/// The `User-Agent` of every request.
const USER_AGENT: &str = concat!("hcp/", env!("CARGO_PKG_VERSION"));

/// The most of a collector's answer that is read, in bytes.
const ANSWER_CAP: u64 = 64 * 1024;

/// An OTLP/HTTP traces endpoint.
#[derive(Debug)]
pub struct Collector {
    url: String,
    agent: ureq::Agent,
}

/// What the collector made of a batch it acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Accepted {
    /// Spans the collector said it dropped (an OTLP partial success), 0 for all kept.
    pub rejected: i64,
    /// Its message about them, if any.
    pub message: String,
}

/// Why a batch was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Try again later (after the delay the collector asked for, when it did).
    Retry {
        /// What happened, lowercase.
        reason: String,
        /// The collector's `Retry-After`.
        after: Option<Duration>,
    },
    /// Trying again will not help (a 4xx other than 429, a URL that is not HTTP).
    Fatal {
        /// What happened, lowercase.
        reason: String,
    },
}

impl Collector {
    /// The endpoint `url` (`http://…` or `https://…`, the full path: a collector's
    /// `…/v1/traces`); each request gives up after `timeout`.
    ///
    /// # Errors
    /// [`SendError::Fatal`] for a URL that is not `http` or `https`.
    pub fn new(url: &str, timeout: Duration) -> Result<Self, SendError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(SendError::Fatal {
                reason: format!("`{url}` is not an http:// or https:// URL"),
            });
        }
        let config = ureq::Agent::config_builder()
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .user_agent(USER_AGENT)
            .build();
        Ok(Self {
            url: url.to_owned(),
            agent: ureq::Agent::new_with_config(config),
        })
    }

    /// The endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Posts `body` (an encoded `ExportTraceServiceRequest`).
    ///
    /// # Errors
    /// [`SendError`].
    pub fn send(&self, body: &[u8]) -> Result<Accepted, SendError> {
        let sent = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/x-protobuf")
            .send(body);
        let mut response = match sent {
            Ok(r) => r,
            Err(e) => {
                return Err(SendError::Retry {
                    reason: describe(&e),
                    after: None,
                });
            }
        };
        let status = response.status().as_u16();
        let after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let mut answer = Vec::new();
        let read = response
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .reader()
            .take(ANSWER_CAP)
            .read_to_end(&mut answer);
        match status {
            200..=299 => {
                if let Err(e) = read {
                    return Err(SendError::Retry {
                        reason: format!("the collector's answer broke off: {e}"),
                        after: None,
                    });
                }
                Ok(accepted(&answer))
            }
            429 | 502 | 503 | 504 | 500..=599 => Err(SendError::Retry {
                reason: format!("the collector answered {status}"),
                after,
            }),
            _ => Err(SendError::Fatal {
                reason: format!(
                    "the collector answered {status}{}",
                    status_text(&answer)
                        .map(|t| format!(": {t}"))
                        .unwrap_or_default()
                ),
            }),
        }
    }
}

fn accepted(answer: &[u8]) -> Accepted {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
    use prost::Message;
    match ExportTraceServiceResponse::decode(answer) {
        Ok(r) => r
            .partial_success
            .map(|p| Accepted {
                rejected: p.rejected_spans,
                message: p.error_message,
            })
            .unwrap_or_default(),
        Err(_) => Accepted::default(),
    }
}

/// The message of a `google.rpc.Status` answer, or the answer as text.
fn status_text(answer: &[u8]) -> Option<String> {
    let t = String::from_utf8_lossy(answer);
    let t = t.trim();
    (!t.is_empty()).then(|| t.chars().take(200).collect())
}

fn describe(e: &ureq::Error) -> String {
    match e {
        ureq::Error::Timeout(_) => "the collector did not answer in time".into(),
        ureq::Error::ConnectionFailed => "cannot connect to the collector".into(),
        ureq::Error::HostNotFound => "the collector's host name does not resolve".into(),
        ureq::Error::Io(io) => format!("the connection failed: {io}").to_lowercase(),
        other => format!("the request failed: {other}").to_lowercase(),
    }
}

/// The wait before retry number `attempt` (from 1): 0.5 s doubling up to `max`, or the
/// collector's `Retry-After` when it asked for one (at most `max`).
pub fn backoff(attempt: u32, asked: Option<Duration>, max: Duration) -> Duration {
    if let Some(a) = asked {
        return a.min(max);
    }
    let ms = 500u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(16));
    Duration::from_millis(ms).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_bound_and_follows_retry_after() {
        let max = Duration::from_secs(30);
        assert_eq!(backoff(1, None, max), Duration::from_millis(500));
        assert_eq!(backoff(3, None, max), Duration::from_secs(2));
        assert_eq!(backoff(40, None, max), max);
        assert_eq!(
            backoff(1, Some(Duration::from_secs(7)), max),
            Duration::from_secs(7)
        );
        assert_eq!(backoff(1, Some(Duration::from_secs(700)), max), max);
    }

    #[test]
    fn a_url_that_is_not_http_is_fatal() {
        assert!(matches!(
            Collector::new("ftp://x/v1/traces", Duration::from_secs(1)),
            Err(SendError::Fatal { .. })
        ));
    }
}
