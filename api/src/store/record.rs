//! The stored record, as every backend returns it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::{Fingerprint, OperationName, OwnerTokenHash, RecordState, Seen};

#[derive(Debug, Clone)]
pub struct KeyRecord {
    pub state: RecordState,
    pub fingerprint: Fingerprint,
    pub attempt: i32,
    pub owner_token_hash: OwnerTokenHash,
    pub claimed_at: DateTime<Utc>,
    pub lease_expires_at: DateTime<Utc>,
    /// The outcome's exact JSON text, when completed.
    pub outcome: Option<String>,
    pub outcome_hash: Option<[u8; 32]>,
    /// Steps done, as JSON text: `{"name": {"provider_ref", "done_at"}}`.
    pub steps: String,
    /// The audit trail, as JSON text: an array of events.
    pub history: String,
    pub completed_at: Option<DateTime<Utc>>,
    pub quarantine_reason: Option<String>,
    /// The end of the replay window as stored: first claim + window, moved
    /// to at least `completed_at + window` by a completion. What callers are
    /// told is [`KeyRecord::protected_until`].
    pub expires_at: DateTime<Utc>,
    /// The window length, fixed when the record was first written.
    pub replay_window: Duration,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The store's clock when this row was read or written.
    pub observed_at: DateTime<Utc>,
    /// Where the outcome lives once tiered (`outcome` is then `None`).
    pub routing: Option<Routing>,
    /// The fingerprint rules the record's fingerprint was computed under
    /// (`None`: the default rules).
    pub rules_digest: Option<[u8; 32]>,
    /// The request's field digests (`FieldDigests::to_text`), when the
    /// first claim sent a request rather than a fingerprint.
    pub field_digests: Option<String>,
    /// Whether a node waits on this key, so its change must be announced to
    /// the others: only a completion on Postgres asks (false otherwise).
    pub waited: bool,
}

/// A routing entry: a tiered outcome's place in an archive segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routing {
    /// The segment's name in the archive.
    pub segment: String,
    /// The outcome's bytes within the segment.
    pub offset: u64,
    pub len: u64,
    /// SHA-256 of those bytes, checked on every read.
    pub sha256: [u8; 32],
    pub tiered_at: DateTime<Utc>,
}

impl KeyRecord {
    pub fn seen(&self) -> Seen {
        Seen {
            state: self.state,
            fingerprint: self.fingerprint,
            lease_expires_at: self.lease_expires_at,
            expires_at: self.expires_at,
            replay_window: self.replay_window,
            now: self.observed_at,
        }
    }

    /// A record past its window is gone as far as any caller can tell
    /// (cleanup may not have removed the row yet).
    pub fn is_expired(&self) -> bool {
        self.seen().is_gone()
    }

    /// When this key's replay protection ends, as things stand: what every
    /// answer calls `expires_at`.
    pub fn protected_until(&self) -> DateTime<Utc> {
        self.seen().protected_until()
    }

    /// The row version a compare-and-swap based on this read expects.
    pub fn version(&self) -> Version {
        Version {
            attempt: self.attempt,
            owner: self.owner_token_hash,
        }
    }
}

/// The version of a record a compare-and-swap expects to find: its attempt
/// and that attempt's owner-token hash. The attempt alone is not enough: it
/// restarts at 1 whenever a record is written anew (after a release, after
/// a renewal), while the owner token is random per attempt, so a stale
/// takeover can never match a newer record that happens to share the
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    pub attempt: i32,
    pub owner: OwnerTokenHash,
}

/// Everything a fresh claim writes.
#[derive(Debug, Clone)]
pub struct NewClaim {
    pub fingerprint: Fingerprint,
    pub owner: OwnerTokenHash,
    pub lease: Duration,
    pub replay_window: Duration,
    pub tier_after: Duration,
    /// The digest of the fingerprint rules in force (`None`: the defaults).
    pub rules_digest: Option<[u8; 32]>,
    /// The request's field digests (`FieldDigests::to_text`), if it sent one.
    pub field_digests: Option<String>,
}

/// A completion: the outcome text and its canonical hash.
#[derive(Debug, Clone, Copy)]
pub struct Completion<'a> {
    pub owner: OwnerTokenHash,
    pub outcome_json: &'a str,
    pub outcome_hash: [u8; 32],
}

/// A finished step, recorded by the current owner.
#[derive(Debug, Clone, Copy)]
pub struct StepDone<'a> {
    pub owner: OwnerTokenHash,
    pub step: &'a str,
    pub provider_ref: &'a str,
}

/// Who finishes a quarantined key.
#[derive(Debug, Clone)]
pub struct Resolver {
    /// `None` for an admin; the owner token's hash for the owner.
    pub owner: Option<OwnerTokenHash>,
    /// Named in the audit trail, e.g. `admin:alice` or `owner`.
    pub actor: String,
}

/// Which records a listing returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListState {
    InProgress,
    Completed,
    Quarantined,
    /// In progress, lease run out, not yet taken over.
    LeaseExpired,
}

/// Where the previous page of a listing stopped (newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor {
    pub created_at: DateTime<Utc>,
    pub operation: String,
    pub key: String,
}

#[derive(Debug, Clone)]
pub struct ListQuery {
    pub state: Option<ListState>,
    pub operation: Option<OperationName>,
    /// Only records first claimed at least this long ago.
    pub older_than: Option<Duration>,
    pub limit: u32,
    pub after: Option<ListCursor>,
}

impl ListQuery {
    /// The longest `older_than` (a century): anything longer is the
    /// caller's mistake, not a question for the database (which cannot
    /// subtract it from now).
    pub const MAX_OLDER_THAN: Duration = Duration::from_secs(36_500 * 86_400);
}

impl ListState {
    /// The stored state this filter selects.
    pub fn stored(self) -> RecordState {
        match self {
            Self::InProgress | Self::LeaseExpired => RecordState::InProgress,
            Self::Completed => RecordState::Completed,
            Self::Quarantined => RecordState::Quarantined,
        }
    }
}
