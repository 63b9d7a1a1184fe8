//! SQLite statements for the hard cases: steps, quarantine, resolve, and
//! listing stuck keys — the same contract as the Postgres ones.

use chrono::Utc;
use sqlx::Row;

use super::{bind_key, record_from_row, SqliteStore};
use crate::domain::{OwnerTokenHash, ScopedKey, TenantId};
use crate::store::{
    millis, scoped_from, Completion, KeyRecord, ListQuery, ListState, Resolver, StepDone,
    StoreResult,
};

/// The JSON path of step `?6` (step names are `[a-z0-9._-]`, never quotes).
macro_rules! step_path {
    () => {
        " '$.\"' || ?6 || '\"' "
    };
}

macro_rules! has_step {
    () => {
        concat!(" (json_type(steps,", step_path!(), ") is not null) ")
    };
}

// ?5 owner hash, ?6 step, ?7 provider_ref
const RECORD_STEP: &str = concat!(
    "update idempotency_key set \
       steps = case when",
    has_step!(),
    "then steps else json_set(steps,",
    step_path!(),
    ", json_object('provider_ref', ?7, 'done_at', ",
    now_text!(),
    ")) end, history = case when",
    has_step!(),
    "then history else",
    history_with!("'event', 'step', 'attempt', attempt, 'step', ?6"),
    "end, updated_at = ?4 where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?5",
    live!(),
    "and (not",
    has_step!(),
    "or json_extract(steps, '$.\"' || ?6 || '\".provider_ref') = ?7) and (",
    has_step!(),
    "or (select count(*) from json_each(idempotency_key.steps)) < 64) returning",
    record!()
);

// ?5 owner hash, ?6 reason
const QUARANTINE: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = ?6, updated_at = ?4, ",
    append_history!("'event', 'quarantined', 'attempt', attempt, 'reason', ?6, 'by', 'owner'"),
    "where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?5",
    live!(),
    "returning",
    record!()
);

/// Quarantined, or (for an admin, `?5` null) in progress with its lease run
/// out; an owner (`?5` its token hash) resolves only its own quarantined key.
macro_rules! resolvable {
    () => {
        " and (state = 'quarantined' or (?5 is null and state = 'in_progress' \
           and lease_expires_at <= ?4)) and (?5 is null or owner_token_hash = ?5) "
    };
}

// ?5 owner hash or null, ?6 outcome, ?7 outcome hash, ?8 actor
const RESOLVE_COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = ?6, outcome_hash = ?7, \
       completed_at = ?4, updated_at = ?4,",
    window_after_completion!(),
    ",",
    append_history!("'event', 'resolved', 'resolution', 'completed', 'attempt', attempt, 'by', ?8"),
    "where",
    scoped!(),
    resolvable!(),
    live!(),
    "returning",
    record!()
);

// ?5 owner hash or null, ?6 actor, ?7 reason
const RESOLVE_RELEASE: &str = concat!(
    "delete from idempotency_key where",
    scoped!(),
    resolvable!(),
    live!(),
    "returning attempt,",
    history_with!(
        "'event', 'resolved', 'resolution', 'released', 'attempt', attempt, 'by', ?6, 'reason', ?7"
    ),
    "as history"
);

const KEEP_RELEASE: &str = "insert into key_release \
     (tenant, operation, key, released_at, attempt, actor, reason, history, created_at) \
     values (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?4)";

// ?1 tenant, ?2 operation, ?3 state, ?4 now, ?5 lease expired only, ?6 older
// than (ms), ?7..?9 cursor, ?10 limit
const LIST: &str = concat!(
    "select operation, key,",
    record!(),
    "from idempotency_key where tenant = ?1 \
       and (?2 is null or operation = ?2) \
       and (?3 is null or state = ?3) \
       and (not ?5 or lease_expires_at <= ?4) \
       and (?6 is null or created_at <= ?4 - ?6) \
       and not",
    sqlite_gone!("?4"),
    "and (?7 is null or (created_at, operation, key) < (?7, ?8, ?9)) \
     order by created_at desc, operation desc, key desc limit ?10"
);

impl SqliteStore {
    pub async fn record_step(
        &self,
        k: &ScopedKey,
        s: &StepDone<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = bind_key(sqlx::query(RECORD_STEP), k, now)
            .bind(s.owner.0.to_vec())
            .bind(s.step.to_owned())
            .bind(s.provider_ref.to_owned());
        self.fetch_record(q, now).await
    }

    pub async fn quarantine(
        &self,
        k: &ScopedKey,
        owner: OwnerTokenHash,
        reason: &str,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = bind_key(sqlx::query(QUARANTINE), k, now)
            .bind(owner.0.to_vec())
            .bind(reason.to_owned());
        self.fetch_record(q, now).await
    }

    pub async fn resolve_complete(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = bind_key(sqlx::query(RESOLVE_COMPLETE), k, now)
            .bind(by.owner.map(|h| h.0.to_vec()))
            .bind(c.outcome_json.to_owned())
            .bind(c.outcome_hash.to_vec())
            .bind(by.actor.clone());
        self.fetch_record(q, now).await
    }

    pub async fn resolve_release(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        reason: Option<&str>,
    ) -> StoreResult<bool> {
        let now = Utc::now();
        let mut tx = self.pool.begin().await?;
        let deleted = bind_key(sqlx::query(RESOLVE_RELEASE), k, now)
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
        bind_key(sqlx::query(KEEP_RELEASE), k, now)
            .bind(attempt)
            .bind(by.actor.clone())
            .bind(reason.map(str::to_owned))
            .bind(history)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn list(
        &self,
        tenant: &TenantId,
        q: &ListQuery,
    ) -> StoreResult<Vec<(ScopedKey, KeyRecord)>> {
        let now = Utc::now();
        let after = q.after.as_ref();
        let rows = sqlx::query(LIST)
            .bind(tenant.as_str().to_owned())
            .bind(q.operation.as_ref().map(|o| o.as_str().to_owned()))
            .bind(q.state.map(|s| s.stored().as_str()))
            .bind(now.timestamp_millis())
            .bind(q.state == Some(ListState::LeaseExpired))
            .bind(q.older_than.map(millis))
            .bind(after.map(|c| c.created_at.timestamp_millis()))
            .bind(after.map(|c| c.operation.clone()))
            .bind(after.map(|c| c.key.clone()))
            .bind(i64::from(q.limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let operation: String = row.try_get("operation")?;
                let key: String = row.try_get("key")?;
                Ok((
                    scoped_from(tenant, &operation, &key)?,
                    record_from_row(row, now)?,
                ))
            })
            .collect()
    }
}
