//! The read cache of final outcomes (SPEC section 7).
//!
//! Only what a replay needs is cached: the outcome of a **completed** record
//! with its fingerprint, attempt, completion time and expiry. A completed
//! outcome never changes while its record lives, so a cached copy is either
//! the truth or absent. Nothing else is cached, and nothing here ever decides
//! ownership: a miss, an error or a skipped layer sends the claim to the
//! database, which answers as if there were no cache (invariants 5 and 6).
//!
//! Two implementations of one seam:
//! - [`OutcomeCache::InProcess`]: a bounded in-process cache (the default);
//! - [`OutcomeCache::Redis`]: the same in-process cache as a first layer, in
//!   front of Redis shared by every node.
//!
//! **Lifetimes.** An entry never outlives its record's replay window: its
//! time to live is the window's remainder measured on the database's clock
//! at the moment of the read, less the time since, less [`EXPIRY_MARGIN`].
//! A replay served from a cache therefore ends before the key may be used
//! anew, and the margin absorbs a late Redis write. Entries are also dropped
//! on every node when their record is deleted or rewritten (see
//! `Engine::evict`).

mod bounded;
mod local;
mod redis;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

pub use bounded::bounded;
pub use local::LocalCache;
pub use redis::RedisCache;

use crate::domain::{Fingerprint, KeyHash, RecordState, ScopedKey};
use crate::metrics::Metrics;
use crate::store::KeyRecord;

/// How long before a record's expiry its cached copies are gone.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(1);

/// A cache layer could not answer (Redis down, slow or skipped).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the cache could not answer")]
pub struct CacheUnavailable;

/// The final outcome of a completed record: what a replay answer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalOutcome {
    pub fingerprint: Fingerprint,
    pub attempt: i32,
    pub completed_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    /// The outcome's exact text, as the owner completed it.
    pub outcome: Arc<str>,
    /// The fingerprint rules the record was written under (`None`: the
    /// defaults).
    pub rules_digest: Option<[u8; 32]>,
    /// The record's field digests (stored form), so that a refusal answered
    /// from a cache can still name the fields that differ.
    pub field_digests: Option<Arc<str>>,
    /// The replay answer, rendered by the first replay of this copy.
    pub rendered: Rendered,
}

/// A replay answer's bytes, kept beside the outcome they were built from so
/// that a cached copy is serialised once, not on every replay. A copy
/// belongs to one scoped key (caches and looks are per key), and the answer
/// is a pure function of the copy and that key. Not part of the value: a
/// clone starts empty, and equality ignores it.
#[derive(Default)]
pub struct Rendered(std::sync::OnceLock<bytes::Bytes>);

impl Rendered {
    /// The answer, rendering it with `render` the first time.
    pub fn get_or_init(&self, render: impl FnOnce() -> bytes::Bytes) -> bytes::Bytes {
        self.0.get_or_init(render).clone()
    }
}

impl Clone for Rendered {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl PartialEq for Rendered {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Rendered {}

impl std::fmt::Debug for Rendered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Rendered(..)"
        } else {
            "Rendered(-)"
        })
    }
}

impl FinalOutcome {
    /// The final outcome of a completed record still inside its window.
    pub fn of(record: &KeyRecord) -> Option<Self> {
        if record.state != RecordState::Completed || record.is_expired() {
            return None;
        }
        Some(Self {
            fingerprint: record.fingerprint,
            attempt: record.attempt,
            completed_at: record.completed_at?,
            expires_at: record.expires_at,
            outcome: Arc::from(record.outcome.as_deref()?),
            rules_digest: record.rules_digest,
            field_digests: record.field_digests.as_deref().map(Arc::from),
            rendered: Rendered::default(),
        })
    }

    /// How long a copy of `record`, read at `read_at`, may be kept: the rest
    /// of its window on the database's clock, less the time since the read
    /// and the margin. `None`: too close to its expiry to cache at all.
    pub fn ttl(record: &KeyRecord, read_at: Instant) -> Option<Duration> {
        let left = (record.expires_at - record.observed_at).to_std().ok()?;
        left.checked_sub(read_at.elapsed())?
            .checked_sub(EXPIRY_MARGIN)
            .filter(|ttl| !ttl.is_zero())
    }

    /// A last check on a cached copy with this node's clock. The time to live
    /// already bounds it; this only ever turns a hit into a miss.
    fn still_live(&self) -> bool {
        self.expires_at - Utc::now()
            > chrono::TimeDelta::from_std(EXPIRY_MARGIN).unwrap_or_default()
    }

    /// Bytes this entry holds, for the in-process bound.
    fn weight(&self) -> usize {
        self.outcome.len() + 96
    }
}

