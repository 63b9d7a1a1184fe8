//! One look at a key, shared by every concurrent claim of it on this node:
//! Redis for a completed outcome, else the atomic insert, else a read of the
//! existing row as its own statement.

use std::sync::Arc;

use tokio::time::Instant;

use super::refusal::Refusal;
use super::Engine;
use crate::cache::FinalOutcome;
use crate::domain::quota::Exceeded;
use crate::domain::ScopedKey;
use crate::store::{KeyRecord, NewClaim};

/// What one look at a key found; shared by every claim that joined it.
#[derive(Clone)]
pub(crate) enum Look {
    /// Completed and inside its window (from Redis or the database).
    Final(Arc<FinalOutcome>),
    /// The row as the look's insert created it or its read found it.
    Row(Arc<KeyRecord>),
    /// The insert found a row the read did not: released in between.
    Vanished,
    /// The store could not answer (already logged).
    Unavailable,
    /// No record, and the tenant may not create one (`quota`).
    OverQuota(Exceeded),
}

impl Engine {
    /// Joins (or starts) this node's look at `k`, one that started no
    /// earlier than `since` if given.
    /// The look and when its flight started.
    pub(super) async fn look_shared(
        &self,
        k: &ScopedKey,
        since: Option<Instant>,
        claim: &NewClaim,
    ) -> (Look, Instant) {
        let (engine, key, claim) = (self.clone(), k.clone(), claim.clone());
        let (look, joined, started) = self
            .flights
            .run_timed(
                k,
                since,
                move || async move { engine.look(&key, &claim).await },
            )
            .await;
        if joined {
            self.metrics.coalesced_reads.inc();
        }
        (look.unwrap_or(Look::Unavailable), started)
    }

    /// One look at `k`: Redis, then the insert, then the read. A completed
    /// row read from the database fills the caches on the way out.
    async fn look(&self, k: &ScopedKey, claim: &NewClaim) -> Look {
        // Any Redis failure is simply a miss here: the database answers.
        if let Ok(Some(outcome)) = self.cache.shared(k).await {
            return Look::Final(outcome);
        }
        match self.look_in_store(k, claim).await {
            Ok(look) => look,
            Err(e) => {
                let _logged = Refusal::from(e);
                Look::Unavailable
            }
        }
    }

    async fn look_in_store(
        &self,
        k: &ScopedKey,
        claim: &NewClaim,
    ) -> Result<Look, crate::store::StoreError> {
        let started = Instant::now();
        // A tenant over its quota may not create a key: read instead.
        let over_quota = self.quotas.refuses(&k.tenant);
        if over_quota.is_none() {
            if let Some(row) = self.counted("insert_claim").insert_claim(k, claim).await? {
                let row = Arc::new(row);
                self.recent.remember(k, started, &row);
                return Ok(Look::Row(row));
            }
        }
        // Someone holds the key. Read it as its own statement (never in the
        // same statement as the insert: under concurrency that read can miss
        // the winner's row).
        let Some(row) = self.counted("find").find(k).await? else {
            return Ok(over_quota.map_or(Look::Vanished, Look::OverQuota));
        };
        // A tiered key: its outcome comes through the routing entry (and is
        // cached there). If the archive cannot answer, the row itself goes
        // on to `decide`, which still tells key reuse (422) from a replay;
        // a replay then answers 503, never a claim.
        let row = if row.routing.is_some() && row.outcome.is_none() && !row.is_expired() {
            match self.with_outcome(k, row.clone()).await {
                Ok(full) => full,
                Err(_) => return Ok(Look::Row(Arc::new(row))),
            }
        } else {
            row
        };
        let read_at = Instant::now();
        Ok(match FinalOutcome::of(&row) {
            Some(outcome) => {
                let outcome = Arc::new(outcome);
                if let Some(ttl) = FinalOutcome::ttl(&row, read_at) {
                    self.cache.fill(k, outcome.clone(), ttl);
                }
                Look::Final(outcome)
            }
            None => {
                let row = Arc::new(row);
                self.recent.remember(k, started, &row);
                Look::Row(row)
            }
        })
    }
}
