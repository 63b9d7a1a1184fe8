//! The client: configuration, and the one retry loop every API call goes
//! through. Transport errors, 429, 502, 503 and 504 are retried — the very
//! same request, so the same key, never a new one — after `Retry-After`
//! (or a jittered exponential backoff) until the call's retry budget ends;
//! any other problem answer becomes its typed [`Error`].

use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::Method;
use serde_json::Value;
use tokio::time::Instant;

use crate::error::{BoxError, Error, Problem};
use crate::transport::{backoff, jitter, retry_after, HttpRequest, ReqwestTransport, Transport};

/// How a [`Client`] behaves. `ClientOptions::default()` gives the values
/// documented on each field.
#[derive(Clone)]
pub struct ClientOptions {
    /// How long one call keeps retrying transport errors, 503 and 429
    /// (default 30 s; a complete after an effect retries at least 60 s).
    pub retry_for: Duration,
    /// Timeout of one HTTP request, on top of any `wait_ms` (default 15 s).
    pub request_timeout: Duration,
    /// The longest `wait_ms` a claim in `once` asks for (default 5 s; the
    /// server caps it at the class's `max_wait`).
    pub max_wait: Duration,
    /// The first retry delay when the server gave no `Retry-After`
    /// (default 100 ms; doubled each time).
    pub backoff_base: Duration,
    /// The longest retry delay without `Retry-After` (default 2 s).
    pub backoff_cap: Duration,
    /// Heartbeat every lease × this (default 1/3).
    pub heartbeat_fraction: f64,
    /// How requests are sent (default: reqwest).
    pub transport: Option<Arc<dyn Transport>>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            retry_for: Duration::from_secs(30),
            request_timeout: Duration::from_secs(15),
            max_wait: Duration::from_secs(5),
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_secs(2),
            heartbeat_fraction: 1.0 / 3.0,
            transport: None,
        }
    }
}

/// A client of one idemkey server (or load balancer). Cheap to clone: clones
/// share the connection pool.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) base_url: String,
    authorization: RwLock<String>,
    pub(crate) options: ClientOptions,
    transport: Arc<dyn Transport>,
}

/// A success answer.
pub(crate) struct Answer {
    pub(crate) body: Value,
    pub(crate) headers: HeaderMap,
}

/// Per-call limits.
#[derive(Clone, Copy, Default)]
pub(crate) struct CallLimits {
    /// The request timeout (default: the client's).
    pub(crate) timeout: Option<Duration>,
    /// When to stop retrying (default: now + the client's `retry_for`).
    pub(crate) retry_until: Option<Instant>,
}

impl Client {
    /// A client of the server at `base_url` (such as
    /// `https://idemkey.internal`, without `/v1`) with a bearer token and
    /// the default options.
    pub fn new(base_url: impl Into<String>, token: impl Into<String>) -> Result<Self, Error> {
        Self::with_options(base_url, token, ClientOptions::default())
    }

    /// A client with these options.
    pub fn with_options(
        base_url: impl Into<String>,
        token: impl Into<String>,
        options: ClientOptions,
    ) -> Result<Self, Error> {
        let base_url = base_url.into().trim_end_matches('/').to_owned();
        reqwest::Url::parse(&base_url)
            .map_err(|e| Error::Config(format!("base URL {base_url:?}: {e}")))?;
        if !(options.heartbeat_fraction > 0.0 && options.heartbeat_fraction < 1.0) {
            return Err(Error::Config(
                "heartbeat_fraction must be between 0 and 1".into(),
            ));
        }
        let transport = match &options.transport {
            Some(t) => t.clone(),
            None => Arc::new(
                ReqwestTransport::new().map_err(|e| Error::Config(format!("HTTP client: {e}")))?,
            ),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                base_url,
                authorization: RwLock::new(format!("Bearer {}", token.into())),
                options,
                transport,
            }),
        })
    }

    /// The options in force.
    pub fn options(&self) -> &ClientOptions {
        &self.inner.options
    }

    /// Replaces the bearer token (tokens expire): every later request,
    /// retries of calls under way included, and every clone of this client
    /// use the new one.
    pub fn set_token(&self, token: impl Into<String>) {
        let mut auth = self
            .inner
            .authorization
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *auth = format!("Bearer {}", token.into());
    }

    fn authorization(&self) -> String {
        self.inner
            .authorization
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One API call through the retry loop.
    pub(crate) async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        limits: CallLimits,
    ) -> Result<Answer, Error> {
        let opts = &self.inner.options;
        let until = limits
            .retry_until
            .unwrap_or_else(|| Instant::now() + opts.retry_for);
        let payload = match body {
            Some(v) => Some(
                serde_json::to_vec(v).map_err(|e| Error::Config(format!("request body: {e}")))?,
            ),
            None => None,
        };
        let url = format!("{}{}", self.inner.base_url, path);
        let mut n: u32 = 0;
        loop {
            let request = HttpRequest {
                method: method.clone(),
                url: url.clone(),
                authorization: self.authorization(),
                body: payload.clone(),
                timeout: limits.timeout.unwrap_or(opts.request_timeout),
            };
            let response = match self.inner.transport.send(request).await {
                Ok(r) => r,
                Err(source) => {
                    let delay = jitter(backoff(Duration::from_millis(50), n, opts.backoff_cap));
                    if Instant::now() + delay > until {
                        return Err(no_answer(&method, &url, source));
                    }
                    tokio::time::sleep(delay).await;
                    n += 1;
                    continue;
                }
            };
            let parsed: Option<Value> = serde_json::from_slice(&response.body).ok();
            if (200..300).contains(&response.status) {
                return match parsed {
                    Some(body) => Ok(Answer {
                        body,
                        headers: response.headers,
                    }),
                    None => Err(Error::UnexpectedResponse {
                        status: response.status,
                        problem: None,
                        message: format!("{method} {url}: the answer is not JSON"),
                    }),
                };
            }
            let wait = retry_after(&response.headers);
            if matches!(response.status, 429 | 502 | 503 | 504) {
                let delay =
                    jitter(wait.unwrap_or_else(|| backoff(opts.backoff_base, n, opts.backoff_cap)));
                if Instant::now() + delay <= until {
                    tokio::time::sleep(delay).await;
                    n += 1;
                    continue;
                }
            }
            let problem = Problem::from_body(response.status, &parsed.unwrap_or(Value::Null));
            return Err(Error::from_problem(problem, wait));
        }
    }
}

impl fmt::Debug for Client {
    // Never the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.base_url)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("retry_for", &self.retry_for)
            .field("request_timeout", &self.request_timeout)
            .field("max_wait", &self.max_wait)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_cap", &self.backoff_cap)
            .field("heartbeat_fraction", &self.heartbeat_fraction)
            .field("transport", &self.transport.as_ref().map(|_| "custom"))
            .finish()
    }
}

fn no_answer(method: &Method, url: &str, source: BoxError) -> Error {
    Error::Transport {
        message: format!("{method} {url}: {source}"),
        source,
    }
}
