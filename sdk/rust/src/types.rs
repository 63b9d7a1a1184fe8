//! The API's answers as types: outcomes, claim answers, records, list pages
//! and operation-class policies (docs/protocol.md, docs/recovery.md).
//! Timestamps are `DateTime<Utc>`; members the SDK does not model are kept
//! where the API says they may grow (history events, policies' extra members).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Problem;

/// What an effect produced: stored by complete and replayed as it was stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// Any HTTP status, 100–599 (a business failure such as 402 is an outcome).
    pub status_code: u16,
    /// Header name → value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    /// Any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// The resource the effect made (at most 1024 bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_id: Option<String>,
}

impl Outcome {
    /// An outcome with this status and nothing else.
    pub fn new(status_code: u16) -> Self {
        Self {
            status_code,
            headers: None,
            body: None,
            resource_id: None,
        }
    }

    /// With this body.
    pub fn body(mut self, body: Value) -> Self {
        self.body = Some(body);
        self
    }

    /// With this header added.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), value.into());
        self
    }

    /// With this resource id.
    pub fn resource_id(mut self, id: impl Into<String>) -> Self {
        self.resource_id = Some(id.into());
        self
    }
}

/// A step recorded on a key (docs/recovery.md).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StepRecord {
    /// The step's own effect id: the operation's, a dot, the step name.
    pub effect_id: String,
    /// The provider's reference, as recorded.
    pub provider_ref: String,
    /// When it was recorded.
    pub done_at: DateTime<Utc>,
}

/// Steps by name.
pub type Steps = BTreeMap<String, StepRecord>;

/// The attempt a `recovering` claim took over from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PreviousAttempt {
    /// Its attempt number.
    pub attempt: u64,
    /// When it claimed.
    pub claimed_at: DateTime<Utc>,
    /// When its lease ended.
    pub lease_expires_at: DateTime<Utc>,
}

/// A claim answer that makes you the owner.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OwnedClaim {
    /// True for `recovering` (you took over after the previous owner's lease
    /// ran out: check the provider before acting), false for `claimed`.
    #[serde(skip)]
    pub recovering: bool,
    /// The secret every owner call presents.
    pub owner_token: String,
    /// The fencing counter (1 for a new key).
    pub attempt: u64,
    /// The end of this attempt's lease.
    pub lease_expires_at: DateTime<Utc>,
    /// When the key's replay protection ends, as things stand.
    pub expires_at: DateTime<Utc>,
    /// Pass it to the provider as its idempotency key.
    pub effect_id: String,
    /// Steps already done (on `recovering`).
    #[serde(default)]
    pub steps: Steps,
    /// The attempt taken over (on `recovering`).
    #[serde(default)]
    pub previous_attempt: Option<PreviousAttempt>,
    /// The server's clock when it answered (its `Date` header), to measure
    /// the lease without trusting the local clock alone.
    #[serde(skip)]
    pub server_date: Option<DateTime<Utc>>,
}

/// A claim answer for a completed key: its stored outcome.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CompletedClaim {
    /// True: the outcome was stored earlier.
    #[serde(default)]
    pub replayed: bool,
    /// The attempt that completed it.
    pub attempt: u64,
    /// The key's effect id.
    pub effect_id: String,
    /// When the outcome was stored.
    pub completed_at: DateTime<Utc>,
    /// When the key's replay protection ends.
    pub expires_at: DateTime<Utc>,
    /// The stored outcome.
    pub outcome: Outcome,
}

/// A claim answer saying another attempt holds a live lease (409).
#[derive(Debug, Clone, PartialEq)]
pub struct InProgressClaim {
    /// The attempt holding the key.
    pub attempt: Option<u64>,
    /// The end of its lease.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When the key's replay protection ends.
    pub expires_at: Option<DateTime<Utc>>,
    /// The server's `Retry-After`.
    pub retry_after: Option<Duration>,
    /// The problem document.
    pub problem: Problem,
}

impl InProgressClaim {
    pub(crate) fn from_problem(problem: Problem, retry_after: Option<Duration>) -> Self {
        let time = |k: &str| {
            problem
                .str_member(k)
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .map(|t| t.with_timezone(&Utc))
        };
        Self {
            attempt: problem.u64_member("attempt"),
            lease_expires_at: time("lease_expires_at"),
            expires_at: time("expires_at"),
            retry_after,
            problem,
        }
    }
}

/// What a claim answered (`quarantined`, `key_reused` and the rest are errors).
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// `claimed` or `recovering`: you own the key.
    Owned(OwnedClaim),
    /// `completed`: the stored outcome.
    Completed(CompletedClaim),
    /// `in_progress`: someone else holds it.
    InProgress(InProgressClaim),
}

/// What a claim protects: the request (fingerprinted by the server) or a
/// precomputed fingerprint (64 lowercase hex). Do not mix the two on one key.
#[derive(Debug, Clone, PartialEq)]
pub enum Protected {
    /// The protected input, as JSON.
    Request(Value),
    /// A precomputed fingerprint.
    Fingerprint(String),
}

