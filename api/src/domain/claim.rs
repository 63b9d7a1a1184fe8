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
//! A released key has no row at all. A record past its `expires_at` (the end
//! of the replay window) is treated as gone: the key may be used anew — unless
//! an attempt still holds a live lease on it.
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
    pub expires_at: DateTime<Utc>,
    /// The store's clock when the record was read.
    pub now: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The record is past its replay window: claim the key anew.
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
    let lease_live = seen.state == RecordState::InProgress && seen.lease_expires_at > seen.now;
    if seen.expires_at <= seen.now && !lease_live {
        return Decision::Renew;
    }
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

    fn seen(state: RecordState, lease_left_s: i64, window_left_s: i64) -> Seen {
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        Seen {
            state,
            fingerprint: FP,
            lease_expires_at: now + TimeDelta::seconds(lease_left_s),
            expires_at: now + TimeDelta::seconds(window_left_s),
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
    fn past_the_window_the_key_is_new_whatever_the_fingerprint() {
        for state in [Completed, Quarantined] {
            assert_eq!(
                decide(&seen(state, -5, 0), &OTHER, Takeover),
                Decision::Renew
            );
        }
        assert_eq!(
            decide(&seen(InProgress, -1, -1), &FP, Takeover),
            Decision::Renew
        );
    }

    #[test]
    fn a_live_lease_keeps_the_key_even_past_the_window() {
        let d = decide(&seen(InProgress, 5, -1), &FP, Takeover);
        assert!(matches!(d, Decision::InProgress { .. }));
    }
}
