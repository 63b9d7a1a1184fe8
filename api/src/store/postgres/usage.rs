//! Usage rows and dashboard counts on Postgres.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{Postgres, QueryBuilder, Row};

use super::super::usage::{count_columns, count_values, counts_from_row};
use super::super::{HotCount, HotState, StoreError, StoreResult, UsageBucket, UsageMinute};
use super::PgStore;
use crate::domain::TenantId;

impl PgStore {
    pub async fn add_usage(&self, rows: &[UsageMinute]) -> StoreResult<()> {
        let columns = count_columns();
        let mut q = QueryBuilder::<Postgres>::new(format!(
            "insert into usage_minute (tenant, operation, minute, {}) ",
            columns.join(", ")
        ));
        q.push_values(rows, |mut b, row| {
            b.push_bind(row.tenant.as_str().to_owned())
                .push_bind(row.operation.as_str().to_owned())
                .push_bind(row.minute);
            for n in count_values(&row.counts) {
                b.push_bind(n);
            }
        });
        let sums: Vec<String> = columns
            .iter()
            .map(|c| format!("{c} = usage_minute.{c} + excluded.{c}"))
            .collect();
        q.push(format!(
            " on conflict (tenant, minute, operation) do update set {}, updated_at = now()",
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
            .map(|c| format!("sum({c})::bigint as {c}"))
            .collect();
        let sql = format!(
            "select operation, (floor(extract(epoch from minute) / $3) * $3)::bigint as bucket, {} \
             from usage_minute where tenant = $1 and minute >= $2 \
             group by operation, bucket order by operation, bucket",
            sums.join(", ")
        );
        let rows = sqlx::query(&sql)
            .bind(tenant.as_str().to_owned())
            .bind(since)
            .bind(bucket.as_secs().max(60) as i64)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let secs: i64 = row.try_get("bucket")?;
                Ok(UsageBucket {
                    operation: row.try_get("operation")?,
                    start: DateTime::from_timestamp(secs, 0)
                        .ok_or_else(|| StoreError::Corrupt("usage bucket".into()))?,
                    counts: counts_from_row(row)?,
                })
            })
            .collect()
    }

    pub async fn prune_usage(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(
            "delete from usage_minute where (tenant, minute, operation) in \
               (select tenant, minute, operation from usage_minute where minute < $1 limit $2)",
        )
        .bind(before)
        .bind(i64::from(limit))
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected())
    }

    pub async fn hot_counts(&self, tenant: &TenantId) -> StoreResult<Vec<HotCount>> {
        let rows = sqlx::query(concat!(
            "select operation, \
               case when",
            pg_gone!(),
            "then 'expired' \
                    when state = 'in_progress' and lease_expires_at <= now() then 'lease_expired' \
                    when segment is not null then 'archived' \
                    else state end as bucket, \
               count(*) as n, min(created_at) as oldest, now() as observed_at, \
               min(tier_at) filter (where state = 'completed' and segment is null \
                                      and tier_at <= now()) as tier_due, \
               min(expires_at) filter (where expires_at <= now()) as expired_since \
             from idempotency_key where tenant = $1 group by operation, bucket"
        ))
        .bind(tenant.as_str().to_owned())
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
                    oldest_created_at: row.try_get("oldest")?,
                    tier_due_since: row.try_get("tier_due")?,
                    expired_since: row.try_get("expired_since")?,
                    observed_at: row.try_get("observed_at")?,
                })
            })
            .collect()
    }
}
