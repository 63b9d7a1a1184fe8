//! Why the engine did not do what it was asked, in the protocol's own terms.
//!
//! The engine knows nothing of HTTP: `routes` gives each refusal its status
//! and problem `code`, the dashboard its sentence. Input the engine is
//! handed is already valid (the routes parse it), so every refusal here is
//! about the key's state or the store's health.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::MAX_STEPS;
use crate::domain::fingerprint::fields::Mismatch;
use crate::domain::quota::Exceeded;
use crate::store::{KeyRecord, StoreError};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The store, the cache or the archive could not answer (the cause is
    /// logged where it happened). Never a reason to call a key new.
    #[error("the store cannot answer right now")]
    Unavailable,
    /// No live record of the key: it never existed, belongs to another
    /// tenant (the tenant is part of the key) or is past its window.
    #[error("no live record of this key")]
    NotFound,
    /// The same key with a different fingerprint, and which fields differ
    /// when both requests' field digests are known under the same rules.
    #[error("the key was used with a different request")]
    KeyReused(Option<Mismatch>),
    /// The key waits for a resolve.
    #[error("the key is quarantined until it is resolved")]
    Quarantined,
    /// Another attempt holds a live lease.
    #[error("another attempt is in progress")]
    InProgress(Busy),
    /// The owner token is not the current attempt's.
    #[error("this owner token is not the key's current owner")]
    LeaseLost,
    /// The key is completed, with a different outcome than the one offered.
    #[error("the key was already completed with a different outcome")]
    AlreadyCompleted,
    /// The step was recorded before, with another provider reference.
    #[error("the step was already recorded with another provider reference")]
    StepConflict,
    /// The operation already holds [`MAX_STEPS`] steps.
    #[error("the operation already has the most steps it may record ({MAX_STEPS})")]
    TooManySteps,
    /// Resolve of a key that is neither quarantined nor (for an admin) held
    /// by an expired lease.
    #[error("only a quarantined key (or, for an admin, one whose lease ran out) can be resolved")]
    NotResolvable,
    /// A claim of a key with no live record, from a tenant that reached a
    /// quota on what it stores (see `quota`).
    #[error("{0}")]
    QuotaExceeded(Exceeded),
}

/// What a claim refused with `InProgress` learns about the attempt that
/// holds the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    /// Whole seconds until the lease ends, at least one.
    pub retry_after: Duration,
    pub attempt: i32,
    pub lease_expires_at: DateTime<Utc>,
    /// When the key's protection ends as things stand.
    pub expires_at: DateTime<Utc>,
}

impl Busy {
    pub(super) fn of(seen: &KeyRecord, retry_after: Duration) -> Self {
        Self {
            retry_after,
            attempt: seen.attempt,
            lease_expires_at: seen.lease_expires_at,
            expires_at: seen.protected_until(),
        }
    }
}

impl From<StoreError> for Refusal {
    fn from(e: StoreError) -> Self {
        match e {
            // Refused at once while the database is away: the breaker
            // logged when it opened; one line per refused call would flood.
            StoreError::Unreachable => tracing::debug!("store unreachable; refused at once"),
            e => tracing::error!(error = ?e, "store error"),
        }
        Self::Unavailable
    }
}
