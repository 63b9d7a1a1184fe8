//! The Redis layer, shared by every node.
//!
//! **Keys** are `idemkey:{deployment}:outcome:{tenant}/{operation}/{key}`:
//! the deployment tag (derived from `IDEMKEY_SECRET`) keeps two deployments
//! sharing one Redis apart, and the scoped key is spelled out so an operator
//! can find an entry. **Values** are JSON holding the fingerprint, attempt,
//! timestamps (microseconds) and the exact outcome text; every entry is
//! written with `PX` set to its time to live, never past its record's expiry.
//!
//! **Failures never cost more than one short timeout, then nothing.** Every
//! command is bounded by [`COMMAND_TIMEOUT`]. A lost connection, or
//! [`TRIP_AFTER`] timeouts in a row, opens the circuit: the connection is
//! dropped, every call is skipped at once (counted as a fallback with reason
//! `open`), and one background task reconnects with backoff and a `PING`.
//! Only when that succeeds are requests sent to Redis again. Whatever
//! happens, the caller gets a miss or an error and goes to the database.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError};
use serde::{Deserialize, Serialize};

use super::{CacheUnavailable, FinalOutcome};
use crate::domain::{Fingerprint, ScopedKey};
use crate::metrics::Metrics;

/// The most a request waits for Redis.
pub const COMMAND_TIMEOUT: Duration = Duration::from_millis(100);
/// Timeouts in a row that open the circuit.
pub const TRIP_AFTER: u32 = 3;
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct RedisCache {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    prefix: String,
    link: Mutex<Link>,
    metrics: Arc<Metrics>,
}

/// The connection and the breaker around it. `conn` is `None` while the
/// circuit is open; `healing` says the reconnecting task is running.
#[derive(Default)]
struct Link {
    conn: Option<MultiplexedConnection>,
    timeouts: u32,
    healing: bool,
}

/// The stored form of a final outcome.
#[derive(Serialize, Deserialize)]
struct Stored<'a> {
    v: u8,
    fingerprint: String,
    attempt: i32,
    completed_at_us: i64,
    expires_at_us: i64,
    outcome: std::borrow::Cow<'a, str>,
    /// The record's fingerprint rules digest, hex (absent: the defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rules: Option<String>,
    /// The record's field digests (absent: none were kept; entries written
    /// before them decode the same way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fields: Option<std::borrow::Cow<'a, str>>,
}

enum Failure {
    Timeout,
    Redis(RedisError),
}

impl RedisCache {
    /// A client for `url`; nothing is contacted until [`Self::start`].
    pub fn new(url: &str, namespace: &str, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)
            .map_err(|e| anyhow::anyhow!("IDEMKEY_REDIS_URL is not a usable Redis URL: {e}"))?;
        metrics.redis_circuit_open.set(1);
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                prefix: format!("idemkey:{namespace}:outcome:"),
                link: Mutex::new(Link::default()),
                metrics,
            }),
        })
    }

    /// Connects once (bounded), then keeps reconnecting in the background if
    /// that failed. True when Redis answered.
    pub async fn start(&self) -> bool {
        match self.connect().await {
            Ok(conn) => {
                self.restore(conn);
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "Redis is not reachable; replays come from the database until it is");
                self.trip();
                false
            }
        }
    }

    /// The cached outcome of `k` and how much longer Redis keeps it.
    pub async fn get(
        &self,
        k: &ScopedKey,
    ) -> Result<Option<(FinalOutcome, Duration)>, CacheUnavailable> {
        let key = self.key(k);
        let mut pipe = redis::pipe();
        pipe.cmd("GET").arg(&key).cmd("PTTL").arg(&key);
        let (value, pttl): (Option<Vec<u8>>, i64) = self
            .run(|mut conn| async move { pipe.query_async(&mut conn).await })
            .await?;
        let found = match (value, u64::try_from(pttl)) {
            (Some(bytes), Ok(ms)) if ms > 0 => decode(&bytes)
                .filter(FinalOutcome::still_live)
                .map(|outcome| (outcome, Duration::from_millis(ms))),
            _ => None,
        };
        self.inner.metrics.cache_lookup("redis", found.is_some());
        Ok(found)
    }

    /// Best effort: an outcome Redis does not take is simply not cached.
    pub async fn put(&self, k: &ScopedKey, outcome: &FinalOutcome, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if ms == 0 {
            return;
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.key(k)).arg(encode(outcome)).arg("PX").arg(ms);
        let _ = self
            .run(|mut conn| async move { cmd.query_async::<()>(&mut conn).await })
            .await;
    }

    pub async fn evict(&self, k: &ScopedKey) -> Result<(), CacheUnavailable> {
        let mut cmd = redis::cmd("DEL");
        cmd.arg(self.key(k));
        self.run(|mut conn| async move { cmd.query_async::<()>(&mut conn).await })
            .await
    }
}

impl RedisCache {
    fn key(&self, k: &ScopedKey) -> String {
        format!("{}{}", self.inner.prefix, k.path())
    }

