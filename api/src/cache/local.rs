//! The in-process layer: a bounded map from key digest to final outcome.
//!
//! Bounded by bytes (each entry weighs its outcome text), so memory stays
//! flat however many keys are replayed; moka evicts what is least likely to
//! be read again. Each entry carries its own time to live, never past its
//! record's expiry. Entries are keyed by [`KeyHash`] so that a notification
//! naming only a digest can evict them; each entry keeps its full scoped key
//! and a lookup checks it, so two keys sharing a digest can never answer for
//! each other.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::sync::Cache;
use moka::Expiry;

use super::FinalOutcome;
use crate::domain::{KeyHash, ScopedKey};
use crate::metrics::Metrics;

/// The in-process bound: 64 MiB of outcomes per node.
pub const DEFAULT_CAPACITY_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Clone)]
pub struct LocalCache {
    entries: Cache<KeyHash, Arc<Entry>>,
    metrics: Arc<Metrics>,
    /// False when the operator switched the cache off (`IDEMKEY_CACHE=off`):
    /// nothing is kept and every lookup is a miss.
    enabled: bool,
}

struct Entry {
    key: ScopedKey,
    outcome: Arc<FinalOutcome>,
    until: Instant,
}

struct UntilItsDeadline;

impl Expiry<KeyHash, Arc<Entry>> for UntilItsDeadline {
    fn expire_after_create(&self, _: &KeyHash, e: &Arc<Entry>, now: Instant) -> Option<Duration> {
        Some(e.until.saturating_duration_since(now))
    }

    fn expire_after_update(
        &self,
        _: &KeyHash,
        e: &Arc<Entry>,
        now: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(e.until.saturating_duration_since(now))
    }
}

impl LocalCache {
    pub fn new(capacity_bytes: u64, metrics: Arc<Metrics>) -> Self {
        let entries = Cache::builder()
            .max_capacity(capacity_bytes)
            .weigher(|_, e: &Arc<Entry>| {
                let bytes = e.outcome.weight() + e.key.path().len();
                u32::try_from(bytes).unwrap_or(u32::MAX)
            })
            .expire_after(UntilItsDeadline)
            .build();
        Self {
            entries,
            metrics,
            enabled: true,
        }
    }

    /// A layer that keeps nothing (`IDEMKEY_CACHE=off`, for measuring what
    /// the cache saves).
    pub fn disabled(metrics: Arc<Metrics>) -> Self {
        Self {
            enabled: false,
            ..Self::new(0, metrics)
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    pub fn get(&self, k: &ScopedKey) -> Option<Arc<FinalOutcome>> {
        if !self.enabled {
            return None;
        }
        let hit = self
            .entries
            .get(&k.hash())
            .filter(|e| e.key == *k && e.until > Instant::now() && e.outcome.still_live())
            .map(|e| e.outcome.clone());
        self.metrics.cache_lookup("local", hit.is_some());
        hit
    }

    pub fn put(&self, k: &ScopedKey, outcome: Arc<FinalOutcome>, ttl: Duration) {
        if ttl.is_zero() || !self.enabled {
            return;
        }
        let entry = Entry {
            key: k.clone(),
            outcome,
            until: Instant::now() + ttl,
        };
        self.entries.insert(k.hash(), Arc::new(entry));
    }

    pub fn evict(&self, k: &ScopedKey) {
        self.evict_hash(k.hash());
    }

    pub fn evict_hash(&self, h: KeyHash) {
        self.entries.invalidate(&h);
    }

    pub fn clear(&self) {
        self.entries.invalidate_all();
    }
}
