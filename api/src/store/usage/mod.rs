//! Usage rows and the read queries behind the dashboard: summed usage per
//! class and time bucket, and live record counts per class and state.
//!
//! Written once for both dialects (see `dialect`); only the SQL differs.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{generic_sql, Sql};
use super::dialect::Dialect;
use super::{Store, StoreError, StoreResult};
use crate::domain::usage::{UsageCounts, LATENCY_BUCKETS};
use crate::domain::{OperationName, TenantId};

mod postgres;
mod sqlite;

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// One node's counts for one tenant, class and minute, to be added to the
/// stored row.
#[derive(Debug, Clone)]
pub struct UsageMinute {
    pub tenant: TenantId,
    pub operation: OperationName,
    /// The start of the minute.
    pub minute: DateTime<Utc>,
    pub counts: UsageCounts,
}

/// Summed usage of one class over one time bucket.
#[derive(Debug, Clone)]
pub struct UsageBucket {
    pub operation: String,
    /// The start of the bucket (a multiple of its length since the epoch).
    pub start: DateTime<Utc>,
    pub counts: UsageCounts,
}

/// Where a stored record stands, as the storage page counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HotState {
    /// In progress with a live lease.
    InProgress,
    /// In progress, lease run out, not yet taken over.
    LeaseExpired,
    Quarantined,
    /// Completed, outcome in the database.
    Completed,
    /// Completed, outcome tiered to the archive (a routing entry).
    Archived,
    /// Past its replay window (and not held by a live lease): gone for every
    /// caller, still on disk until cleanup removes it or the key is reused.
    Expired,
}

impl HotState {
    pub const ALL: [HotState; 6] = [
        HotState::InProgress,
        HotState::LeaseExpired,
        HotState::Quarantined,
        HotState::Completed,
        HotState::Archived,
        HotState::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::InProgress => "in_progress",
            Self::LeaseExpired => "lease_expired",
            Self::Quarantined => "quarantined",
            Self::Completed => "completed",
            Self::Archived => "archived",
            Self::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

/// How many records of one class are in one [`HotState`], and the first
/// claim time of the oldest.
#[derive(Debug, Clone)]
pub struct HotCount {
    pub operation: String,
    pub state: HotState,
    pub count: i64,
    pub oldest_created_at: DateTime<Utc>,
    /// `Completed`: the oldest `tier_at` already passed (waiting for the
    /// tiering worker).
    pub tier_due_since: Option<DateTime<Utc>>,
    /// `Expired`: the oldest `expires_at` (waiting for cleanup).
    pub expired_since: Option<DateTime<Utc>>,
    /// The store's clock when it counted.
    pub observed_at: DateTime<Utc>,
}

/// The counted columns, in [`UsageCounts`] order.
pub(super) fn count_columns() -> Vec<String> {
    [
        "claims",
        "replays",
        "key_reuses",
        "collisions",
        "releases",
        "takeovers",
    ]
    .into_iter()
    .map(str::to_owned)
    .chain((0..LATENCY_BUCKETS).map(|i| format!("lat_{i:02}")))
    .collect()
}

/// The counts in [`count_columns`] order.
pub(super) fn count_values(c: &UsageCounts) -> impl Iterator<Item = i64> + '_ {
    [
        c.claims,
        c.replays,
        c.key_reuses,
        c.collisions,
        c.releases,
        c.takeovers,
    ]
    .into_iter()
    .chain(c.latency)
}

/// Reads the counted columns of a row (as summed by a query).
pub(super) fn counts_from_row<R: sqlx::Row>(row: &R) -> Result<UsageCounts, sqlx::Error>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    i64: for<'r> sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut c = UsageCounts {
        claims: row.try_get("claims")?,
        replays: row.try_get("replays")?,
        key_reuses: row.try_get("key_reuses")?,
        collisions: row.try_get("collisions")?,
        releases: row.try_get("releases")?,
        takeovers: row.try_get("takeovers")?,
        latency: [0; LATENCY_BUCKETS],
    };
    for (i, slot) in c.latency.iter_mut().enumerate() {
        *slot = row.try_get(format!("lat_{i:02}").as_str())?;
    }
    Ok(c)
}

/// Rows added per statement (each row binds 25 values).
pub(super) const USAGE_BATCH: usize = 200;

impl Store {
    /// Adds each minute's counts to its stored row (creating it if needed),
    /// all or nothing: one statement per [`USAGE_BATCH`] rows, in one
    /// transaction, so a flush that fails half-way has added nothing and may
    /// be retried whole without counting anything twice. A row's tenant,
    /// minute and class must appear once per call.
    pub async fn add_usage(&self, rows: &[UsageMinute]) -> StoreResult<()> {
        each_backend!(self, s => Sql::on(s.pool()).add_usage(rows).await)
    }

    /// A tenant's usage since `since`, summed per class and per `bucket`
    /// (aligned to multiples of its length since the epoch), oldest first.
    pub async fn usage_series(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        bucket: Duration,
    ) -> StoreResult<Vec<UsageBucket>> {
        each_backend!(self, s => Sql::on(s.reader()).usage_series(tenant, since, bucket).await)
    }