    /// Runs one command if the circuit is closed, bounded by the timeout.
    async fn run<T, F, Fut>(&self, command: F) -> Result<T, CacheUnavailable>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<T>>,
    {
        let Some(conn) = self.link().conn.clone() else {
            self.inner.metrics.redis_fallback("open");
            return Err(CacheUnavailable);
        };
        let failure = match tokio::time::timeout(COMMAND_TIMEOUT, command(conn)).await {
            Ok(Ok(value)) => {
                self.link().timeouts = 0;
                return Ok(value);
            }
            Ok(Err(e)) => Failure::Redis(e),
            Err(_) => Failure::Timeout,
        };
        self.failed(failure);
        Err(CacheUnavailable)
    }

    fn failed(&self, failure: Failure) {
        let trip = match &failure {
            Failure::Timeout => {
                self.inner.metrics.redis_fallback("timeout");
                let mut link = self.link();
                link.timeouts += 1;
                link.timeouts >= TRIP_AFTER
            }
            Failure::Redis(e) => {
                self.inner.metrics.redis_fallback("error");
                tracing::debug!(error = %e, "Redis command failed");
                e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error()
            }
        };
        if trip {
            self.trip();
        }
    }

    fn link(&self) -> std::sync::MutexGuard<'_, Link> {
        self.inner
            .link
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Opens the circuit: drop the connection and start reconnecting (once).
    fn trip(&self) {
        let mut link = self.link();
        if link.conn.take().is_some() {
            tracing::warn!("Redis failed; skipping it until it answers again");
        }
        self.inner.metrics.redis_circuit_open.set(1);
        if link.healing {
            return;
        }
        link.healing = true;
        drop(link);
        tokio::spawn(self.clone().heal());
    }

    /// Closes the circuit with a working connection.
    fn restore(&self, conn: MultiplexedConnection) {
        *self.link() = Link {
            conn: Some(conn),
            timeouts: 0,
            healing: false,
        };
        self.inner.metrics.redis_circuit_open.set(0);
    }

    /// The reconnecting task: backoff, connect, `PING`; done when it works.
    async fn heal(self) {
        let mut wait = FIRST_RETRY;
        loop {
            tokio::time::sleep(wait).await;
            match self.connect().await {
                Ok(conn) => {
                    tracing::info!("Redis answers again");
                    self.restore(conn);
                    return;
                }
                Err(e) => {
                    tracing::debug!(error = %e, "Redis still unreachable");
                    wait = (wait * 2).min(MAX_RETRY);
                }
            }
        }
    }

    async fn connect(&self) -> Result<MultiplexedConnection, RedisError> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT));
        let mut conn = self
            .inner
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        redis::cmd("PING").query_async::<()>(&mut conn).await?;
        Ok(conn)
    }
}

fn encode(o: &FinalOutcome) -> Vec<u8> {
    let stored = Stored {
        v: 2,
        fingerprint: o.fingerprint.to_hex(),
        attempt: o.attempt,
        completed_at_us: o.completed_at.timestamp_micros(),
        expires_at_us: o.expires_at.timestamp_micros(),
        outcome: std::borrow::Cow::Borrowed(&o.outcome),
        rules: o.rules_digest.map(hex::encode),
        fields: o.field_digests.as_deref().map(std::borrow::Cow::Borrowed),
    };
    serde_json::to_vec(&stored).expect("a final outcome serialises")
}

/// `None` for anything that is not an entry we wrote: it is then a miss.
fn decode(bytes: &[u8]) -> Option<FinalOutcome> {
    let s: Stored = serde_json::from_slice(bytes).ok()?;
    // Version 1 entries did not say which fingerprint rules applied: a miss.
    if s.v != 2 {
        return None;
    }
    let rules_digest = match &s.rules {
        None => None,
        Some(h) => Some(hex::decode(h).ok()?.try_into().ok()?),
    };
    Some(FinalOutcome {
        fingerprint: Fingerprint::parse_hex(&s.fingerprint).ok()?,
        attempt: s.attempt,
        completed_at: DateTime::<Utc>::from_timestamp_micros(s.completed_at_us)?,
        expires_at: DateTime::<Utc>::from_timestamp_micros(s.expires_at_us)?,
        outcome: Arc::from(s.outcome.as_ref()),
        rules_digest,
        field_digests: s.fields.as_deref().map(Arc::from),
        rendered: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_outcomes_round_trip_exactly() {
        let o = FinalOutcome {
            fingerprint: Fingerprint::from_bytes([7; 32]),
            attempt: 2,
            completed_at: DateTime::from_timestamp_micros(1_800_000_000_123_456).unwrap(),
            expires_at: DateTime::from_timestamp_micros(1_800_086_400_123_456).unwrap(),
            outcome: Arc::from(r#"{"status_code":201,"body":{"amount":1.50, "n":1e2}}"#),
            rules_digest: None,
            field_digests: None,
            rendered: Default::default(),
        };
        assert_eq!(decode(&encode(&o)), Some(o.clone()));
        let with_rules = FinalOutcome {
            rules_digest: Some([9; 32]),
            field_digests: Some(Arc::from(
                r#"{"f":{"/amount":"0011223344556677"},"t":false}"#,
            )),
            ..o
        };
        assert_eq!(decode(&encode(&with_rules)), Some(with_rules));
        assert_eq!(decode(b"not json"), None);
        assert_eq!(decode(br#"{"v":2}"#), None);
    }
}
