//! The reference model: one key's record as the protocol says it evolves,
//! the operations clients and the world perform on it, and the figures a run
//! counts.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use idemkey_api::domain::policy::LeaseExpiry;
use idemkey_api::domain::{Decision, OwnerToken, OwnerTokenHash, RecordState};
use idemkey_api::store::{NewClaim, Version};

use crate::stores::fingerprint;

pub(super) const LEASE_MS: i64 = 22_500;
pub(super) const WINDOW_MS: i64 = 65_000;
pub(super) const TICK_MS: i64 = 10_000;
/// A case that takes longer than this in real time could tip a boundary.
pub(super) const REAL_TIME_BUDGET: Duration = Duration::from_millis(2_400);

#[derive(Debug, Clone)]
pub enum Op {
    /// The look of a claim (the insert, else a read and a decision).
    Look {
        client: usize,
        request: u8,
    },
    /// The act of the client's last look, however long ago it was.
    Act {
        client: usize,
    },
    Complete {
        client: usize,
    },
    Release {
        client: usize,
    },
    Heartbeat {
        client: usize,
    },
    Step {
        client: usize,
        step: u8,
    },
    Quarantine {
        client: usize,
    },
    /// An admin resolves: with an outcome, or by releasing.
    Resolve {
        complete: bool,
    },
    /// The clock moves on by `tens` × 10 s.
    Advance {
        tens: u8,
    },
    Cleanup,
}

/// Counts over every case run, printed by the test.
#[derive(Default)]
pub struct Figures {
    pub(super) steps: AtomicU64,
    pub(super) claimed: AtomicU64,
    pub(super) renewed: AtomicU64,
    pub(super) recovering: AtomicU64,
    pub(super) replays: AtomicU64,
    pub(super) completed: AtomicU64,
    pub(super) stale_acts: AtomicU64,
    pub(super) refused: AtomicU64,
    pub(super) gone: AtomicU64,
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        write!(
            f,
            "{} steps: {} claimed new, {} renewed past the window, {} taken over, \
             {} replays, {} completed, {} stale acts refused, {} owner calls refused, \
             {} looks at a gone record",
            n(&self.steps),
            n(&self.claimed),
            n(&self.renewed),
            n(&self.recovering),
            n(&self.replays),
            n(&self.completed),
            n(&self.stale_acts),
            n(&self.refused),
            n(&self.gone),
        )
    }
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The record as the model has it.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) request: u8,
    pub(super) state: RecordState,
    pub(super) attempt: i32,
    pub(super) owner: OwnerTokenHash,
    pub(super) lease_end: i64,
    pub(super) expires: i64,
    pub(super) outcome: Option<u32>,
    /// Step number → the client whose reference it holds.
    pub(super) steps: BTreeMap<u8, usize>,
}

impl Row {
    pub(super) fn new(request: u8, owner: OwnerTokenHash, now: i64) -> Self {
        Self {
            request,
            state: RecordState::InProgress,
            attempt: 1,
            owner,
            lease_end: now + LEASE_MS,
            expires: now + WINDOW_MS,
            outcome: None,
            steps: BTreeMap::new(),
        }
    }

    pub(super) fn gone(&self, now: i64) -> bool {
        self.expires <= now
            && (self.state == RecordState::Completed || self.lease_end + WINDOW_MS <= now)
    }

    pub(super) fn owned_by(&self, token: OwnerTokenHash, now: i64) -> bool {
        self.state == RecordState::InProgress && self.owner == token && !self.gone(now)
    }

    pub(super) fn complete(&mut self, outcome: u32, now: i64) {
        self.state = RecordState::Completed;
        self.outcome = Some(outcome);
        self.expires = self.expires.max(now + WINDOW_MS);
    }

    pub(super) fn version(&self) -> Version {
        Version {
            attempt: self.attempt,
            owner: self.owner,
        }
    }
}

pub(super) struct Model {
    pub(super) now: i64,
    pub(super) row: Option<Row>,
    pub(super) on_expiry: LeaseExpiry,
}

impl Model {
    pub(super) fn decide(&self, request: u8) -> Decision {
        let Some(row) = &self.row else {
            unreachable!("a look decides only on a record it found")
        };
        if row.gone(self.now) {
            return Decision::Renew;
        }
        if row.request != request {
            return Decision::KeyReused;
        }
        match row.state {
            RecordState::Completed => Decision::Replay,
            RecordState::Quarantined => Decision::Quarantined,
            RecordState::InProgress if row.lease_end > self.now => Decision::InProgress {
                retry_after: Duration::ZERO,
            },
            RecordState::InProgress => match self.on_expiry {
                LeaseExpiry::Takeover => Decision::TakeOver,
                LeaseExpiry::Quarantine => Decision::Quarantine,
            },
        }
    }

    /// The row a compare-and-swap on version `seen` after a lease ran out
    /// may act on.
    pub(super) fn expired_version(&mut self, seen: Version) -> Option<&mut Row> {
        let now = self.now;
        self.row.as_mut().filter(|r| {
            r.state == RecordState::InProgress && r.version() == seen && r.lease_end <= now
        })
    }
}

pub(super) struct Pending {
    pub(super) request: u8,
    pub(super) candidate: OwnerToken,
    pub(super) decision: Decision,
    pub(super) seen: Version,
}

#[derive(Default)]
pub(super) struct Client {
    /// The token of the last ownership this client was granted.
    pub(super) owned: Option<OwnerToken>,
    pub(super) pending: Option<Pending>,
}

impl Client {
    pub(super) fn token(&self) -> OwnerTokenHash {
        self.owned
            .as_ref()
            .map_or_else(|| OwnerToken::generate().hash(), OwnerToken::hash)
    }
}

pub(super) fn new_claim(request: u8, owner: &OwnerToken) -> NewClaim {
    NewClaim {
        fingerprint: fingerprint(request),
        owner: owner.hash(),
        lease: Duration::from_millis(LEASE_MS as u64),
        replay_window: Duration::from_millis(WINDOW_MS as u64),
        tier_after: Duration::from_millis(WINDOW_MS as u64),
        rules_digest: None,
        field_digests: None,
    }
}
