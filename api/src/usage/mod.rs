//! Usage roll-up: every node counts what its claim and release calls came to,
//! per tenant, operation class and minute, and adds those counts to the
//! `usage_minute` table in small batches.
//!
//! - **Cheap on the hot path.** Recording is one short-held lock around a
//!   hash-map update; no I/O happens while a request is answered.
//! - **Survives restarts, agrees across nodes.** A flush adds this node's
//!   counts to the stored rows (`on conflict ... do update set n = n +
//!   excluded.n`), so a row is the sum of every node's minute. A flush that
//!   fails puts its counts back to be added by the next one; a graceful
//!   shutdown flushes once more. Only a crash loses the last few seconds.
//! - **Always on, on every node**, whatever `IDEMKEY_WORKERS` says: the
//!   counts are this node's own and no other node can write them.
//! - **Recent refusals too.** A claim refused as `key_reused` is also kept
//!   (key, time, the fields that differ) and added to `key_rejections` by
//!   the same flush, at most [`REJECTIONS_PER_FLUSH`] per class per flush,
//!   so a storm of bad retries costs a bounded number of rows.
//! - Flushes never overlap on one node (a flush waits for the one under way),
//!   so "flush, then read" sees every call answered before the flush began.

mod flusher;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use crate::domain::fingerprint::fields::Mismatch;
use crate::domain::usage::{UsageCounts, UsageEvent};
use crate::domain::{OperationName, ScopedKey, TenantId};
use crate::engine::{ClaimAnswer, Refusal};
use crate::store::{Rejection, Store, StoreResult, UsageMinute};

pub use flusher::{FLUSH_EVERY, PRUNE_EVERY};

/// Minutes kept in memory while the database cannot take them; past this the
/// oldest are dropped (and logged) rather than growing without bound.
const MAX_PENDING: usize = 100_000;

/// Refusals kept per tenant and class between two flushes (the newest).
pub const REJECTIONS_PER_FLUSH: usize = 20;

type Minute = (TenantId, OperationName, DateTime<Utc>);
type Class = (TenantId, OperationName);

/// This node's usage counts not yet flushed. Cheap to clone (shared).
#[derive(Clone)]
pub struct Usage {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    pending: Mutex<HashMap<Minute, UsageCounts>>,
    /// `key_reused` refusals not yet flushed, newest last, per class.
    rejections: Mutex<HashMap<Class, VecDeque<Rejection>>>,
    /// Held for a whole flush, so flushes never overlap.
    flushing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Usage").finish_non_exhaustive()
    }
}

impl Usage {
    pub fn new(store: Store) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                pending: Mutex::new(HashMap::new()),
                rejections: Mutex::new(HashMap::new()),
                flushing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Counts what one claim call came to, and how long the engine took to
    /// answer it (including any bounded wait the caller asked for). Answers
    /// that are not usage (bad input, store errors) are not counted.
    pub fn claim(&self, k: &ScopedKey, answer: &Result<ClaimAnswer, Refusal>, latency: Duration) {
        let event = match answer {
            Ok(ClaimAnswer::Claimed { .. }) => UsageEvent::Claimed,
            Ok(ClaimAnswer::Completed { .. }) => UsageEvent::Replayed,
            Ok(ClaimAnswer::Recovering { .. }) => UsageEvent::TakenOver,
            Err(Refusal::KeyReused(mismatch)) => {
                self.rejected(k, mismatch.clone());
                UsageEvent::KeyReused
            }
            Err(Refusal::InProgress(_)) => UsageEvent::InProgress,
            // Answered by the engine, but not one of the counted kinds.
            Err(Refusal::Quarantined) => return self.update(k, |c| c.time(latency)),
            Err(_) => return,
        };
        self.update(k, |c| {
            c.count(event);
            c.time(latency);
        });
    }

    /// Keeps one `key_reused` refusal for the next flush.
    fn rejected(&self, k: &ScopedKey, mismatch: Option<Mismatch>) {
        let rejection = Rejection {
            tenant: k.tenant.clone(),
            operation: k.operation.clone(),
            key: k.key.as_str().to_owned(),
            at: Utc::now(),
            mismatch,
        };
        let mut kept = self.rejections();
        let class = kept
            .entry((k.tenant.clone(), k.operation.clone()))
            .or_default();
        if class.len() == REJECTIONS_PER_FLUSH {
            class.pop_front();
        }
        class.push_back(rejection);
    }

    /// Counts one event that has no latency of its own (a release).
    pub fn count(&self, k: &ScopedKey, event: UsageEvent) {
        self.update(k, |c| c.count(event));
    }

    fn update(&self, k: &ScopedKey, change: impl FnOnce(&mut UsageCounts)) {
        let minute = this_minute();
        let mut pending = self.inner.pending.lock().unwrap_or_else(|e| e.into_inner());
        let key = (k.tenant.clone(), k.operation.clone(), minute);
        change(pending.entry(key).or_default());
    }

    /// Adds every pending count, and the refusals kept, to the database. On
    /// failure the counts are kept for the next flush and the error is
    /// returned; refusals that could not be written are dropped (they are
    /// diagnostics, and the counts still say how many there were).
    pub async fn flush(&self) -> StoreResult<usize> {
        let _one_at_a_time = self.inner.flushing.lock().await;
        let rejections: Vec<Rejection> = std::mem::take(&mut *self.rejections())
            .into_values()
            .flatten()
            .collect();
        if !rejections.is_empty() {
            self.inner.store.add_rejections(&rejections).await?;
        }
        let taken = std::mem::take(&mut *self.lock());
        if taken.is_empty() {
            return Ok(0);
        }
        let rows: Vec<UsageMinute> = taken
            .iter()
            .map(|((tenant, operation, minute), counts)| UsageMinute {
                tenant: tenant.clone(),
                operation: operation.clone(),
                minute: *minute,
                counts: *counts,
            })
            .collect();
        match self.inner.store.add_usage(&rows).await {
            Ok(()) => Ok(rows.len()),
            Err(e) => {
                self.put_back(taken);
                Err(e)
            }
        }
    }

    fn put_back(&self, taken: HashMap<Minute, UsageCounts>) {
        let mut pending = self.lock();
        for (key, counts) in taken {
            pending.entry(key).or_default().add(&counts);
        }
        if pending.len() > MAX_PENDING {
            let mut minutes: Vec<DateTime<Utc>> = pending.keys().map(|k| k.2).collect();
            minutes.sort_unstable();
            let cutoff = minutes[pending.len() - MAX_PENDING];
            let before = pending.len();
            pending.retain(|k, _| k.2 >= cutoff);
            tracing::warn!(
                dropped = before - pending.len(),
                "usage counts could not be flushed for too long; dropping the oldest"
            );
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Minute, UsageCounts>> {
        // A panic while holding this lock cannot leave the map half-changed
        // in a way that matters for counts; keep going.
        self.inner.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn rejections(&self) -> std::sync::MutexGuard<'_, HashMap<Class, VecDeque<Rejection>>> {
        self.inner
            .rejections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn store(&self) -> &Store {
        &self.inner.store
    }
}

fn this_minute() -> DateTime<Utc> {
    let now = Utc::now();
    now.duration_trunc(TimeDelta::minutes(1)).unwrap_or(now)
}
