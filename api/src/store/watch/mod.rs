//! What the lease watch reads: how many keys are stuck and since when, and
//! which expired leases to visit. Across all tenants: these are operators'
//! figures (tenants see their own on the dashboard and through `GET /v1/keys`).

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{generic_sql, Sql};
use super::dialect::Dialect;
use super::{scoped_from, Store, StoreResult, Version};
use crate::domain::{OwnerTokenHash, ScopedKey, TenantId};

mod postgres;
mod sqlite;

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// One kind of stuck key: how many, and the oldest one's reference time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckCount {
    /// `in_progress` (since first claim of the attempt), `lease_expired`
    /// (since the lease ended) or `quarantined` (since it was quarantined).
    pub kind: &'static str,
    pub count: i64,
    pub oldest: Option<DateTime<Utc>>,
    /// The store's clock when counted.
    pub now: DateTime<Utc>,
}

/// The lease watch's statements in one dialect.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// Rows of (`kind`, `n`, `oldest`, `now`).
    pub summary: &'static str,
    /// 1 limit.
    pub expired: &'static str,
}

fn kind(s: &str) -> &'static str {
    match s {
        "in_progress" => "in_progress",
        "lease_expired" => "lease_expired",
        _ => "quarantined",
    }
}

impl Store {
    pub async fn stuck_counts(&self) -> StoreResult<Vec<StuckCount>> {
        each_backend!(self, s => Sql::on(s.reader()).stuck_counts().await)
    }

    /// In-progress keys whose lease ran out (and not gone) in classes that
    /// quarantine on lease expiry, fairly across tenants (each tenant's
    /// oldest first), with the version each was seen at.
    pub async fn expired_leases(&self, limit: u32) -> StoreResult<Vec<(ScopedKey, Version)>> {
        each_backend!(self, s => Sql::on(s.reader()).expired_leases(limit).await)
    }
}

fn expired_row<R: Row>(row: &R) -> StoreResult<(ScopedKey, Version)>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> String: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> i32: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Vec<u8>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let owner: Vec<u8> = row.try_get("owner_token_hash")?;
    let tenant: String = row.try_get("tenant")?;
    let operation: String = row.try_get("operation")?;
    let key: String = row.try_get("key")?;
    let tenant = TenantId::parse(&tenant)
        .map_err(|_| super::StoreError::Corrupt(format!("tenant {tenant:?}")))?;
    Ok((
        scoped_from(&tenant, &operation, &key)?,
        Version {
            attempt: row.try_get("attempt")?,
            owner: OwnerTokenHash(super::hash32(&owner)?),
        },
    ))
}

generic_sql!(impl {
    pub async fn stuck_counts(&self) -> StoreResult<Vec<StuckCount>> {
        let rows = sqlx::query(D::WATCH.summary).fetch_all(self.pool).await?;
        rows.iter()
            .map(|row| {
                Ok(StuckCount {
                    kind: kind(&row.try_get::<String, _>("kind")?),
                    count: row.try_get("n")?,
                    oldest: D::opt_time(row, "oldest")?,
                    now: D::time(row, "now")?,
                })
            })
            .collect()
    }

    pub async fn expired_leases(&self, limit: u32) -> StoreResult<Vec<(ScopedKey, Version)>> {
        let rows = sqlx::query(D::WATCH.expired)
            .bind(i64::from(limit))
            .fetch_all(self.pool)
            .await?;
        rows.iter().map(expired_row).collect()
    }
});
