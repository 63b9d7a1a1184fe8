//! The claim decision: what a claim of an existing record means.
//!
//! States (SPEC section 3):
//! - `in_progress`: an attempt owns the key; its lease runs until
//!   `lease_expires_at`. Heartbeats extend it. When it has run out, the next
//!   claim takes the key over (`recovering`, attempt + 1) or, under a
//!   `quarantine` policy, the key is quarantined.
//! - `completed`: the final outcome is stored; every replay returns it.
//! - `quarantined`: the outcome is ambiguous; claims are refused until a
//!   resolve.
//!
//! A released key has no row at all. A record is gone — the key may be used
//! anew — only once its replay window is over ([`protected_until`]): a
//! completed record at `expires_at` (which a completion moved to at least
//! `completed_at + replay_window`), a record never completed only when, in
//! addition, its last lease ended a whole window ago. An attempt that might
//! still act on a key, or has just acted, never sees it answered as new.
//!
//! This module only decides. The store then carries the decision out with one
//! compare-and-swap statement, and if that statement finds the row changed,
//! the caller reads again and decides again: the database is the only
//! ownership authority.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::fingerprint::Fingerprint;
use super::policy::LeaseExpiry;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    InProgress,
    Completed,
    Quarantined,
}

impl RecordState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Quarantined => "quarantined",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "in_progress" => Some(Self::InProgress),
            "completed" => Some(Self::Completed),
            "quarantined" => Some(Self::Quarantined),
            _ => None,
        }
    }
}

/// What the decision needs to know about a stored record.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    pub state: RecordState,
    pub fingerprint: Fingerprint,
    pub lease_expires_at: DateTime<Utc>,
    /// The end of the replay window as stored: first claim + window, moved
    /// to at least `completed_at + window` by a completion.
    pub expires_at: DateTime<Utc>,
    /// The window length fixed when the record was first written.
    pub replay_window: Duration,
    /// The store's clock when the record was read.
    pub now: DateTime<Utc>,
}

impl Seen {
    /// See [`protected_until`].
    pub fn protected_until(&self) -> DateTime<Utc> {
        protected_until(
            self.state,
            self.expires_at,
            self.lease_expires_at,
            self.replay_window,
        )
    }

    /// Past its window: the key is new again.
    pub fn is_gone(&self) -> bool {
        self.protected_until() <= self.now
    }
}

/// When the replay protection of a record ends. A completed record keeps
/// its key until `expires_at` (a completion, or a resolve with an outcome,
/// moves it to at least `completed_at + replay_window`). A record that was
/// never completed — in progress or quarantined — also keeps it while its
/// last lease is live or ended less than a window ago: an attempt that may
/// still be running its effect, or has just run it, is never answered as if
/// the key were new. The stores' `gone` predicates state the same rule in
/// SQL.
pub fn protected_until(
    state: RecordState,
    expires_at: DateTime<Utc>,
    lease_expires_at: DateTime<Utc>,
    replay_window: Duration,
) -> DateTime<Utc> {
    if state == RecordState::Completed {
        return expires_at;
    }
    let window = chrono::TimeDelta::from_std(replay_window).unwrap_or(chrono::TimeDelta::MAX);
    let after_lease = lease_expires_at
        .checked_add_signed(window)
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
    expires_at.max(after_lease)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The record is gone (past its window, see [`protected_until`]): claim
    /// the key anew.
    Renew,
    /// Same key, different protected input.
    KeyReused,
    /// Completed: replay the stored outcome.
    Replay,
    /// Another attempt holds a live lease.
    InProgress { retry_after: Duration },
    /// Waiting for reconciliation.
    Quarantined,
    /// The owner's lease ran out: take the key over.
    TakeOver,
    /// The owner's lease ran out and the class forbids automatic retries.
    Quarantine,
}

pub fn decide(seen: &Seen, fingerprint: &Fingerprint, on_expiry: LeaseExpiry) -> Decision {
    if seen.is_gone() {
        return Decision::Renew;
    }
    let lease_live = seen.state == RecordState::InProgress && seen.lease_expires_at > seen.now;
    if seen.fingerprint != *fingerprint {
        return Decision::KeyReused;
    }
    match seen.state {
        RecordState::Completed => Decision::Replay,
        RecordState::Quarantined => Decision::Quarantined,
        RecordState::InProgress if lease_live => Decision::InProgress {
            retry_after: retry_after(seen.lease_expires_at - seen.now),
        },
        RecordState::InProgress => match on_expiry {
            LeaseExpiry::Takeover => Decision::TakeOver,
            LeaseExpiry::Quarantine => Decision::Quarantine,
        },
    }
}

