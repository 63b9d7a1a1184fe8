//! Usage rows and dashboard counts on SQLite (times in epoch milliseconds).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{QueryBuilder, Row, Sqlite};

use super::super::usage::{count_columns, count_values, counts_from_row};
use super::super::{HotCount, HotState, StoreError, StoreResult, UsageBucket, UsageMinute};
use super::SqliteStore;
use crate::domain::TenantId;
use crate::store::dialect::Dialect;

impl SqliteStore {
    pub async fn add_usage(&self, rows: &[UsageMinute]) -> StoreResult<()> {
        let now = Utc::now().timestamp_millis();
        let columns = count_columns();
        let mut q = QueryBuilder::<Sqlite>::new(format!(
            "insert into usage_minute (tenant, operation, minute, created_at, updated_at, {}) ",
            columns.join(", ")
        ));
        q.push_values(rows, |mut b, row| {
            b.push_bind(row.tenant.as_str().to_owned())
                .push_bind(row.operation.as_str().to_owned())
                .push_bind(row.minute.timestamp_millis())
                .push_bind(now)
                .push_bind(now);
            for n in count_values(&row.counts) {
                b.push_bind(n);
            }
        });
        let sums: Vec<String> = columns
            .iter()
            .map(|c| format!("{c} = usage_minute.{c} + excluded.{c}"))
            .collect();
        q.push(format!(
            " on conflict (tenant, minute, operation) do update set {}, updated_at = excluded.updated_at",
            sums.join(", ")
        ));
        q.build().execute(&self.pool).await?;
        Ok(())
    }

    pub async fn usage_series(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        bucket: Duration,
    ) -> StoreResult<Vec<UsageBucket>> {
        let sums: Vec<String> = count_columns()
            .iter()
            .map(|c| format!("sum({c}) as {c}"))
            .collect();
        let sql = format!(
            "select operation, (minute / ?3) * ?3 as bucket, {} \
             from usage_minute where tenant = ?1 and minute >= ?2 \
             group by operation, bucket order by operation, bucket",
            sums.join(", ")
        );
        let rows = sqlx::query(&sql)
            .bind(tenant.as_str().to_owned())
            .bind(since.timestamp_millis())
            .bind(bucket.as_secs().max(60) as i64 * 1000)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(UsageBucket {
                    operation: row.try_get("operation")?,
                    start: Sqlite::time(row, "bucket")?,
                    counts: counts_from_row(row)?,
                })
            })
            .collect()
    }

    pub async fn prune_usage(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(
            "delete from usage_minute where (tenant, minute, operation) in \
               (select tenant, minute, operation from usage_minute where minute < ?1 limit ?2)",
        )
        .bind(before.timestamp_millis())
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    pub async fn hot_counts(&self, tenant: &TenantId) -> StoreResult<Vec<HotCount>> {
        let now = Utc::now();
        let rows = sqlx::query(concat!(
            "select operation, \
               case when",
            sqlite_gone!("?2"),
            "then 'expired' \
                    when state = 'in_progress' and lease_expires_at <= ?2 then 'lease_expired' \
                    when segment is not null then 'archived' \
                    else state end as bucket, \
               count(*) as n, min(created_at) as oldest, \
               min(tier_at) filter (where state = 'completed' and segment is null \
                                      and tier_at <= ?2) as tier_due, \
               min(expires_at) filter (where expires_at <= ?2) as expired_since \
             from idempotency_key where tenant = ?1 group by operation, bucket"
        ))
        .bind(tenant.as_str().to_owned())
        .bind(now.timestamp_millis())
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let bucket: String = row.try_get("bucket")?;
                Ok(HotCount {
                    operation: row.try_get("operation")?,
                    state: HotState::parse(&bucket)
                        .ok_or_else(|| StoreError::Corrupt(format!("state {bucket:?}")))?,
                    count: row.try_get("n")?,
                    oldest_created_at: Sqlite::time(row, "oldest")?,
                    tier_due_since: Sqlite::opt_time(row, "tier_due")?,
                    expired_since: Sqlite::opt_time(row, "expired_since")?,
                    observed_at: now,
                })
            })
            .collect()
    }
}
