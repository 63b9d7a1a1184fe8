//! What the lease watch reads: how many keys are stuck and since when, and
//! which expired leases to visit. Across all tenants: these are operators'
//! figures (tenants see their own on the dashboard and through `GET /v1/keys`).

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{scoped_from, PgStore, SqliteStore, Store, StoreResult};
use crate::domain::{ScopedKey, TenantId};

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

const PG_SUMMARY: &str = "\
    select 'in_progress' as kind, count(*) as n, min(claimed_at) as oldest, now() as now \
      from idempotency_key where state = 'in_progress' \
    union all \
    select 'lease_expired', count(*), min(lease_expires_at), now() \
      from idempotency_key where state = 'in_progress' and lease_expires_at <= now() \
       and expires_at > now() \
    union all \
    select 'quarantined', count(*), min(updated_at), now() \
      from idempotency_key where state = 'quarantined' and expires_at > now()";

const PG_EXPIRED: &str = "\
    select tenant, operation, key, attempt from idempotency_key \
     where state = 'in_progress' and lease_expires_at <= now() and expires_at > now() \
     order by lease_expires_at limit $1";

const SQLITE_SUMMARY: &str = "\
    select 'in_progress' as kind, count(*) as n, min(claimed_at) as oldest \
      from idempotency_key where state = 'in_progress' \
    union all \
    select 'lease_expired', count(*), min(lease_expires_at) \
      from idempotency_key where state = 'in_progress' and lease_expires_at <= ?1 \
       and expires_at > ?1 \
    union all \
    select 'quarantined', count(*), min(updated_at) \
      from idempotency_key where state = 'quarantined' and expires_at > ?1";

const SQLITE_EXPIRED: &str = "\
    select tenant, operation, key, attempt from idempotency_key \
     where state = 'in_progress' and lease_expires_at <= ?1 and expires_at > ?1 \
     order by lease_expires_at limit ?2";

fn kind(s: &str) -> &'static str {
    match s {
        "in_progress" => "in_progress",
        "lease_expired" => "lease_expired",
        _ => "quarantined",
    }
}

impl Store {
    pub async fn stuck_counts(&self) -> StoreResult<Vec<StuckCount>> {
        match self {
            Store::Postgres(s) => s.stuck_counts().await,
            Store::Sqlite(s) => s.stuck_counts().await,
        }
    }

    /// In-progress keys whose lease ran out (and still inside their window),
    /// oldest first, with the attempt each was seen at.
    pub async fn expired_leases(&self, limit: u32) -> StoreResult<Vec<(ScopedKey, i32)>> {
        match self {
            Store::Postgres(s) => s.expired_leases(limit).await,
            Store::Sqlite(s) => s.expired_leases(limit).await,
        }
    }
}

fn expired_row<R: Row>(row: &R) -> StoreResult<(ScopedKey, i32)>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> String: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> i32: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let tenant: String = row.try_get("tenant")?;
    let operation: String = row.try_get("operation")?;
    let key: String = row.try_get("key")?;
    let tenant = TenantId::parse(&tenant)
        .map_err(|_| super::StoreError::Corrupt(format!("tenant {tenant:?}")))?;
    Ok((
        scoped_from(&tenant, &operation, &key)?,
        row.try_get("attempt")?,
    ))
}

impl PgStore {
    pub async fn stuck_counts(&self) -> StoreResult<Vec<StuckCount>> {
        let rows = sqlx::query(PG_SUMMARY).fetch_all(self.pool()).await?;
        rows.iter()
            .map(|row| {
                Ok(StuckCount {
                    kind: kind(row.try_get("kind")?),
                    count: row.try_get("n")?,
                    oldest: row.try_get("oldest")?,
                    now: row.try_get("now")?,
                })
            })
            .collect()
    }

    pub async fn expired_leases(&self, limit: u32) -> StoreResult<Vec<(ScopedKey, i32)>> {
        let rows = sqlx::query(PG_EXPIRED)
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(expired_row).collect()
    }
}

impl SqliteStore {
    pub async fn stuck_counts(&self) -> StoreResult<Vec<StuckCount>> {
        let now = Utc::now();
        let rows = sqlx::query(SQLITE_SUMMARY)
            .bind(now.timestamp_millis())
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                let oldest: Option<i64> = row.try_get("oldest")?;
                Ok(StuckCount {
                    kind: kind(row.try_get("kind")?),
                    count: row.try_get("n")?,
                    oldest: oldest.and_then(DateTime::from_timestamp_millis),
                    now,
                })
            })
            .collect()
    }

    pub async fn expired_leases(&self, limit: u32) -> StoreResult<Vec<(ScopedKey, i32)>> {
        let rows = sqlx::query(SQLITE_EXPIRED)
            .bind(Utc::now().timestamp_millis())
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(expired_row).collect()
    }
}