/// The configured cache.
#[derive(Clone)]
pub enum OutcomeCache {
    /// No Redis configured: the in-process layer alone.
    InProcess(LocalCache),
    /// A bounded in-process first layer in front of Redis.
    Redis {
        local: LocalCache,
        shared: RedisCache,
    },
}

impl OutcomeCache {
    /// The in-process cache alone.
    pub fn in_process(metrics: Arc<Metrics>) -> Self {
        Self::InProcess(LocalCache::new(local::DEFAULT_CAPACITY_BYTES, metrics))
    }

    /// No cache at all (`IDEMKEY_CACHE=off`): every replay reads the
    /// database. For measuring what the cache saves; never needed for
    /// correctness either way.
    pub fn off(metrics: Arc<Metrics>) -> Self {
        Self::InProcess(LocalCache::disabled(metrics))
    }

    /// Redis at `url` behind an in-process layer. Redis is not contacted
    /// here: a Redis that is down at start-up only means misses until it is
    /// back.
    pub fn redis(url: &str, namespace: &str, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        Ok(Self::Redis {
            local: LocalCache::new(local::DEFAULT_CAPACITY_BYTES, metrics.clone()),
            shared: RedisCache::new(url, namespace, metrics)?,
        })
    }

    /// What the start-up log line says.
    pub fn describe(&self) -> &'static str {
        match self {
            Self::InProcess(local) if !local.is_enabled() => "off",
            Self::InProcess(_) => "in-process",
            Self::Redis { .. } => "in-process + redis",
        }
    }

    fn local_layer(&self) -> &LocalCache {
        match self {
            Self::InProcess(local) | Self::Redis { local, .. } => local,
        }
    }

    /// The in-process layer: no I/O at all.
    pub fn local(&self, k: &ScopedKey) -> Option<Arc<FinalOutcome>> {
        self.local_layer().get(k)
    }

    /// The shared layer (Redis), if there is one; a hit is copied into the
    /// in-process layer for no longer than Redis would keep it.
    /// `Ok(None)` is a miss; `Err` means Redis could not answer.
    pub async fn shared(
        &self,
        k: &ScopedKey,
    ) -> Result<Option<Arc<FinalOutcome>>, CacheUnavailable> {
        let Self::Redis { local, shared } = self else {
            return Ok(None);
        };
        let Some((outcome, ttl)) = shared.get(k).await? else {
            return Ok(None);
        };
        let outcome = Arc::new(outcome);
        local.put(k, outcome.clone(), ttl);
        Ok(Some(outcome))
    }

    /// Both layers in order, as a replay would consult them.
    pub async fn get(&self, k: &ScopedKey) -> Result<Option<Arc<FinalOutcome>>, CacheUnavailable> {
        match self.local(k) {
            Some(hit) => Ok(Some(hit)),
            None => self.shared(k).await,
        }
    }

    /// Stores a final outcome read from the database in every layer, for at
    /// most `ttl`. The Redis write happens in the background: a slow Redis
    /// must not hold up the answer.
    pub fn fill(&self, k: &ScopedKey, outcome: Arc<FinalOutcome>, ttl: Duration) {
        self.local_layer().put(k, outcome.clone(), ttl);
        if let Self::Redis { shared, .. } = self {
            let (shared, k) = (shared.clone(), k.clone());
            tokio::spawn(async move { shared.put(&k, &outcome, ttl).await });
        }
    }

    /// Stores a final outcome and waits for every layer to take it (tests
    /// and tools; the claim path uses [`Self::fill`]).
    pub async fn put(&self, k: &ScopedKey, outcome: Arc<FinalOutcome>, ttl: Duration) {
        self.local_layer().put(k, outcome.clone(), ttl);
        if let Self::Redis { shared, .. } = self {
            shared.put(k, &outcome, ttl).await;
        }
    }

    /// Drops `k` from this node's in-process layer and from Redis. `Err`
    /// when Redis could not confirm the delete (its copy then lives until
    /// its time to live ends, which is never past the record's expiry).
    pub async fn evict(&self, k: &ScopedKey) -> Result<(), CacheUnavailable> {
        self.local_layer().evict(k);
        match self {
            Self::InProcess(_) => Ok(()),
            Self::Redis { shared, .. } => shared.evict(k).await,
        }
    }

    /// Drops the key with this digest from the in-process layer (another
    /// node changed it).
    pub fn evict_local(&self, h: KeyHash) {
        self.local_layer().evict_hash(h);
    }

    /// Empties the in-process layer (invalidations may have been missed).
    pub fn clear_local(&self) {
        self.local_layer().clear();
    }
}
