//! How requests reach the server: the [`Transport`] seam (reqwest by
//! default; a wrapper can observe, delay or lose requests and answers, which
//! is how the SDK's own tests simulate lost answers and 503s) and the helpers
//! the retry loop shares (Retry-After, backoff with jitter, path segments).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rand::Rng;
use reqwest::header::HeaderMap;
use reqwest::Method;

use crate::error::BoxError;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// One HTTP request as the client sends it.
#[derive(Debug, Clone)]
pub struct HttpRequest {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: Method,
    /// The whole URL.
    pub url: String,
    /// The `Authorization` header's value (`Bearer …`).
    pub authorization: String,
    /// The JSON body, when there is one.
    pub body: Option<Vec<u8>>,
    /// How long to wait for the whole answer.
    pub timeout: Duration,
}

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The headers (`Retry-After`, `Date`, `X-Request-Id`).
    pub headers: HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

/// Sends requests. An `Err` means *no answer* (connection refused or reset,
/// timeout): the request may or may not have been applied, and the client
/// retries it unchanged.
pub trait Transport: Send + Sync + 'static {
    /// Sends one request and reads its whole answer.
    fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, BoxError>>;
}

/// The default transport: a shared reqwest client (connection pool).
#[derive(Debug, Clone)]
pub struct ReqwestTransport {
    http: reqwest::Client,
}

impl ReqwestTransport {
    /// A transport over a new reqwest client.
    pub fn new() -> Result<Self, reqwest::Error> {
        Ok(Self {
            http: reqwest::Client::builder().build()?,
        })
    }

    /// A transport over this reqwest client.
    pub fn with_client(http: reqwest::Client) -> Self {
        Self { http }
    }
}

impl Transport for ReqwestTransport {
    fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, BoxError>> {
        let http = self.http.clone();
        Box::pin(async move {
            let mut builder = http
                .request(request.method, &request.url)
                .timeout(request.timeout)
                .header(reqwest::header::AUTHORIZATION, request.authorization)
                .header(
                    reqwest::header::ACCEPT,
                    "application/json, application/problem+json",
                );
            if let Some(body) = request.body {
                builder = builder
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body);
            }
            let response = builder.send().await?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = response.bytes().await?.to_vec();
            Ok(HttpResponse {
                status,
                headers,
                body,
            })
        })
    }
}

/// Percent-encodes one path segment: only `A–Z a–z 0–9 - . _ ~` stay.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `Retry-After` (seconds, or an HTTP date) as a duration.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let ms = (at.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_milliseconds();
    Some(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

/// Never earlier than `d`; up to a quarter (at most 250 ms) later, so
/// retries of many callers spread out.
pub(crate) fn jitter(d: Duration) -> Duration {
    let ms = d.as_secs_f64() * 1000.0;
    let extra = rand::rng().random::<f64>() * (ms * 0.25 + 50.0).min(250.0);
    Duration::from_secs_f64((ms + extra) / 1000.0)
}

/// `base × 2^n`, at most `cap`.
pub(crate) fn backoff(base: Duration, n: u32, cap: Duration) -> Duration {
    base.saturating_mul(1u32 << n.min(16)).min(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_keeps_only_unreserved_characters() {
        assert_eq!(
            encode_segment("order/42?x=1#%+ ~a-Z.9_"),
            "order%2F42%3Fx%3D1%23%25%2B%20~a-Z.9_"
        );
    }

    #[test]
    fn retry_after_reads_seconds_and_http_dates() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "2".parse().expect("value"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        let later = chrono::Utc::now() + chrono::Duration::seconds(30);
        h.insert("retry-after", later.to_rfc2822().parse().expect("value"));
        let d = retry_after(&h).expect("a date");
        assert!(
            d > Duration::from_secs(28) && d <= Duration::from_secs(30),
            "{d:?}"
        );
        h.insert("retry-after", "soon".parse().expect("value"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn jitter_never_shortens_and_backoff_is_capped() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(1));
            assert!(d >= Duration::from_secs(1) && d <= Duration::from_millis(1_250));
        }
        let cap = Duration::from_secs(2);
        assert_eq!(
            backoff(Duration::from_millis(100), 0, cap),
            Duration::from_millis(100)
        );
        assert_eq!(
            backoff(Duration::from_millis(100), 3, cap),
            Duration::from_millis(800)
        );
        assert_eq!(backoff(Duration::from_millis(100), 40, cap), cap);
    }
}
