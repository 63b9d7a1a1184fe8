//! A small per-node cache of operation-class policies, so that a claim does
//! not pay an extra query to learn its class's policy.
//!
//! Staleness is bounded: an entry is served for at most [`POLICY_TTL`] after
//! the read that filled it *started*, so a change committed on another node
//! is seen here at most that long after it was committed. A change made
//! through this node evicts the entry at once, and a read that was already
//! under way when the change was made does not put its older answer back (a
//! generation counter says so). Classes without a stored policy are cached
//! too (as the defaults): they are the common case.
//!
//! Caching a policy cannot break an invariant: a record's window and tiering
//! time are fixed when the record is written, and ownership is decided by the
//! database whatever policy a claim read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::domain::{OperationName, Policy, TenantId};

/// How long a policy read is reused on one node.
pub const POLICY_TTL: Duration = Duration::from_secs(2);
/// At most this many classes are cached; past it, the cache starts over.
const CAPACITY: usize = 10_000;

#[derive(Clone)]
pub struct PolicyCache {
    ttl: Duration,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Default)]
struct Inner {
    /// Bumped by every eviction; a read that started before it is not cached.
    generation: u64,
    len: usize,
    entries: HashMap<TenantId, HashMap<OperationName, Entry>>,
}

struct Entry {
    read_at: Instant,
    policy: Arc<Policy>,
}

/// Taken before reading the store; lets [`PolicyCache::insert`] tell whether
/// an eviction happened meanwhile.
pub struct Ticket {
    generation: u64,
    started: Instant,
}

impl std::fmt::Debug for PolicyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyCache")
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl PolicyCache {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            inner: Arc::default(),
        }
    }

    pub fn get(&self, t: &TenantId, op: &OperationName) -> Option<Arc<Policy>> {
        let inner = self.lock();
        let entry = inner.entries.get(t)?.get(op)?;
        (entry.read_at.elapsed() < self.ttl).then(|| entry.policy.clone())
    }

    pub fn ticket(&self) -> Ticket {
        Ticket {
            generation: self.lock().generation,
            started: Instant::now(),
        }
    }

    /// Remembers what a read that began at `ticket` found, unless the class
    /// was changed on this node since.
    pub fn insert(&self, ticket: Ticket, t: &TenantId, op: &OperationName, policy: Arc<Policy>) {
        let mut inner = self.lock();
        if inner.generation != ticket.generation {
            return;
        }
        if inner.len >= CAPACITY {
            let ttl = self.ttl;
            for classes in inner.entries.values_mut() {
                classes.retain(|_, e| e.read_at.elapsed() < ttl);
            }
            inner.entries.retain(|_, classes| !classes.is_empty());
            inner.len = inner.entries.values().map(HashMap::len).sum();
            if inner.len >= CAPACITY {
                inner.entries.clear();
                inner.len = 0;
            }
        }
        let entry = Entry {
            read_at: ticket.started,
            policy,
        };
        let classes = inner.entries.entry(t.clone()).or_default();
        if classes.insert(op.clone(), entry).is_none() {
            inner.len += 1;
        }
    }

    /// Forgets a class (its policy was just changed on this node).
    pub fn evict(&self, t: &TenantId, op: &OperationName) {
        let mut inner = self.lock();
        inner.generation += 1;
        let removed = inner
            .entries
            .get_mut(t)
            .and_then(|classes| classes.remove(op))
            .is_some();
        if removed {
            inner.len -= 1;
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The map is only a cache: after a panic elsewhere it is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &str, op: &str) -> (TenantId, OperationName) {
        (
            TenantId::parse(t).unwrap(),
            OperationName::parse(op).unwrap(),
        )
    }

    fn policy(window_s: u64) -> Arc<Policy> {
        Arc::new(Policy {
            replay_window: Duration::from_secs(window_s),
            ..Policy::default()
        })
    }

    #[test]
    fn a_read_is_reused_per_tenant_and_class() {
        let cache = PolicyCache::new(Duration::from_secs(60));
        let (a, op) = names("a", "charges.create");
        let (b, other) = names("b", "refunds.create");
        cache.insert(cache.ticket(), &a, &op, policy(5));

        assert_eq!(cache.get(&a, &op), Some(policy(5)));
        assert_eq!(cache.get(&b, &op), None);
        assert_eq!(cache.get(&a, &other), None);
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let cache = PolicyCache::new(Duration::ZERO);
        let (a, op) = names("a", "charges.create");
        cache.insert(cache.ticket(), &a, &op, policy(5));

        assert_eq!(cache.get(&a, &op), None);
    }

    #[test]
    fn a_read_that_started_before_an_eviction_is_not_cached() {
        let cache = PolicyCache::new(Duration::from_secs(60));
        let (a, op) = names("a", "charges.create");
        cache.insert(cache.ticket(), &a, &op, policy(5));
        let slow_read = cache.ticket();

        cache.evict(&a, &op);
        cache.insert(slow_read, &a, &op, policy(5));

        assert_eq!(cache.get(&a, &op), None);
        cache.insert(cache.ticket(), &a, &op, policy(7));
        assert_eq!(cache.get(&a, &op), Some(policy(7)));
    }

    #[test]
    fn the_cache_never_grows_past_its_capacity() {
        let cache = PolicyCache::new(Duration::from_secs(60));
        let (a, _) = names("a", "x");
        for i in 0..CAPACITY + 10 {
            let op = OperationName::parse(&format!("op{i}")).unwrap();
            cache.insert(cache.ticket(), &a, &op, policy(5));
        }
        assert!(cache.lock().len <= CAPACITY);
    }
}