/// The decision for a completed outcome known to be inside its window (a
/// cached copy: caches keep an outcome no longer than its window): replay
/// it if the request is the same, else key reuse.
pub fn decide_completed(stored: &Fingerprint, fingerprint: &Fingerprint) -> Decision {
    if stored == fingerprint {
        Decision::Replay
    } else {
        Decision::KeyReused
    }
}

/// Whether a request whose fingerprint under today's rules (`current`) is
/// `fingerprint` must be fingerprinted again under the rules a record was
/// written under before it is judged against that record: only when the
/// two fingerprints differ, the record's rules are not today's, and the
/// request's text is at hand (a precomputed fingerprint is judged as sent).
pub fn needs_record_rules(
    fingerprint: &Fingerprint,
    current: Option<[u8; 32]>,
    record_fp: &Fingerprint,
    record_rules: Option<[u8; 32]>,
    has_request: bool,
) -> bool {
    fingerprint != record_fp && record_rules != current && has_request
}

/// The fingerprint a request is judged by against a record: the record's
/// own when the request, fingerprinted under the record's rules
/// (`under_record_rules`), matches it — the same operation, retried across
/// a policy change — else the request's fingerprint under today's rules.
pub fn judged_fingerprint(
    fingerprint: Fingerprint,
    record_fp: Fingerprint,
    under_record_rules: Option<Fingerprint>,
) -> Fingerprint {
    match under_record_rules {
        Some(fp) if fp == record_fp => record_fp,
        _ => fingerprint,
    }
}