    /// Deletes up to `limit` usage rows older than `before`; how many it did.
    pub async fn prune_usage(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        each_backend!(self, s => Sql::on(s.pool()).prune_usage(before, limit).await)
    }

    /// A tenant's stored records counted per class and [`HotState`].
    pub async fn hot_counts(&self, tenant: &TenantId) -> StoreResult<Vec<HotCount>> {
        each_backend!(self, s => Sql::on(s.reader()).hot_counts(tenant).await)
    }
}

/// Usage's statements in one dialect.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// The start of the insert, up to the counted columns.
    pub insert: &'static str,
    /// Values each row gets besides its binds (SQLite has no column
    /// defaults for the row's own times).
    pub row_times: &'static str,
    /// What an existing row's `updated_at` becomes.
    pub updated_now: &'static str,
    /// How a counted column is summed (`{c}` stands for its name).
    pub sum: &'static str,
    /// 1 tenant, 2 since, 3 bucket length in seconds; the sums follow.
    pub series_head: &'static str,
    pub series_tail: &'static str,
    /// 1 before, 2 limit.
    pub prune: &'static str,
    /// 1 tenant.
    pub hot_counts: &'static str,
}

/// The flush's upsert of `rows` usage rows: each row's scope and counts are
/// added to what the row already holds. The store runs it, and the
/// statement catalogue lists it, from this one text.
pub(super) fn add_sql<D: Dialect>(rows: usize) -> String {
    let columns = count_columns();
    let mut next = 0;
    let mut arg = || {
        next += 1;
        format!("{}{next}", D::PARAMETER)
    };
    let values: Vec<String> = (0..rows)
        .map(|_| {
            let mut row: Vec<String> = (0..3).map(|_| arg()).collect();
            if !D::USAGE.row_times.is_empty() {
                row.push(D::USAGE.row_times.to_owned());
            }
            row.extend(columns.iter().map(|_| arg()));
            format!("({})", row.join(", "))
        })
        .collect();
    let sums: Vec<String> = columns
        .iter()
        .map(|c| format!("{c} = usage_minute.{c} + excluded.{c}"))
        .collect();
    format!(
        "{}{}) values {} on conflict (tenant, minute, operation) do update set {}, \
         updated_at = {}",
        D::USAGE.insert,
        columns.join(", "),
        values.join(", "),
        sums.join(", "),
        D::USAGE.updated_now
    )
}

/// The dashboard's usage series: 1 tenant, 2 since, 3 bucket length in
/// seconds; every counted column summed per class and bucket.
pub(super) fn series_sql<D: Dialect>() -> String {
    let sums: Vec<String> = count_columns()
        .iter()
        .map(|c| D::USAGE.sum.replace("{c}", c))
        .collect();
    format!(
        "{}{}{}",
        D::USAGE.series_head,
        sums.join(", "),
        D::USAGE.series_tail
    )
}

generic_sql!(impl {
    pub async fn add_usage(&self, rows: &[UsageMinute]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        for batch in rows.chunks(USAGE_BATCH) {
            self.add_usage_batch(batch, &mut tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn add_usage_batch(
        &self,
        rows: &[UsageMinute],
        tx: &mut sqlx::Transaction<'static, D>,
    ) -> StoreResult<()> {
        let sql = add_sql::<D>(rows.len());
        let mut q = sqlx::query(&sql);
        for row in rows {
            q = q
                .bind(row.tenant.as_str().to_owned())
                .bind(row.operation.as_str().to_owned())
                .bind(D::time_arg(row.minute));
            for n in count_values(&row.counts) {
                q = q.bind(n);
            }
        }
        q.execute(&mut **tx).await?;
        Ok(())
    }

    pub async fn usage_series(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        bucket: Duration,
    ) -> StoreResult<Vec<UsageBucket>> {
        let sql = series_sql::<D>();
        let rows = sqlx::query(&sql)
            .bind(tenant.as_str().to_owned())
            .bind(D::time_arg(since))
            .bind(bucket.as_secs().max(60) as i64)
            .fetch_all(self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(UsageBucket {
                    operation: row.try_get("operation")?,
                    start: D::time(row, "bucket")?,
                    counts: counts_from_row(row)?,
                })
            })
            .collect()
    }

    pub async fn prune_usage(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(D::USAGE.prune)
            .bind(D::time_arg(before))
            .bind(i64::from(limit))
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done))
    }

    pub async fn hot_counts(&self, tenant: &TenantId) -> StoreResult<Vec<HotCount>> {
        let rows = sqlx::query(D::USAGE.hot_counts)
            .bind(tenant.as_str().to_owned())
            .fetch_all(self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let bucket: String = row.try_get("bucket")?;
                Ok(HotCount {
                    operation: row.try_get("operation")?,
                    state: HotState::parse(&bucket)
                        .ok_or_else(|| StoreError::Corrupt(format!("state {bucket:?}")))?,
                    count: row.try_get("n")?,
                    oldest_created_at: D::time(row, "oldest")?,
                    tier_due_since: D::opt_time(row, "tier_due")?,
                    expired_since: D::opt_time(row, "expired_since")?,
                    observed_at: D::time(row, "observed_at")?,
                })
            })
            .collect()
    }
});
