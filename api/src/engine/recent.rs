//! The coalescing window for hot keys: a look that found a key **in
//! progress** is reused, for up to [`COALESCING_WINDOW`], by later claims of
//! the same key on this node that asked to wait (`wait_ms`), instead of
//! reading the database again. A claim that does not wait always reads.
//!
//! Single flight (`flight`) only shares a look among claims that arrive
//! while it runs; a retry storm whose requests arrive one after another
//! would still read the key once per request. Within the window they read
//! it once in all.
//!
//! What a reused look can decide is narrow, and that is what makes it safe:
//! it only ever describes another attempt's in-progress record whose lease
//! is still running (by the snapshot, aged by the time since it was read).
//! So the answers it leads to are `in_progress` (or a wait) and
//! `key_reused` (fingerprints never change) — never ownership, a replay or
//! a takeover, which always come from a fresh look. A snapshot is dropped
//! as soon as this node hears the key changed (its own completion, release
//! or quarantine, or another node's through the key-event trigger), and
//! all of them when the event stream had a gap; a waiting claim woken by an
//! event asks for a look newer than the event and never gets an older
//! snapshot. The cost of a lost event is bounded by the window: a claim may
//! be told `in_progress` (retryable) up to that long after the owner
//! finished.
//!
//! Both maps are bounded quick_caches (`cache::bounded`) whose values carry
//! their own time, checked on every read: a snapshot is reused only within
//! [`COALESCING_WINDOW`] of its read, and a change is remembered for
//! [`CHANGE_KEPT`]. A change also drops the key's snapshot at once, so only
//! a look already under way when the change was heard depends on the change
//! still being remembered when it is kept.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quick_cache::sync::Cache;
use tokio::time::Instant;

use crate::cache::bounded;
use crate::domain::{KeyHash, RecordState, ScopedKey};
use crate::store::KeyRecord;

/// How long a look that found a key in progress stands in for new ones.
pub const COALESCING_WINDOW: Duration = Duration::from_millis(250);

/// A snapshot is not reused when its lease ends within this margin.
const LEASE_MARGIN: Duration = Duration::from_millis(50);

/// How long a heard change is remembered: longer than any snapshot taken
/// before it can be kept.
const CHANGE_KEPT: Duration = COALESCING_WINDOW
    .saturating_mul(2)
    .saturating_add(Duration::from_secs(1));

/// Keys with a snapshot, and keys with a recent change, per node.
const CAPACITY: usize = 100_000;

struct Snapshot {
    /// When the look that read it started (a change after this moment
    /// makes it stale).
    started: Instant,
    /// When its row arrived (the row's `observed_at` is the database clock
    /// at that moment).
    read_at: Instant,
    row: Arc<KeyRecord>,
}

pub(super) struct RecentLooks {
    snapshots: Cache<KeyHash, Arc<Snapshot>>,
    /// When each key last changed, kept long enough to outlive any snapshot
    /// taken before the change.
    changed: Cache<KeyHash, Instant>,
    /// The last gap in the key-event stream: every earlier snapshot is void.
    gap: Mutex<Option<Instant>>,
}

impl Default for RecentLooks {
    fn default() -> Self {
        Self {
            snapshots: bounded(CAPACITY),
            changed: bounded(CAPACITY),
            gap: Mutex::new(None),
        }
    }
}

impl RecentLooks {
    /// Keeps what a look that started at `started` found, if it is an
    /// in-progress record.
    pub fn remember(&self, k: &ScopedKey, started: Instant, row: &Arc<KeyRecord>) {
        if row.state == RecordState::InProgress {
            let snapshot = Snapshot {
                started,
                read_at: Instant::now(),
                row: row.clone(),
            };
            self.snapshots.insert(k.hash(), Arc::new(snapshot));
        }
    }

    /// A recent in-progress look at `k` newer than `since` (if given), with
    /// no change heard since it started and its lease still running: the
    /// row, its `observed_at` moved on by the snapshot's age.
    pub fn get(&self, k: &ScopedKey, since: Option<Instant>) -> Option<Arc<KeyRecord>> {
        let h = k.hash();
        let s = self
            .snapshots
            .get(&h)
            .filter(|s| s.read_at.elapsed() < COALESCING_WINDOW)?;
        let void_after = |t: Option<Instant>| t.is_some_and(|t| t >= s.started);
        if since.is_some_and(|since| s.started < since)
            || void_after(self.last_change(h))
            || void_after(*self.gap.lock().unwrap_or_else(|p| p.into_inner()))
        {
            return None;
        }
        let age = chrono::TimeDelta::from_std(s.read_at.elapsed()).ok()?;
        let margin = chrono::TimeDelta::from_std(LEASE_MARGIN).ok()?;
        let mut row = KeyRecord::clone(&s.row);
        row.observed_at += age;
        (row.lease_expires_at > row.observed_at + margin).then(|| Arc::new(row))
    }

