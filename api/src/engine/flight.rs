//! Single flight: concurrent claims of one scoped key in one process share
//! one look at the key.
//!
//! The first claim to arrive starts the look (Redis, then the atomic insert,
//! then the read) as a task of its own; every claim of the same key that
//! arrives while it runs joins it and gets the same result. So a retry storm
//! on one key costs one round of statements per flight, not one per request.
//! The task removes its entry when it ends, so the next claim looks afresh:
//! nobody is answered from a look that ended before it arrived. A claim that
//! needs a look newer than some moment (a waiting claim, after a key event)
//! passes that moment and never joins a look started earlier.
//!
//! Sharing is sound because the look grants nothing by itself: if its insert
//! created the record, only the claim whose owner hash the row carries owns
//! it; the others see the row as what it is, an attempt in progress. Every
//! takeover and renewal is still each claim's own compare-and-swap.
//!
//! Why a map of our own rather than quick_cache's guards
//! (`get_value_or_guard_async`, which the other caches' crate offers for
//! this): a guard is a *cache fill* — the first caller computes the value in
//! its own task and the value then stays in the cache. A flight is not:
//! (1) the look runs as a task of its own, so a claim whose client goes away
//! (its future dropped) does not abort the look the others are waiting on,
//! where a dropped guard hands the work to the next waiter to start again;
//! (2) a claim that needs a look newer than some moment must not join one
//! that started earlier, and a guard's waiters can neither see when the
//! fill started nor decline to wait on it; (3) the entry goes the moment
//! the look ends, whereas a filled guard leaves its value for later callers
//! until removed, and removing it after the fact races with those callers —
//! the one answer this module must never give is a look that ended before
//! the claim arrived.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::{BoxFuture, FutureExt, Shared};
use tokio::time::Instant;

use crate::domain::ScopedKey;

type Flight<T> = Shared<BoxFuture<'static, Option<T>>>;

struct Running<T> {
    id: u64,
    started: Instant,
    flight: Flight<T>,
}

pub struct Flights<T> {
    running: Mutex<HashMap<ScopedKey, Running<T>>>,
    next_id: AtomicU64,
}

impl<T> Default for Flights<T> {
    fn default() -> Self {
        Self {
            running: Mutex::default(),
            next_id: AtomicU64::new(0),
        }
    }
}

impl<T: Clone + Send + Sync + 'static> Flights<T> {
    fn running(&self) -> MutexGuard<'_, HashMap<ScopedKey, Running<T>>> {
        self.running
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Joins the flight under way for `k` (if it started no earlier than
    /// `since`), or starts `look` as a new one. The flag is true when this
    /// call joined another's flight; the instant is when the flight started.
    /// `None` if the flight's task panicked.
    #[cfg(test)]
    pub async fn run<F>(
        self: &Arc<Self>,
        k: &ScopedKey,
        since: Option<Instant>,
        look: impl FnOnce() -> F,
    ) -> (Option<T>, bool)
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (seen, joined, _) = self.run_timed(k, since, look).await;
        (seen, joined)
    }

    /// [`Self::run`], also saying when the flight started.
    pub async fn run_timed<F>(
        self: &Arc<Self>,
        k: &ScopedKey,
        since: Option<Instant>,
        look: impl FnOnce() -> F,
    ) -> (Option<T>, bool, Instant)
    where
        F: Future<Output = T> + Send + 'static,
    {
        let (id, flight, joined, started) = {
            let mut running = self.running();
            let fresh = |r: &&Running<T>| since.is_none_or(|since| r.started >= since);
            match running.get(k).filter(fresh) {
                Some(r) => (r.id, r.flight.clone(), true, r.started),
                None => {
                    let started = Instant::now();
                    let id = self.next_id.fetch_add(1, Ordering::Relaxed);
                    let (flights, key, look) = (self.clone(), k.clone(), look());
                    // The task cannot remove its entry before it is inserted:
                    // it needs the lock we hold.
                    let task = tokio::spawn(async move {
                        let seen = look.await;
                        flights.finish(&key, id);
                        seen
                    });
                    let flight = async move { task.await.ok() }.boxed().shared();
                    // A stale flight left in the map keeps its callers; it
                    // just cannot remove our entry when it ends.
                    let entry = Running {
                        id,
                        started,
                        flight: flight.clone(),
                    };
                    running.insert(k.clone(), entry);
                    (id, flight, false, started)
                }
            }
        };
        let seen = flight.await;
        if seen.is_none() {
            // The task died (a panic, or its runtime stopped) before it could
            // remove its entry: do it, or every later claim would join a
            // dead flight.
            self.finish(k, id);
        }
        (seen, joined, started)
    }

    fn finish(&self, k: &ScopedKey, id: u64) {
        let mut running = self.running();
        if running.get(k).is_some_and(|r| r.id == id) {
            running.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{IdempotencyKey, OperationName, TenantId};
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    fn key() -> ScopedKey {
        ScopedKey {
            tenant: TenantId::parse("acme").unwrap(),
            operation: OperationName::parse("charges.create").unwrap(),
            key: IdempotencyKey::parse("k1").unwrap(),
        }
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_look_and_later_ones_look_again() {
        let flights = Arc::new(Flights::<usize>::default());
        let looks = Arc::new(AtomicUsize::new(0));
        let look = || {
            let looks = looks.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                looks.fetch_add(1, Ordering::SeqCst) + 1
            }
        };
        let k = key();
        let (a, b, c) = tokio::join!(
            flights.run(&k, None, look),
            flights.run(&k, None, look),
            flights.run(&k, None, look)
        );
        assert_eq!([a.0, b.0, c.0], [Some(1); 3]);
        assert_eq!([a.1, b.1, c.1].iter().filter(|j| **j).count(), 2);
        let (later, joined) = flights.run(&k, None, look).await;
        assert_eq!((later, joined), (Some(2), false));
    }

    #[tokio::test]
    async fn a_caller_that_needs_a_newer_look_does_not_join_an_older_one() {
        let flights = Arc::new(Flights::<usize>::default());
        let looks = Arc::new(AtomicUsize::new(0));
        let look = || {
            let looks = looks.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                looks.fetch_add(1, Ordering::SeqCst) + 1
            }
        };
        let k = key();
        let old = flights.run(&k, None, look);
        let newer = async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            let since = Instant::now();
            let joiner = flights.run(&k, Some(since), look);
            let late = async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                flights.run(&k, Some(since), look).await
            };
            tokio::join!(joiner, late)
        };
        let (old, (newer, late)) = tokio::join!(old, newer);
        assert_eq!(old, (Some(1), false));
        assert_eq!(newer, (Some(2), false));
        assert_eq!(late, (Some(2), true));
    }

    #[tokio::test]
    async fn a_look_that_panics_does_not_block_later_looks() {
        let flights = Arc::new(Flights::<usize>::default());
        let k = key();
        let fail = true;
        let failing = move || async move {
            if fail {
                panic!("the look failed");
            }
            0
        };
        let (first, _) = flights.run(&k, None, failing).await;
        let (second, joined) = flights.run(&k, None, || async { 7 }).await;
        assert_eq!(first, None);
        assert_eq!((second, joined), (Some(7), false));
    }
}
