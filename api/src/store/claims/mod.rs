//! The claim path, written once for both dialects: the atomic insert, the
//! read, and the compare-and-swap transitions (renew, take over, quarantine
//! an expired lease, complete, heartbeat, release), plus the one decoder of
//! a record row. Each dialect only supplies its SQL text
//! ([`Statements`]); parameters are numbered the same in both.

use std::time::Duration;

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Type};

use super::dialect::Dialect;
use super::{
    hash32, millis, opt_hash32, routing_from_parts, window, Completion, KeyRecord, NewClaim,
    StoreError, StoreResult, Version,
};
use crate::domain::{Fingerprint, OwnerTokenHash, RecordState, ScopedKey};

pub(super) mod batch;
mod postgres;
mod sqlite;

pub use postgres::sql as postgres_sql;
pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// The claim path's statements in one dialect. Every one takes the scoped
/// key as parameters 1-3; the rest are documented beside each dialect's
/// text. Those that return a record return the columns [`record`] reads,
/// `observed_at` (the database's clock) included.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// 4 fingerprint, 5 owner hash, 6 lease ms, 7 window ms, 8 tier-after
    /// ms, 9 rules digest (null: the defaults). No row: the key is taken.
    pub insert_claim: &'static str,
    pub find: &'static str,
    /// As `insert_claim`, over a record that is gone.
    pub renew_expired: &'static str,
    /// 4 seen attempt, 5 new owner hash, 6 lease ms, 7 seen owner hash.
    pub take_over: &'static str,
    /// 4 seen attempt, 5 seen owner hash.
    pub quarantine_expired: &'static str,
    /// 4 owner hash, 5 outcome, 6 outcome hash.
    pub complete: &'static str,
    /// 4 owner hash, 5 lease ms or null (the attempt's own).
    pub heartbeat: &'static str,
    /// 4 owner hash; no rows returned.
    pub release: &'static str,
}

/// The store's statements, run on a pool of either dialect.
pub struct Sql<'a, D: Database> {
    pub(super) pool: &'a Pool<D>,
}

impl<'a, D: Database> Sql<'a, D> {
    pub fn on(pool: &'a Pool<D>) -> Self {
        Self { pool }
    }
}

pub(super) type Query<'q, D> = sqlx::query::Query<'q, D, <D as Database>::Arguments<'q>>;

/// What the generic bodies need of a dialect's driver: running statements on
/// its pool and connections, and binding and reading the column types the
/// record has. Written out on every generic `impl` (a where-clause is not
/// implied through a trait).
macro_rules! generic_sql {
    (impl { $($body:tt)* }) => {
        generic_sql!(impl<'a, D> Sql<'a, D> { $($body)* });
    };
    (impl<$($g:tt),*> $ty:ty { $($body:tt)* }) => {
        impl<$($g),*> $ty
        where
            D: Dialect,
            for<'c> &'c mut <D as Database>::Connection: Executor<'c, Database = D>,
            for<'q> <D as Database>::Arguments<'q>: IntoArguments<'q, D>,
            for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
            String: for<'q> Encode<'q, D> + for<'r> Decode<'r, D> + Type<D>,
            Vec<u8>: for<'q> Encode<'q, D> + for<'r> Decode<'r, D> + Type<D>,
            i64: for<'q> Encode<'q, D> + for<'r> Decode<'r, D> + Type<D>,
            i32: for<'q> Encode<'q, D> + for<'r> Decode<'r, D> + Type<D>,
            bool: for<'q> Encode<'q, D> + for<'r> Decode<'r, D> + Type<D>,
            Option<String>: for<'q> Encode<'q, D> + Type<D>,
            Option<Vec<u8>>: for<'q> Encode<'q, D> + Type<D>,
            Option<i64>: for<'q> Encode<'q, D> + Type<D>,
            Option<<D as Dialect>::Time>: for<'q> Encode<'q, D> + Type<D>,
        { $($body)* }
    };
}
pub(super) use generic_sql;