/// Whole seconds until the lease ends, at least one (Retry-After's unit).
fn retry_after(remaining: chrono::TimeDelta) -> Duration {
    let ms = remaining.num_milliseconds().max(0) as u64;
    Duration::from_secs(ms.div_ceil(1000).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    const FP: Fingerprint = Fingerprint::from_bytes([1; 32]);
    const OTHER: Fingerprint = Fingerprint::from_bytes([2; 32]);
    /// The window of every record in these tests.
    const WINDOW_S: i64 = 60;

    fn seen(state: RecordState, lease_left_s: i64, window_left_s: i64) -> Seen {
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        Seen {
            state,
            fingerprint: FP,
            lease_expires_at: now + TimeDelta::seconds(lease_left_s),
            expires_at: now + TimeDelta::seconds(window_left_s),
            replay_window: Duration::from_secs(WINDOW_S as u64),
            now,
        }
    }

    use LeaseExpiry::Takeover;
    use RecordState::*;

    #[test]
    fn a_completed_key_with_the_same_fingerprint_replays() {
        assert_eq!(
            decide(&seen(Completed, -5, 60), &FP, Takeover),
            Decision::Replay
        );
    }

    #[test]
    fn a_different_fingerprint_is_key_reuse_in_every_live_state() {
        for state in [InProgress, Completed, Quarantined] {
            for lease in [-5, 5] {
                let d = decide(&seen(state, lease, 60), &OTHER, Takeover);
                assert_eq!(d, Decision::KeyReused, "{state:?} lease {lease}");
            }
        }
    }

    #[test]
    fn a_live_lease_answers_in_progress_with_whole_seconds_to_wait() {
        let d = decide(&seen(InProgress, 5, 60), &FP, Takeover);
        assert_eq!(
            d,
            Decision::InProgress {
                retry_after: Duration::from_secs(5)
            }
        );
        let mut s = seen(InProgress, 0, 60);
        s.lease_expires_at += TimeDelta::milliseconds(200);
        let d = decide(&s, &FP, Takeover);
        assert_eq!(
            d,
            Decision::InProgress {
                retry_after: Duration::from_secs(1)
            }
        );
    }

    #[test]
    fn an_expired_lease_is_taken_over_or_quarantined_per_policy() {
        assert_eq!(
            decide(&seen(InProgress, 0, 60), &FP, Takeover),
            Decision::TakeOver
        );
        let d = decide(&seen(InProgress, -1, 60), &FP, LeaseExpiry::Quarantine);
        assert_eq!(d, Decision::Quarantine);
    }

    #[test]
    fn a_quarantined_key_stays_quarantined() {
        assert_eq!(
            decide(&seen(Quarantined, -5, 60), &FP, Takeover),
            Decision::Quarantined
        );
    }

    #[test]
    fn a_completed_key_past_its_window_is_new_whatever_the_fingerprint() {
        for window_left in [0, -1, -3600] {
            let d = decide(&seen(Completed, -5, window_left), &OTHER, Takeover);
            assert_eq!(d, Decision::Renew, "window left {window_left}");
        }
    }

    /// When a window ends, row by row: (state, lease left, stored window
    /// left) → gone or not. A record never completed keeps its key until its
    /// last lease ended a whole window (60 s here) ago.
    #[test]
    fn a_record_never_completed_is_gone_only_a_window_after_its_last_lease() {
        let rows = [
            (Completed, -5, 1, false),
            (Completed, -5, 0, true),
            (Completed, 3600, -1, true), // a lease means nothing once completed
            (InProgress, 5, -1, false),  // live lease past the window
            (InProgress, -1, -1, false), // lease ended 1 s ago
            (InProgress, -59, -30, false),
            (InProgress, -60, -30, true),
            (InProgress, -60, 1, false), // the first window still runs
            (Quarantined, -5, 0, false),
            (Quarantined, -61, -1, true),
        ];
        for (state, lease, window, gone) in rows {
            let s = seen(state, lease, window);
            assert_eq!(s.is_gone(), gone, "{state:?} lease {lease} window {window}");
            let d = decide(&s, &OTHER, Takeover);
            assert_eq!(
                d == Decision::Renew,
                gone,
                "{state:?} lease {lease} window {window}: {d:?}"
            );
        }
    }

    #[test]
    fn an_abandoned_attempt_past_the_first_window_is_taken_over_not_renewed() {
        assert_eq!(
            decide(&seen(InProgress, -1, -1), &FP, Takeover),
            Decision::TakeOver
        );
        assert_eq!(
            decide(&seen(InProgress, -1, -1), &FP, LeaseExpiry::Quarantine),
            Decision::Quarantine
        );
    }

    #[test]
    fn a_live_lease_keeps_the_key_even_past_the_window() {
        let d = decide(&seen(InProgress, 5, -1), &FP, Takeover);
        assert!(matches!(d, Decision::InProgress { .. }));
    }

    #[test]
    fn protection_of_an_unfinished_record_ends_a_window_after_its_lease() {
        let s = seen(InProgress, 30, 10);
        assert_eq!(
            s.protected_until(),
            s.lease_expires_at + TimeDelta::seconds(WINDOW_S)
        );
        let done = seen(Completed, 30, 10);
        assert_eq!(done.protected_until(), done.expires_at);
    }

    #[test]
    fn a_cached_outcome_replays_only_the_same_request() {
        assert_eq!(decide_completed(&FP, &FP), Decision::Replay);
        assert_eq!(decide_completed(&FP, &OTHER), Decision::KeyReused);
    }

    #[test]
    fn a_request_is_judged_again_only_across_a_rule_change_and_with_its_text() {
        let (today, then) = (Some([7; 32]), Some([8; 32]));
        // Rows: same fingerprint; same rules; no text; all three differ.
        assert!(!needs_record_rules(&FP, today, &FP, then, true));
        assert!(!needs_record_rules(&FP, today, &OTHER, today, true));
        assert!(!needs_record_rules(&FP, today, &OTHER, then, false));
        assert!(needs_record_rules(&FP, today, &OTHER, then, true));
        // The defaults (`None`) are rules too.
        assert!(needs_record_rules(&FP, None, &OTHER, then, true));
        assert!(needs_record_rules(&FP, today, &OTHER, None, true));
    }

    #[test]
    fn a_retry_across_a_rule_change_is_judged_by_the_records_fingerprint() {
        assert_eq!(judged_fingerprint(FP, OTHER, Some(OTHER)), OTHER);
        assert_eq!(judged_fingerprint(FP, OTHER, Some(FP)), FP);
        assert_eq!(judged_fingerprint(FP, OTHER, None), FP);
    }
}
