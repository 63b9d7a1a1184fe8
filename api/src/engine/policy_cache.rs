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
//! At most [`CAPACITY`] classes are kept, in a bounded quick_cache
//! (`cache::bounded`); each entry's read time is checked on every read, so
//! an entry past [`POLICY_TTL`] is a miss even before it is evicted.
//! Inserting and evicting take one lock (the generation's), so a read that
//! started before an eviction can never slip its answer in after it;
//! lookups take none.
//!
//! Caching a policy cannot break an invariant: a record's window and tiering
//! time are fixed when the record is written, and ownership is decided by the
//! database whatever policy a claim read.

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use quick_cache::Equivalent;

use crate::cache::bounded;
use crate::domain::{OperationName, Policy, TenantId};

/// How long a policy read is reused on one node.
pub const POLICY_TTL: Duration = Duration::from_secs(2);
/// At most this many classes are cached; past it, the least likely to be
/// read again are evicted.
const CAPACITY: usize = 10_000;

#[derive(Clone)]
pub struct PolicyCache {
    ttl: Duration,
    entries: Arc<Cache<(TenantId, OperationName), Entry>>,
    /// Bumped by every eviction; a read that started before it is not
    /// cached. Held while inserting or evicting.
    generation: Arc<Mutex<u64>>,
}

#[derive(Clone)]
struct Entry {
    read_at: Instant,
    policy: Arc<Policy>,
}

/// A cached class's key, borrowed: hashed and compared as the owned
/// `(TenantId, OperationName)` is, so a lookup copies nothing.
struct Class<'a>(&'a TenantId, &'a OperationName);

impl Hash for Class<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As a tuple hashes: each member in turn.
        self.0.hash(state);
        self.1.hash(state);
    }
}

impl Equivalent<(TenantId, OperationName)> for Class<'_> {
    fn equivalent(&self, key: &(TenantId, OperationName)) -> bool {
        *self.0 == key.0 && *self.1 == key.1
    }
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
            entries: Arc::new(bounded(CAPACITY)),
            generation: Arc::default(),
        }
    }

    pub fn get(&self, t: &TenantId, op: &OperationName) -> Option<Arc<Policy>> {
        let entry = self.entries.get(&Class(t, op))?;
        (entry.read_at.elapsed() < self.ttl).then_some(entry.policy)
    }

    pub fn ticket(&self) -> Ticket {
        Ticket {
            generation: *self.lock(),
            started: Instant::now(),
        }
    }

    /// Remembers what a read that began at `ticket` found, unless the class
    /// was changed on this node since.
    pub fn insert(&self, ticket: Ticket, t: &TenantId, op: &OperationName, policy: Arc<Policy>) {
        let generation = self.lock();
        if *generation != ticket.generation {
            return;
        }
        let entry = Entry {
            read_at: ticket.started,
            policy,
        };
        self.entries.insert((t.clone(), op.clone()), entry);
    }

    /// Forgets a class (its policy was just changed on this node).
    pub fn evict(&self, t: &TenantId, op: &OperationName) {
        let mut generation = self.lock();
        *generation += 1;
        self.entries.remove(&Class(t, op));
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        // The counter is only a cache's: after a panic elsewhere it is still
        // usable.
        self.generation
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
        assert!(cache.entries.len() <= CAPACITY);
    }
}
