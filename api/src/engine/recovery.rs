//! The hard cases: recording steps, quarantining an ambiguous outcome,
//! resolving it, and listing the keys that need attention.

use super::Refusal;
use super::{Engine, OwnerCall};
use crate::domain::{Outcome, OwnerTokenHash, RecordState, ScopedKey, TenantId};
use crate::store::{Completion, KeyRecord, ListQuery, Resolver, StepDone};

/// The most steps one operation may record.
pub const MAX_STEPS: usize = 64;

impl Engine {
    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn record_step(
        &self,
        k: &ScopedKey,
        call: &OwnerCall<'_>,
        step: &str,
        provider_ref: &str,
    ) -> Result<KeyRecord, Refusal> {
        let done = StepDone {
            owner: OwnerTokenHash::of(call.token),
            step,
            provider_ref,
        };
        if let Some(record) = self.counted("record_step").record_step(k, &done).await? {
            return Ok(record);
        }
        let current = self.owned_by(k, call).await?;
        if current.state != RecordState::InProgress {
            return Err(not_in_progress(&current));
        }
        let steps: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&current.steps).unwrap_or_default();
        match steps.get(step) {
            Some(existing) if existing["provider_ref"] != provider_ref => {
                Err(Refusal::StepConflict)
            }
            None if steps.len() >= MAX_STEPS => Err(Refusal::TooManySteps),
            // The row changed between our two statements; the caller retries.
            _ => Err(Refusal::Unavailable),
        }
    }

    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn quarantine(
        &self,
        k: &ScopedKey,
        call: &OwnerCall<'_>,
        reason: &str,
    ) -> Result<KeyRecord, Refusal> {
        let owner = OwnerTokenHash::of(call.token);
        if let Some(record) = self
            .counted("quarantine")
            .quarantine(k, owner, reason)
            .await?
        {
            self.changed_everywhere(k, None).await;
            return Ok(record);
        }
        Err(self.why_not_in_progress(k, call).await)
    }

    /// Finishes a quarantined key with an outcome.
    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn resolve_complete(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        outcome: &Outcome,
    ) -> Result<KeyRecord, Refusal> {
        let completion = Completion {
            owner: by.owner.unwrap_or(OwnerTokenHash([0; 32])),
            outcome_json: &outcome.json,
            outcome_hash: outcome.canonical_hash,
        };
        let resolved = self
            .counted("resolve_complete")
            .resolve_complete(k, by, &completion);
        if let Some(record) = resolved.await? {
            self.changed_everywhere(k, None).await;
            self.metrics
                .outcome_bytes
                .observe(outcome.json.len() as f64);
            return Ok(record);
        }
        let current = self.resolvable_by(k, by).await?;
        match current.state {
            // A repeated resolve with the same outcome answers as the first.
            RecordState::Completed if current.outcome_hash == Some(outcome.canonical_hash) => {
                self.with_outcome(k, current).await
            }
            RecordState::Completed => Err(Refusal::AlreadyCompleted),
            _ => Err(Refusal::NotResolvable),
        }
    }

    /// Finishes a quarantined key by releasing it: the key may be claimed
    /// anew, and who released it is kept.
    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn resolve_release(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        reason: Option<&str>,
    ) -> Result<(), Refusal> {
        if self
            .counted("resolve_release")
            .resolve_release(k, by, reason)
            .await?
        {
            self.changed_everywhere(k, None).await;
            return Ok(());
        }
        let current = self.resolvable_by(k, by).await?;
        Err(match current.state {
            RecordState::Completed => Refusal::AlreadyCompleted,
            _ => Refusal::NotResolvable,
        })
    }

    /// Quarantines an expired lease still at the version `seen` (the lease
    /// watch, for classes whose policy forbids takeover). True if this call
    /// did it.
    pub async fn quarantine_expired_lease(
        &self,
        k: &ScopedKey,
        seen: crate::store::Version,
    ) -> Result<bool, Refusal> {
        let done = self
            .counted("quarantine_expired")
            .quarantine_expired(k, seen)
            .await?;
        if done.is_some() {
            self.changed_everywhere(k, None).await;
        }
        Ok(done.is_some())
    }

    pub async fn list(
        &self,
        tenant: &TenantId,
        q: &ListQuery,
    ) -> Result<Vec<(ScopedKey, KeyRecord)>, Refusal> {
        Ok(self.counted("list").list(tenant, q).await?)
    }

    async fn resolvable_by(&self, k: &ScopedKey, by: &Resolver) -> Result<KeyRecord, Refusal> {
        let current = self.current(k).await?;
        match by.owner {
            Some(owner) if current.owner_token_hash != owner => Err(Refusal::LeaseLost),
            _ => Ok(current),
        }
    }
}

fn not_in_progress(r: &KeyRecord) -> Refusal {
    match r.state {
        RecordState::Completed => Refusal::AlreadyCompleted,
        RecordState::Quarantined => Refusal::Quarantined,
        RecordState::InProgress => Refusal::Unavailable,
    }
}
