//! Per-tenant quotas: the operator's overrides (`tenant_quota`) and what
//! each tenant stores as last measured (`tenant_storage`).
//!
//! A measurement is one pass over every live record, grouped by tenant,
//! written in one transaction with the zeroing of tenants that no longer
//! store anything, so a reader sees one whole measurement or the one
//! before. Running it on several nodes at once is harmless: each writes a
//! whole, correct snapshot and the last one stays. It is a scan, so it runs
//! on the workers' timer, never on the claim path.
//!
//! Written once for both dialects (see `dialect`); only the SQL differs,
//! in `postgres.rs` and `sqlite.rs` beside this file.

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{generic_sql, Sql};
use super::dialect::Dialect;
use super::{Store, StoreError, StoreResult};
use crate::domain::quota::{Limit, Stored};
use crate::domain::TenantId;

mod postgres;
mod sqlite;

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// The statements in one dialect.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// Every tenant's live records, outcome bytes in the database and in
    /// the archive, written over its `tenant_storage` row.
    pub measure: &'static str,
    /// Zeroes the rows of tenants that no longer store a live record.
    pub zero_missing: &'static str,
    pub all_storage: &'static str,
    pub all_quotas: &'static str,
    /// 1 tenant.
    pub storage_of: &'static str,
    /// 1 tenant.
    pub quota_of: &'static str,
    /// 1 tenant, 2 max keys, 3 max outcome bytes (each null: the default;
    /// -1: no limit).
    pub set_quota: &'static str,
    /// 1 tenant.
    pub clear_quota: &'static str,
}

/// A tenant's measured storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantStorage {
    pub tenant: TenantId,
    pub stored: Stored,
    pub measured_at: DateTime<Utc>,
}

/// A tenant's override, as the operator set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantQuota {
    pub tenant: TenantId,
    pub max_keys: Limit,
    pub max_outcome_bytes: Limit,
}

impl Store {
    /// Measures every tenant's storage now (see the module's comment).
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn measure_storage(&self) -> StoreResult<()> {
        each_backend!(self, s => Sql::on(s.pool()).measure_storage().await)
    }

    /// Every tenant's storage as last measured.
    pub async fn all_storage(&self) -> StoreResult<Vec<TenantStorage>> {
        each_backend!(self, s => Sql::on(s.pool()).all_storage().await)
    }

    /// Every override the operator set.
    pub async fn all_quotas(&self) -> StoreResult<Vec<TenantQuota>> {
        each_backend!(self, s => Sql::on(s.pool()).all_quotas().await)
    }

    /// One tenant's storage as last measured, if it ever was.
    pub async fn storage_of(&self, t: &TenantId) -> StoreResult<Option<TenantStorage>> {
        dispatch!(self, s => Sql::on(s.pool()).storage_of(t).await)
    }

    /// One tenant's override, if the operator set one.
    pub async fn quota_of(&self, t: &TenantId) -> StoreResult<Option<TenantQuota>> {
        dispatch!(self, s => Sql::on(s.pool()).quota_of(t).await)
    }

    /// Sets a tenant's override (both limits; `Limit::Default` follows the
    /// server's default).
    pub async fn set_quota(&self, q: &TenantQuota) -> StoreResult<()> {
        each_backend!(self, s => Sql::on(s.pool()).set_quota(q).await)
    }

    /// Removes a tenant's override; whether there was one.
    pub async fn clear_quota(&self, t: &TenantId) -> StoreResult<bool> {
        each_backend!(self, s => Sql::on(s.pool()).clear_quota(t).await)
    }
}

generic_sql!(impl {
    pub async fn measure_storage(&self) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(D::QUOTAS.measure).execute(&mut *tx).await?;
        sqlx::query(D::QUOTAS.zero_missing).execute(&mut *tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub async fn all_storage(&self) -> StoreResult<Vec<TenantStorage>> {
        let rows = sqlx::query(D::QUOTAS.all_storage).fetch_all(self.pool).await?;
        rows.iter().map(storage::<D>).collect()
    }

    pub async fn all_quotas(&self) -> StoreResult<Vec<TenantQuota>> {
        let rows = sqlx::query(D::QUOTAS.all_quotas).fetch_all(self.pool).await?;
        rows.iter().map(quota::<D>).collect()
    }

    pub async fn storage_of(&self, t: &TenantId) -> StoreResult<Option<TenantStorage>> {
        let row = sqlx::query(D::QUOTAS.storage_of)
            .bind(t.as_str().to_owned())
            .fetch_optional(self.pool)
            .await?;
        row.as_ref().map(storage::<D>).transpose()
    }

    pub async fn quota_of(&self, t: &TenantId) -> StoreResult<Option<TenantQuota>> {
        let row = sqlx::query(D::QUOTAS.quota_of)
            .bind(t.as_str().to_owned())
            .fetch_optional(self.pool)
            .await?;
        row.as_ref().map(quota::<D>).transpose()
    }

    pub async fn set_quota(&self, q: &TenantQuota) -> StoreResult<()> {
        sqlx::query(D::QUOTAS.set_quota)
            .bind(q.tenant.as_str().to_owned())
            .bind(q.max_keys.to_column())
            .bind(q.max_outcome_bytes.to_column())
            .execute(self.pool)
            .await?;
        Ok(())
    }

    pub async fn clear_quota(&self, t: &TenantId) -> StoreResult<bool> {
        let done = sqlx::query(D::QUOTAS.clear_quota)
            .bind(t.as_str().to_owned())
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }
});

fn tenant<D>(row: &D::Row) -> StoreResult<TenantId>
where
    D: Dialect,
    for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
    String: for<'r> Decode<'r, D> + Type<D>,
{
    let tenant: String = row.try_get("tenant")?;
    TenantId::parse(&tenant).map_err(|_| StoreError::Corrupt(format!("tenant {tenant:?}")))
}

fn count<D>(row: &D::Row, column: &str) -> StoreResult<u64>
where
    D: Dialect,
    for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
    i64: for<'r> Decode<'r, D> + Type<D>,
{
    let n: i64 = row.try_get(column)?;
    u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("{column} {n}")))
}

fn storage<D>(row: &D::Row) -> StoreResult<TenantStorage>
where
    D: Dialect,
    for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
    String: for<'r> Decode<'r, D> + Type<D>,
    i64: for<'r> Decode<'r, D> + Type<D>,
{
    Ok(TenantStorage {
        tenant: tenant::<D>(row)?,
        stored: Stored {
            keys: count::<D>(row, "keys")?,
            outcome_bytes: count::<D>(row, "outcome_bytes")?,
            archived_bytes: count::<D>(row, "archived_bytes")?,
        },
        measured_at: D::time(row, "measured_at")?,
    })
}

fn quota<D>(row: &D::Row) -> StoreResult<TenantQuota>
where
    D: Dialect,
    for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
    String: for<'r> Decode<'r, D> + Type<D>,
    i64: for<'r> Decode<'r, D> + Type<D>,
{
    let limit = |column: &str| -> StoreResult<Limit> {
        let v: Option<i64> = row.try_get(column)?;
        Limit::from_column(v).ok_or_else(|| StoreError::Corrupt(format!("{column} {v:?}")))
    };
    Ok(TenantQuota {
        tenant: tenant::<D>(row)?,
        max_keys: limit("max_keys")?,
        max_outcome_bytes: limit("max_outcome_bytes")?,
    })
}
