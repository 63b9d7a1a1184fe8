//! The figures of a round, or of all rounds: how much of the protocol the
//! clients went through, and how many promises were broken.

use std::collections::HashMap;
use std::fmt;

use super::journal::{Call, Entry};

#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub rounds: u64,
    pub faults: u64,
    pub operations: u64,
    pub claimed: u64,
    pub recovering: u64,
    /// `recovering` answers whose previous attempt had charged already
    /// (found at the provider, completed without charging).
    pub takeovers: u64,
    pub replays: u64,
    pub retries: u64,
    /// Claims and completions cut off in flight (reset or timed out after
    /// the request was sent, not refused): the moments a fault hit a call
    /// the server may already have acted on.
    pub unanswered: u64,
    pub deaths: u64,
    pub stalls: u64,
    pub abandoned: u64,
    pub lease_lost: u64,
    /// Releases acknowledged (200).
    pub releases: u64,
    /// `claimed` answers that followed a release of the key.
    pub reclaimed: u64,
    /// `key_reused` answers: a key released and claimed for a corrected
    /// request before a caller of the original came back.
    pub reused: u64,
    /// Owners that worked longer than the replay window, under heartbeats.
    pub long_effects: u64,
    /// Completions acknowledged after their record's first window ended.
    pub late_completions: u64,
    /// Claims answered `recovering` or replayed after their record's first
    /// window ended: what a window cut short would have answered `claimed`.
    pub late_claims: u64,
    /// `claimed` answers after the key's protection had legitimately ended
    /// (a retry delayed past a short window): not judged.
    pub unjudged: u64,
    pub charges: u64,
    pub violations: u64,
}

impl std::ops::AddAssign for Figures {
    fn add_assign(&mut self, o: Self) {
        self.rounds += o.rounds;
        self.faults += o.faults;
        self.operations += o.operations;
        self.claimed += o.claimed;
        self.recovering += o.recovering;
        self.takeovers += o.takeovers;
        self.replays += o.replays;
        self.retries += o.retries;
        self.unanswered += o.unanswered;
        self.deaths += o.deaths;
        self.stalls += o.stalls;
        self.abandoned += o.abandoned;
        self.lease_lost += o.lease_lost;
        self.releases += o.releases;
        self.reclaimed += o.reclaimed;
        self.reused += o.reused;
        self.long_effects += o.long_effects;
        self.late_completions += o.late_completions;
        self.late_claims += o.late_claims;
        self.unjudged += o.unjudged;
        self.charges += o.charges;
        self.violations += o.violations;
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rounds {} · faults {} · operations {} · claimed {} · recovering {} · \
             takeovers {} · replays {} · retries {} (unanswered {}) · deaths {} · \
             stalls {} · abandoned {} · lease_lost {} · releases {} (claimed again {}, \
             key_reused {}) · long effects {} · after the first window: completions {}, \
             claims {} · not judged {} · charges {} · violations {}",
            self.rounds,
            self.faults,
            self.operations,
            self.claimed,
            self.recovering,
            self.takeovers,
            self.replays,
            self.retries,
            self.unanswered,
            self.deaths,
            self.stalls,
            self.abandoned,
            self.lease_lost,
            self.releases,
            self.reclaimed,
            self.reused,
            self.long_effects,
            self.late_completions,
            self.late_claims,
            self.unjudged,
            self.charges,
            self.violations
        )
    }
}

/// The figures the journal shows by itself.
pub fn count(entries: &HashMap<String, Vec<Entry>>) -> Figures {
    let mut f = Figures {
        rounds: 1,
        operations: entries.len() as u64,
        ..Figures::default()
    };
    for e in entries.values().flatten() {
        match (e.call, e.status, e.word.as_str()) {
            (Call::Claim, 201, _) => f.claimed += 1,
            (Call::Claim, 200, "recovering") => f.recovering += 1,
            (Call::Claim, 200, "completed") => f.replays += 1,
            (Call::Claim, 422, "key_reused") => f.reused += 1,
            (Call::Find, _, "found") => f.takeovers += 1,
            (Call::Died, _, _) => f.deaths += 1,
            (Call::Stalled, _, _) => f.stalls += 1,
            (Call::Working, _, _) => f.long_effects += 1,
            (Call::Abandoned, _, _) => f.abandoned += 1,
            (Call::Release, 200, _) => f.releases += 1,
            (Call::Complete, 409, "lease_lost") => f.lease_lost += 1,
            (Call::Claim | Call::Complete | Call::Release, 0, word) if word != "connect_failed" => {
                f.retries += 1;
                f.unanswered += 1;
            }
            _ if e.is_retryable() => f.retries += 1,
            _ => {}
        }
    }
    f
}
