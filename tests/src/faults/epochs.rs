//! A key's records, one after another, and whether each new one was
//! allowed to start.
//!
//! A claim answered `claimed` (201) starts a record of the key: the first
//! one, or a new one after the previous record ended. A record ends only
//! when its owner releases it (no effect happened), or when its protection
//! is over: a window after the later of its first claim and, for an outcome,
//! the moment it was stored, or, for a record never completed, the end of
//! its last lease. Any other second `claimed` means the key looked new while
//! it was not, and so does a second charge within one record.
//!
//! Times are the database's, as the answers named them: a grant happened at
//! its lease end less the lease asked for, an outcome was stored at its
//! `completed_at`. A `claimed` answer is judged against the protection the
//! answers prove (lower bounds only; a heartbeat or completion whose answer
//! was lost can only have made it longer). One that came after that bound
//! is not judged, and counted: it is a retry delayed past a short window,
//! which the server rightly treats as new.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::journal::{Call, Entry};

/// Slack for the millisecond rounding of the answers' times.
const SLACK: TimeDelta = TimeDelta::milliseconds(50);

/// What the records of one key showed.
#[derive(Debug, Default)]
pub struct Records {
    /// `claimed` answers after the first that followed a release.
    pub reclaimed: u64,
    /// `claimed` answers after the key's protection had ended.
    pub unjudged: u64,
    pub late_completions: u64,
    pub late_claims: u64,
    pub problems: Vec<String>,
}

/// Judges the records of one key under a replay window of `window`.
pub fn judge(story: &[Entry], window: Duration) -> Records {
    let w = TimeDelta::from_std(window).expect("a replay window");
    let mut starts: Vec<DateTime<Utc>> = story
        .iter()
        .filter(|e| e.call == Call::Claim && e.status == 201)
        .filter_map(|e| e.granted_at)
        .collect();
    starts.sort();
    let mut r = Records::default();
    // A completion whose fate is unknown may have stored an outcome at a
    // moment no answer names: then a lease live at that moment no longer
    // protects the record, and only grant times bound it.
    let unknown_completion = story.iter().any(|e| {
        e.call == Call::Complete
            && !matches!(
                (e.status, e.word.as_str()),
                (200, _) | (404, _) | (409, "lease_lost") | (0, "connect_failed")
            )
    });
    for pair in starts.windows(2) {
        let (lo, hi) = (pair[0], pair[1]);
        let within = |t: Option<DateTime<Utc>>| t.is_some_and(|t| lo <= t && t < hi);
        let released = story.iter().any(|e| {
            e.call == Call::Release
                && within(e.owner_since)
                && (e.status == 200
                    || e.status >= 500
                    || (e.status == 0 && e.word != "connect_failed"))
        });
        if released {
            r.reclaimed += 1;
            continue;
        }
        let completions: Vec<DateTime<Utc>> = story
            .iter()
            .filter_map(|e| e.completed_at)
            .filter(|c| lo <= *c && *c < hi)
            .collect();
        let use_leases = !unknown_completion && completions.is_empty();
        let mut bound = lo + w;
        for e in story.iter().filter(|e| within(e.granted_at)) {
            bound = bound.max(e.granted_at.expect("granted") + w);
            if let Some(end) = e.lease_end.filter(|_| use_leases) {
                bound = bound.max(end + w);
            }
        }
        for c in &completions {
            bound = bound.max(*c + w);
        }
        if hi + SLACK < bound {
            r.problems.push(format!(
                "answered `claimed` (201) again at {} with no release of the record claimed at {}: \
                 the key was protected until at least {}",
                clock(hi),
                clock(lo),
                clock(bound)
            ));
        } else {
            r.unjudged += 1;
        }
    }
    r.problems.extend(charges_per_record(story, &starts));
    count_late(story, &starts, w, &mut r);
    r
}

/// The record an owner's call belongs to: the last start at or before its
/// grant (the first, when the first `claimed` answer was never seen).
fn record_of(starts: &[DateTime<Utc>], t: DateTime<Utc>) -> usize {
    starts.iter().filter(|s| **s <= t).count().saturating_sub(1)
}

/// At most one charge within one record.
fn charges_per_record(story: &[Entry], starts: &[DateTime<Utc>]) -> Vec<String> {
    let mut per = vec![0u32; starts.len().max(1)];
    for e in story.iter().filter(|e| e.call == Call::Charge) {
        if let Some(t) = e.owner_since {
            per[record_of(starts, t)] += 1;
        }
    }
    per.iter()
        .enumerate()
        .filter(|(_, n)| **n > 1)
        .map(|(i, n)| {
            let at = starts.get(i).map_or("?".into(), |s| clock(*s));
            format!("charged {n} times within the record claimed at {at}")
        })
        .collect()
}

/// Completions, takeovers and replays after their record's first window.
fn count_late(story: &[Entry], starts: &[DateTime<Utc>], w: TimeDelta, r: &mut Records) {
    let past = |t: DateTime<Utc>| {
        starts
            .iter()
            .rev()
            .find(|s| **s <= t)
            .is_some_and(|s| t > *s + w)
    };
    for e in story {
        match (e.call, e.status, e.word.as_str()) {
            (Call::Complete, 200, _) if e.completed_at.is_some_and(past) => r.late_completions += 1,
            (Call::Claim, 200, "recovering") if e.granted_at.is_some_and(past) => {
                r.late_claims += 1
            }
            (Call::Claim, 200, "completed") if past(e.sent_at) => r.late_claims += 1,
            _ => {}
        }
    }
}

fn clock(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S%.3f").to_string()
}