    /// Whether this node heard of a change of `k` (or a gap in the events)
    /// at or after `t`.
    pub fn changed_since(&self, k: &ScopedKey, t: Instant) -> bool {
        self.last_change(k.hash()).is_some_and(|c| c >= t)
            || self
                .gap
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some_and(|g| g >= t)
    }

    /// The key changed: no snapshot taken before now may be used.
    pub fn changed(&self, h: KeyHash) {
        self.changed.insert(h, Instant::now());
        self.snapshots.remove(&h);
    }

    /// When this node last heard `h` changed, within [`CHANGE_KEPT`].
    fn last_change(&self, h: KeyHash) -> Option<Instant> {
        self.changed.get(&h).filter(|c| c.elapsed() < CHANGE_KEPT)
    }

    /// Events may have been missed: no snapshot taken before now may be used.
    pub fn gap(&self) {
        *self.gap.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Fingerprint, IdempotencyKey, OperationName, OwnerTokenHash, TenantId};
    use chrono::{TimeDelta, Utc};

    fn key(name: &str) -> ScopedKey {
        ScopedKey {
            tenant: TenantId::parse("acme").unwrap(),
            operation: OperationName::parse("charges.create").unwrap(),
            key: IdempotencyKey::parse(name).unwrap(),
        }
    }

    fn in_progress(lease_left: TimeDelta) -> Arc<KeyRecord> {
        let now = Utc::now();
        Arc::new(KeyRecord {
            state: RecordState::InProgress,
            fingerprint: Fingerprint::from_bytes([1; 32]),
            attempt: 1,
            owner_token_hash: OwnerTokenHash([2; 32]),
            claimed_at: now,
            lease_expires_at: now + lease_left,
            outcome: None,
            outcome_hash: None,
            steps: "{}".into(),
            history: "[]".into(),
            completed_at: None,
            quarantine_reason: None,
            expires_at: now + TimeDelta::hours(24),
            replay_window: Duration::from_secs(86_400),
            created_at: now,
            updated_at: now,
            observed_at: now,
            routing: None,
            rules_digest: None,
            field_digests: None,
            waited: false,
        })
    }

    #[tokio::test]
    async fn an_in_progress_look_is_reused_until_the_key_changes() {
        let recent = RecentLooks::default();
        let (k, other) = (key("k1"), key("k2"));
        let row = in_progress(TimeDelta::seconds(30));
        recent.remember(&k, Instant::now(), &row);

        let reused = recent.get(&k, None).expect("reused");
        assert!(reused.observed_at >= row.observed_at, "aged, never younger");
        assert_eq!(reused.attempt, row.attempt);
        assert!(recent.get(&other, None).is_none());
        assert!(
            recent.get(&k, Some(Instant::now())).is_none(),
            "a newer look was asked for"
        );

        recent.changed(k.hash());
        assert!(recent.get(&k, None).is_none(), "changed after the look");
    }

    #[tokio::test]
    async fn a_gap_voids_every_snapshot_and_a_later_look_counts_again() {
        let recent = RecentLooks::default();
        let k = key("k1");
        recent.remember(&k, Instant::now(), &in_progress(TimeDelta::seconds(30)));
        recent.gap();
        assert!(recent.get(&k, None).is_none());
        tokio::time::sleep(Duration::from_millis(2)).await;
        recent.remember(&k, Instant::now(), &in_progress(TimeDelta::seconds(30)));
        assert!(recent.get(&k, None).is_some());
    }

    #[tokio::test]
    async fn only_live_leases_of_in_progress_records_are_reused() {
        let recent = RecentLooks::default();
        let k = key("k1");
        recent.remember(
            &k,
            Instant::now(),
            &in_progress(TimeDelta::milliseconds(10)),
        );
        assert!(
            recent.get(&k, None).is_none(),
            "the lease ends within the margin"
        );

        let done = key("k2");
        let mut completed = KeyRecord::clone(&in_progress(TimeDelta::seconds(30)));
        completed.state = RecordState::Completed;
        recent.remember(&done, Instant::now(), &Arc::new(completed));
        assert!(
            recent.get(&done, None).is_none(),
            "only in-progress rows are kept"
        );
    }
}
