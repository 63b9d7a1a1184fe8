//! The in-process layer: a bounded map from key digest to final outcome.
//!
//! Bounded by bytes (each entry weighs its outcome text), so memory stays
//! flat however many keys are replayed; quick_cache (S3-FIFO) evicts what is
//! least likely to be read again. Each entry carries its own deadline, never
//! past its record's expiry, checked on every read: an entry past it is a
//! miss and stays only until it is evicted or replaced, so it costs memory
//! within the bound but is never served. (moka, which expires entries on
//! time, spent ~10 % of a cached replay's CPU on its bookkeeping; quick_cache
//! is a sharded hash table.) Entries are keyed by [`KeyHash`] so that a notification
//! naming only a digest can evict them; each entry keeps its full scoped key
//! and a lookup checks it, so two keys sharing a digest can never answer for
//! each other.

use std::sync::Arc;
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use quick_cache::Weighter;

use super::FinalOutcome;
use crate::domain::{KeyHash, ScopedKey};
use crate::metrics::Metrics;

/// The in-process bound: 64 MiB of outcomes per node.
pub const DEFAULT_CAPACITY_BYTES: u64 = 64 * 1024 * 1024;

#[derive(Clone)]
pub struct LocalCache {
    entries: Arc<Cache<KeyHash, Arc<Entry>, ByBytes>>,
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

/// An entry weighs its outcome and its key.
#[derive(Clone)]
struct ByBytes;

impl Weighter<KeyHash, Arc<Entry>> for ByBytes {
    fn weight(&self, _: &KeyHash, e: &Arc<Entry>) -> u64 {
        (e.outcome.weight() + e.key.path().len()) as u64
    }
}

/// The bound's items estimate: outcomes of about this size.
const TYPICAL_ENTRY_BYTES: u64 = 1024;

impl LocalCache {
    pub fn new(capacity_bytes: u64, metrics: Arc<Metrics>) -> Self {
        let items = usize::try_from(capacity_bytes / TYPICAL_ENTRY_BYTES).unwrap_or(usize::MAX);
        let entries = Cache::with_weighter(items.max(16), capacity_bytes, ByBytes);
        Self {
            entries: Arc::new(entries),
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
        self.entries.remove(&h);
    }

    pub fn clear(&self) {
        self.entries.clear();
    }
}
