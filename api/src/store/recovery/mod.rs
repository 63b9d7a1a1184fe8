//! The hard cases, written once for both dialects: steps, the owner's
//! quarantine, resolve, and listing stuck keys. Each transition is still one
//! guarded statement (a resolve that releases is a delete plus its audit
//! row, in one transaction).

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{bind_key, generic_sql, record, Sql};
use super::dialect::Dialect;
use super::{
    millis, scoped_from, Completion, KeyRecord, ListQuery, ListState, Resolver, StepDone,
    StoreResult,
};
use crate::domain::{OwnerTokenHash, ScopedKey, TenantId};

mod postgres;
mod sqlite;

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// Recovery's statements in one dialect; parameters 1-3 are the scoped key
/// unless noted.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// 4 owner hash, 5 step, 6 provider reference.
    pub record_step: &'static str,
    /// 4 owner hash, 5 reason.
    pub quarantine: &'static str,
    /// 4 owner hash (null: an admin), 5 outcome, 6 outcome hash, 7 actor.
    pub resolve_complete: &'static str,
    /// 4 owner hash (null: an admin), 5 actor, 6 reason; returns the
    /// deleted record's `attempt` and `history` (with the resolve event).
    pub resolve_release: &'static str,
    /// 4 attempt, 5 actor, 6 reason, 7 history.
    pub keep_release: &'static str,
    /// 1 tenant, 2 operation, 3 state, 4 lease expired only, 5 older than
    /// (ms), 6-8 cursor (time, operation, key), 9 limit.
    pub list: &'static str,
}

generic_sql!(impl {
    pub async fn record_step(&self, k: &ScopedKey, s: &StepDone<'_>) -> StoreResult<Option<KeyRecord>> {
        let q = bind_key(sqlx::query(D::RECOVERY.record_step), k)
            .bind(s.owner.0.to_vec())
            .bind(s.step.to_owned())
            .bind(s.provider_ref.to_owned());
        self.record(q).await
    }

    pub async fn quarantine(
        &self,
        k: &ScopedKey,
        owner: OwnerTokenHash,
        reason: &str,
    ) -> StoreResult<Option<KeyRecord>> {
        let q = bind_key(sqlx::query(D::RECOVERY.quarantine), k)
            .bind(owner.0.to_vec())
            .bind(reason.to_owned());
        self.record(q).await
    }

    pub async fn resolve_complete(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        let q = bind_key(sqlx::query(D::RECOVERY.resolve_complete), k)
            .bind(by.owner.map(|h| h.0.to_vec()))
            .bind(c.outcome_json.to_owned())
            .bind(c.outcome_hash.to_vec())
            .bind(by.actor.clone());
        self.record(q).await
    }

    pub async fn resolve_release(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        reason: Option<&str>,
    ) -> StoreResult<bool> {
        let mut tx = self.pool.begin().await?;
        let deleted = bind_key(sqlx::query(D::RECOVERY.resolve_release), k)
            .bind(by.owner.map(|h| h.0.to_vec()))
            .bind(by.actor.clone())
            .bind(reason.map(str::to_owned))
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = deleted else {
            return Ok(false);
        };
        let attempt: i32 = row.try_get("attempt")?;
        let history: String = row.try_get("history")?;
        bind_key(sqlx::query(D::RECOVERY.keep_release), k)
            .bind(attempt)
            .bind(by.actor.clone())
            .bind(reason.map(str::to_owned))
            .bind(history)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn list(&self, tenant: &TenantId, q: &ListQuery) -> StoreResult<Vec<(ScopedKey, KeyRecord)>> {
        let after = q.after.as_ref();
        let rows = sqlx::query(D::RECOVERY.list)
            .bind(tenant.as_str().to_owned())
            .bind(q.operation.as_ref().map(|o| o.as_str().to_owned()))
            .bind(q.state.map(|s| s.stored().as_str().to_owned()))
            .bind(q.state == Some(ListState::LeaseExpired))
            .bind(q.older_than.map(millis))
            .bind(after.map(|c| D::time_arg(c.created_at)))
            .bind(after.map(|c| c.operation.clone()))
            .bind(after.map(|c| c.key.clone()))
            .bind(i64::from(q.limit))
            .fetch_all(self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let operation: String = row.try_get("operation")?;
                let key: String = row.try_get("key")?;
                Ok((scoped_from(tenant, &operation, &key)?, record::<D>(row)?))
            })
            .collect()
    }
});