generic_sql!(impl {
    /// Whether the database answers.
    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("select 1").execute(self.pool).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn insert_claim(&self, k: &ScopedKey, c: &NewClaim) -> StoreResult<Option<KeyRecord>> {
        self.record(new_claim(sqlx::query(D::CLAIMS.insert_claim), k, c)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn find(&self, k: &ScopedKey) -> StoreResult<Option<KeyRecord>> {
        self.record(bind_key(sqlx::query(D::CLAIMS.find), k)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn renew_expired(&self, k: &ScopedKey, c: &NewClaim) -> StoreResult<Option<KeyRecord>> {
        self.record(new_claim(sqlx::query(D::CLAIMS.renew_expired), k, c)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn take_over(
        &self,
        k: &ScopedKey,
        seen: Version,
        owner: OwnerTokenHash,
        lease: Duration,
    ) -> StoreResult<Option<KeyRecord>> {
        let q = bind_key(sqlx::query(D::CLAIMS.take_over), k)
            .bind(seen.attempt)
            .bind(owner.0.to_vec())
            .bind(millis(lease))
            .bind(seen.owner.0.to_vec());
        self.record(q).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn quarantine_expired(&self, k: &ScopedKey, seen: Version) -> StoreResult<Option<KeyRecord>> {
        let q = bind_key(sqlx::query(D::CLAIMS.quarantine_expired), k)
            .bind(seen.attempt)
            .bind(seen.owner.0.to_vec());
        self.record(q).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn complete(&self, k: &ScopedKey, c: &Completion<'_>) -> StoreResult<Option<KeyRecord>> {
        self.record(completion(sqlx::query(D::CLAIMS.complete), k, c)).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn heartbeat(
        &self,
        k: &ScopedKey,
        owner: OwnerTokenHash,
        lease: Option<Duration>,
    ) -> StoreResult<Option<KeyRecord>> {
        let q = bind_key(sqlx::query(D::CLAIMS.heartbeat), k)
            .bind(owner.0.to_vec())
            .bind(lease.map(millis));
        self.record(q).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn release(&self, k: &ScopedKey, owner: OwnerTokenHash) -> StoreResult<bool> {
        let done = bind_key(sqlx::query(D::CLAIMS.release), k)
            .bind(owner.0.to_vec())
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    /// Runs a statement that returns at most one record.
    pub(super) async fn record(&self, q: Query<'_, D>) -> StoreResult<Option<KeyRecord>> {
        q.fetch_optional(self.pool)
            .await?
            .map(|row| record::<D>(&row))
            .transpose()
    }
});

/// Parameters 1-3 of every statement: the scoped key.
pub(super) fn bind_key<'q, D>(q: Query<'q, D>, k: &ScopedKey) -> Query<'q, D>
where
    D: Database,
    String: for<'e> Encode<'e, D> + Type<D>,
{
    q.bind(k.tenant.as_str().to_owned())
        .bind(k.operation.as_str().to_owned())
        .bind(k.key.as_str().to_owned())
}

/// The parameters of a completion: the key, the owner hash, the outcome
/// and its hash.
pub(super) fn completion<'q, D>(q: Query<'q, D>, k: &ScopedKey, c: &Completion<'_>) -> Query<'q, D>
where
    D: Database,
    String: for<'e> Encode<'e, D> + Type<D>,
    Vec<u8>: for<'e> Encode<'e, D> + Type<D>,
{
    bind_key(q, k)
        .bind(c.owner.0.to_vec())
        .bind(c.outcome_json.to_owned())
        .bind(c.outcome_hash.to_vec())
}

pub(super) fn new_claim<'q, D>(q: Query<'q, D>, k: &ScopedKey, c: &NewClaim) -> Query<'q, D>
where
    D: Database,
    String: for<'e> Encode<'e, D> + Type<D>,
    Vec<u8>: for<'e> Encode<'e, D> + Type<D>,
    i64: for<'e> Encode<'e, D> + Type<D>,
    Option<Vec<u8>>: for<'e> Encode<'e, D> + Type<D>,
    Option<String>: for<'e> Encode<'e, D> + Type<D>,
{
    bind_key(q, k)
        .bind(c.fingerprint.as_bytes().to_vec())
        .bind(c.owner.0.to_vec())
        .bind(millis(c.lease))
        .bind(millis(c.replay_window))
        .bind(millis(c.tier_after))
        .bind(c.rules_digest.map(|d| d.to_vec()))
        .bind(c.field_digests.clone())
}

/// A record from a row of either dialect.
pub(super) fn record<D>(row: &D::Row) -> StoreResult<KeyRecord>
where
    D: Dialect,
    for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
    String: for<'r> Decode<'r, D> + Type<D>,
    Vec<u8>: for<'r> Decode<'r, D> + Type<D>,
    i64: for<'r> Decode<'r, D> + Type<D>,
    i32: for<'r> Decode<'r, D> + Type<D>,
    bool: for<'r> Decode<'r, D> + Type<D>,
{
    let state: String = row.try_get("state")?;
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    let owner: Vec<u8> = row.try_get("owner_token_hash")?;
    let outcome_hash: Option<Vec<u8>> = row.try_get("outcome_hash")?;
    Ok(KeyRecord {
        state: RecordState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("state {state:?}")))?,
        fingerprint: Fingerprint::from_slice(&fingerprint)
            .ok_or_else(|| StoreError::Corrupt("fingerprint length".into()))?,
        attempt: row.try_get("attempt")?,
        owner_token_hash: OwnerTokenHash(hash32(&owner)?),
        claimed_at: D::time(row, "claimed_at")?,
        lease_expires_at: D::time(row, "lease_expires_at")?,
        outcome: row.try_get("outcome")?,
        steps: row.try_get("steps")?,
        history: row.try_get("history")?,
        outcome_hash: outcome_hash.as_deref().map(hash32).transpose()?,
        completed_at: D::opt_time(row, "completed_at")?,
        quarantine_reason: row.try_get("quarantine_reason")?,
        expires_at: D::time(row, "expires_at")?,
        replay_window: window(row.try_get("window_ms")?)?,
        created_at: D::time(row, "created_at")?,
        updated_at: D::time(row, "updated_at")?,
        observed_at: D::time(row, "observed_at")?,
        routing: routing_from_parts(
            row.try_get("segment")?,
            row.try_get("segment_offset")?,
            row.try_get("segment_len")?,
            row.try_get("segment_sha256")?,
            D::opt_time(row, "tiered_at")?,
        )?,
        rules_digest: opt_hash32(row.try_get("rules_digest")?)?,
        field_digests: row.try_get("field_digests")?,
        waited: match row.try_get("waited") {
            Ok(waited) => waited,
            Err(sqlx::Error::ColumnNotFound(_)) => false,
            Err(e) => return Err(e.into()),
        },
    })
}
