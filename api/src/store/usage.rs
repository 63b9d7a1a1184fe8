//! Usage rows and the read queries behind the dashboard: summed usage per
//! class and time bucket, and live record counts per class and state.
//!
//! The SQL is in each backend's `usage` module; this file holds the shared
//! types and the dispatch.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Store, StoreResult};
use crate::domain::usage::{UsageCounts, LATENCY_BUCKETS};
use crate::domain::{OperationName, TenantId};

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
    /// Adds each minute's counts to its stored row (creating it if needed).
    /// One statement per [`USAGE_BATCH`] rows; a row's tenant, minute and
    /// class must appear once per call.
    pub async fn add_usage(&self, rows: &[UsageMinute]) -> StoreResult<()> {
        for batch in rows.chunks(USAGE_BATCH) {
            match self {
                Store::Postgres(s) => s.add_usage(batch).await?,
                Store::Sqlite(s) => s.add_usage(batch).await?,
            }
        }
        Ok(())
    }

    /// A tenant's usage since `since`, summed per class and per `bucket`
    /// (aligned to multiples of its length since the epoch), oldest first.
    pub async fn usage_series(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        bucket: Duration,
    ) -> StoreResult<Vec<UsageBucket>> {
        match self {
            Store::Postgres(s) => s.usage_series(tenant, since, bucket).await,
            Store::Sqlite(s) => s.usage_series(tenant, since, bucket).await,
        }
    }

    /// Deletes up to `limit` usage rows older than `before`; how many it did.
    pub async fn prune_usage(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        match self {
            Store::Postgres(s) => s.prune_usage(before, limit).await,
            Store::Sqlite(s) => s.prune_usage(before, limit).await,
        }
    }

    /// A tenant's stored records counted per class and [`HotState`].
    pub async fn hot_counts(&self, tenant: &TenantId) -> StoreResult<Vec<HotCount>> {
        match self {
            Store::Postgres(s) => s.hot_counts(tenant).await,
            Store::Sqlite(s) => s.hot_counts(tenant).await,
        }
    }
}
