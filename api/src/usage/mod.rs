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
//! - **Hot keys too.** Every claim answer also counts its key in a bounded
//!   summary per tenant, class and minute (`domain::top_keys`, at most
//!   32 keys each). Each flush writes the summary's top
//!   [`HOT_KEYS_PER_FLUSH`] keys claimed at least [`HOT_KEY_MIN_CLAIMS`]
//!   times so far to `hot_key_minute` under this node's name, replacing its
//!   earlier figures, so writing twice counts nothing twice; a summary is
//!   dropped once its minute has ended and been written.
//! - Flushes never overlap on one node (a flush waits for the one under way),
//!   so "flush, then read" sees every call answered before the flush began.

mod flusher;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use crate::domain::fingerprint::fields::Mismatch;
use crate::domain::top_keys::TopKeys;
use crate::domain::usage::{UsageCounts, UsageEvent};
use crate::domain::{OperationName, ScopedKey, TenantId};
use crate::engine::{ClaimAnswer, Refusal};
use crate::store::{HotKeyMinute, Rejection, Store, StoreResult, UsageMinute};

pub use flusher::{FLUSH_EVERY, PRUNE_EVERY};

/// Minutes kept in memory while the database cannot take them; past this the
/// oldest are dropped (and logged) rather than growing without bound.
const MAX_PENDING: usize = 100_000;

/// Refusals kept per tenant and class between two flushes (the newest).
pub const REJECTIONS_PER_FLUSH: usize = 20;

/// Keys written per tenant, class and minute by one flush (the most
/// claimed, each claimed at least [`HOT_KEY_MIN_CLAIMS`] times on this node
/// in that minute: a key claimed once is not hot).
pub const HOT_KEYS_PER_FLUSH: usize = 10;
pub const HOT_KEY_MIN_CLAIMS: u64 = 2;

/// Per-minute key summaries kept at most (the current and the last minute
/// of every class claimed); past it a new class's keys are not tracked
/// until older minutes are flushed (the counts still are), so memory stays
/// bounded however many classes are claimed.
const MAX_HOT_SUMMARIES: usize = 10_000;

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
    /// The keys claimed, per tenant, class and minute not yet written in
    /// full.
    hot: Mutex<HashMap<Minute, TopKeys>>,
    /// This process's name in `hot_key_minute`.
    node: String,
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
                hot: Mutex::new(HashMap::new()),
                node: format!("{:016x}", rand::random::<u64>()),
                flushing: tokio::sync::Mutex::new(()),
            }),
        }
    }

    /// Counts what one claim call came to, and how long the engine took to
    /// answer it (including any bounded wait the caller asked for). Answers
    /// that are not usage (bad input, store errors) are not counted.
    pub fn claim(&self, k: &ScopedKey, answer: &Result<ClaimAnswer, Refusal>, latency: Duration) {
        // Every answer about the key itself (new, replay, takeover, reuse,
        // collision, quarantine) is a claim of it for the hot keys.
        if matches!(
            answer,
            Ok(_) | Err(Refusal::KeyReused(_) | Refusal::InProgress(_) | Refusal::Quarantined)
        ) {
            self.claimed_key(k);
        }
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

    /// Counts one claim of the key in its minute's summary.
    fn claimed_key(&self, k: &ScopedKey) {
        let minute = (k.tenant.clone(), k.operation.clone(), this_minute());
        let mut hot = self.inner.hot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(top) = hot.get_mut(&minute) {
            top.offer(k.key.as_str());
        } else if hot.len() < MAX_HOT_SUMMARIES {
            hot.entry(minute).or_default().offer(k.key.as_str());
        }
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
        self.flush_hot_keys().await?;
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

    /// Writes every summary's top keys; then forgets the summaries of
    /// minutes that had ended before the write began. On failure all are
    /// kept for the next flush (writing a figure again changes nothing).
    async fn flush_hot_keys(&self) -> StoreResult<()> {
        let current = this_minute();
        let rows: Vec<HotKeyMinute> = {
            let hot = self.inner.hot.lock().unwrap_or_else(|e| e.into_inner());
            hot.iter()
                .flat_map(|((tenant, operation, minute), top)| {
                    top.top(HOT_KEYS_PER_FLUSH, HOT_KEY_MIN_CLAIMS)
                        .into_iter()
                        .map(move |t| HotKeyMinute {
                            tenant: tenant.clone(),
                            operation: operation.clone(),
                            minute: *minute,
                            key: t.key,
                            node: self.inner.node.clone(),
                            claims: i64::try_from(t.at_least).unwrap_or(i64::MAX),
                        })
                })
                .collect()
        };
        if !rows.is_empty() {
            self.inner.store.add_hot_keys(&rows).await?;
        }
        let mut hot = self.inner.hot.lock().unwrap_or_else(|e| e.into_inner());
        hot.retain(|(_, _, minute), _| *minute >= current);
        Ok(())
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