impl From<Value> for Protected {
    fn from(v: Value) -> Self {
        Self::Request(v)
    }
}

/// A key's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// An attempt owns the key.
    InProgress,
    /// The final outcome is stored.
    Completed,
    /// The outcome is ambiguous; claims are refused until a resolve.
    Quarantined,
    /// A state this SDK does not know.
    #[serde(other)]
    Unknown,
}

/// One event of a key's audit trail.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HistoryEvent {
    /// `claimed`, `taken_over`, `step`, `completed`, `quarantined`, `resolved`, `tiered`, …
    pub event: String,
    /// When.
    pub at: DateTime<Utc>,
    /// The attempt, where it applies.
    #[serde(default)]
    pub attempt: Option<u64>,
    /// The other members (`step`, `reason`, `by`, `resolution`, `segment`, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A key's record, as lookup and the owner calls answer it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct KeyRecord {
    /// The operation class.
    pub operation: String,
    /// The key (decoded).
    pub key: String,
    /// The state.
    pub state: KeyState,
    /// 64 lowercase hex characters.
    pub fingerprint: String,
    /// The current attempt.
    pub attempt: u64,
    /// The key's effect id.
    pub effect_id: String,
    /// `hot` or `archived`.
    pub tier: String,
    /// The first claim.
    pub created_at: DateTime<Utc>,
    /// When the current attempt claimed or took over.
    pub claimed_at: DateTime<Utc>,
    /// End of the current lease (`in_progress` only).
    #[serde(default)]
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When the outcome was stored (`completed` only).
    #[serde(default)]
    pub completed_at: Option<DateTime<Utc>>,
    /// Why it was quarantined.
    #[serde(default)]
    pub quarantine_reason: Option<String>,
    /// When the key's replay protection ends, as things stand.
    pub expires_at: DateTime<Utc>,
    /// Steps done, by name.
    #[serde(default)]
    pub steps: Steps,
    /// The audit trail, oldest first.
    #[serde(default)]
    pub history: Vec<HistoryEvent>,
    /// The stored outcome (`completed` only).
    #[serde(default)]
    pub outcome: Option<Outcome>,
}

/// One item of `GET /v1/keys` (no outcome, no history).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KeySummary {
    /// The operation class.
    pub operation: String,
    /// The key.
    pub key: String,
    /// The state.
    pub state: KeyState,
    /// The current attempt.
    pub attempt: u64,
    /// The key's effect id.
    pub effect_id: String,
    /// The first claim.
    pub created_at: DateTime<Utc>,
    /// The current attempt's claim.
    pub claimed_at: DateTime<Utc>,
    /// End of the current lease.
    #[serde(default)]
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When the outcome was stored.
    #[serde(default)]
    pub completed_at: Option<DateTime<Utc>>,
    /// When the key's replay protection ends.
    pub expires_at: DateTime<Utc>,
}

/// A page of `GET /v1/keys`, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KeyPage {
    /// The keys.
    pub items: Vec<KeySummary>,
    /// The next page's cursor; `None` on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// The filter of `GET /v1/keys`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// `in_progress`, `completed`, `quarantined` or `lease_expired`.
    pub state: Option<String>,
    /// Only this operation class.
    pub operation: Option<String>,
    /// Only keys first claimed at least this long ago (sent in whole seconds).
    pub older_than: Option<Duration>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<u32>,
    /// The previous page's `next_cursor`.
    pub cursor: Option<String>,
}

/// How a resolve finishes a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    /// Complete it with this outcome.
    Complete(Outcome),
    /// Release it (the key may be claimed anew), with an optional reason.
    Release {
        /// Kept with the release.
        reason: Option<String>,
    },
}

/// What a resolve did.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// The key is completed: its record.
    Completed(Box<KeyRecord>),
    /// The key was released.
    Released,
}

/// The fingerprint rules of an operation class: JSON pointers each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FingerprintRules {
    /// If not empty, only these values are protected.
    #[serde(default)]
    pub include: Vec<String>,
    /// These values are left out.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// These strings compare as decimals (`"25.00"` = `"25.0"`).
    #[serde(default)]
    pub decimal_fields: Vec<String>,
}

/// An operation class's policy. Durations are strings such as `"90s"`,
/// `"15m"`, `"1d"`. On `PUT`, a member left `None` takes its default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// How long a key is protected, from its first claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_window: Option<String>,
    /// How long a completed outcome stays in the database before tiering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_retention: Option<String>,
    /// The lease of a claim that sends no `lease_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// The largest lease a claim or heartbeat may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lease: Option<String>,
    /// The cap on a claim's `wait_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<String>,
    /// The largest outcome complete accepts, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_outcome_bytes: Option<u64>,
    /// `takeover` or `quarantine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_lease_expiry: Option<String>,
    /// The fingerprint rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<FingerprintRules>,
    /// Read-only: true when the class has no policy of its own.
    #[serde(default, skip_serializing)]
    pub default: bool,
}
