//! The owner's calls: complete, heartbeat, release.
//!
//! Each is one compare-and-swap on (state = in_progress, owner token hash).
//! Ownership is the token, checked atomically: an owner whose lease ran out
//! but was not yet taken over may still complete. When the statement matches
//! nothing, a read tells the caller why — without ever changing the row.
//!
//! A completion or release wakes this node's claims waiting on the key at
//! once; other nodes waiting on it hear of it from the database (Postgres
//! key events, sent only when some node waits).

use std::time::Duration;

use super::Engine;
use super::Refusal;
use crate::domain::{Outcome, OwnerTokenHash, RecordState, ScopedKey};
use crate::store::{Completion, KeyRecord};

/// The owner token as presented by the caller.
pub struct OwnerCall<'a> {
    pub token: &'a str,
}

impl OwnerCall<'_> {
    fn hash(&self) -> OwnerTokenHash {
        OwnerTokenHash::of(self.token)
    }
}

impl Engine {
    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn complete(
        &self,
        k: &ScopedKey,
        call: &OwnerCall<'_>,
        outcome: &Outcome,
    ) -> Result<KeyRecord, Refusal> {
        let completion = Completion {
            owner: call.hash(),
            outcome_json: &outcome.json,
            outcome_hash: outcome.canonical_hash,
        };
        if let Some(record) = self.counted("complete").complete(k, &completion).await? {
            self.changed_everywhere(k, Some(record.waited)).await;
            self.metrics
                .outcome_bytes
                .observe(outcome.json.len() as f64);
            return Ok(record);
        }
        let current = self.owned_by(k, call).await?;
        match current.state {
            RecordState::Completed if current.outcome_hash == Some(outcome.canonical_hash) => {
                self.with_outcome(k, current).await
            }
            RecordState::Completed => Err(Refusal::AlreadyCompleted),
            RecordState::Quarantined => Err(Refusal::Quarantined),
            // The row changed between our two statements; the caller retries.
            RecordState::InProgress => Err(Refusal::Unavailable),
        }
    }

    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn heartbeat(
        &self,
        k: &ScopedKey,
        call: &OwnerCall<'_>,
        lease: Option<Duration>,
    ) -> Result<KeyRecord, Refusal> {
        let beat = self.counted("heartbeat").heartbeat(k, call.hash(), lease);
        if let Some(record) = beat.await? {
            return Ok(record);
        }
        Err(self.why_not_in_progress(k, call).await)
    }

    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn release(&self, k: &ScopedKey, call: &OwnerCall<'_>) -> Result<(), Refusal> {
        // No `evict` first: release deletes only an in-progress record, and
        // only completed outcomes are ever cached. Its key event still drops
        // any in-process copy on every node.
        if self.counted("release").release(k, call.hash()).await? {
            self.changed_everywhere(k, None).await;
            return Ok(());
        }
        Err(self.why_not_in_progress(k, call).await)
    }

    /// The live record, or 404 — for a key that never existed, that belongs
    /// to another tenant (the tenant is part of the key) or is past its window.
    pub async fn current(&self, k: &ScopedKey) -> Result<KeyRecord, Refusal> {
        match self.counted("find").find(k).await? {
            Some(record) if !record.is_expired() => Ok(record),
            _ => Err(Refusal::NotFound),
        }
    }

    pub(super) async fn owned_by(
        &self,
        k: &ScopedKey,
        call: &OwnerCall<'_>,
    ) -> Result<KeyRecord, Refusal> {
        let current = self.current(k).await?;
        if current.owner_token_hash != call.hash() {
            return Err(Refusal::LeaseLost);
        }
        Ok(current)
    }

    pub(super) async fn why_not_in_progress(&self, k: &ScopedKey, call: &OwnerCall<'_>) -> Refusal {
        match self.owned_by(k, call).await {
            Err(e) => e,
            Ok(r) => match r.state {
                RecordState::Completed => Refusal::AlreadyCompleted,
                RecordState::Quarantined => Refusal::Quarantined,
                RecordState::InProgress => Refusal::Unavailable,
            },
        }
    }
}
