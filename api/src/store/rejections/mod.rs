//! Recent `key_reused` refusals, for the dashboard: which key of which class
//! was refused when, and which fields differed (pointers, never values).
//! Each node's usage roll-up adds them in batches; pruning keeps them for as
//! long as usage rows and at most [`KEPT_PER_CLASS`] per class.
//!
//! Written once for both dialects (see `dialect`); only the SQL differs,
//! in `postgres.rs` and `sqlite.rs` beside this file.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{generic_sql, Sql};
use super::dialect::Dialect;
use super::{Store, StoreError, StoreResult};
use crate::domain::fingerprint::fields::Mismatch;
use crate::domain::{OperationName, TenantId};

mod postgres;
mod sqlite;

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// The newest refusals kept per tenant and class; older ones are pruned.
pub const KEPT_PER_CLASS: u32 = 200;

/// Rows added per statement (each row binds 5 values).
const BATCH: usize = 500;

/// One claim refused because its key was first used with another request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub tenant: TenantId,
    pub operation: OperationName,
    pub key: String,
    pub at: DateTime<Utc>,
    /// The fields that differ, when both requests' fields were known.
    pub mismatch: Option<Mismatch>,
}

/// The stored form of a [`Mismatch`].
#[derive(Serialize, Deserialize)]
struct StoredMismatch {
    pointers: Vec<String>,
    truncated: bool,
}

/// The statements in one dialect.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// 1 tenant, 2 class (null: every class), 3 limit; newest first.
    pub recent: &'static str,
    /// 1 before, 2 limit: rows older than `before`.
    pub prune_old: &'static str,
    /// 1 rows kept per class, 2 limit: rows past the newest of their class.
    pub prune_surplus: &'static str,
}

impl Store {
    /// Adds refusals, all or nothing.
    pub async fn add_rejections(&self, rows: &[Rejection]) -> StoreResult<()> {
        each_backend!(self, s => Sql::on(s.pool()).add_rejections(rows).await)
    }

    /// The tenant's newest refusals (of one class, or of all), newest first.
    pub async fn recent_rejections(
        &self,
        tenant: &TenantId,
        operation: Option<&OperationName>,
        limit: u32,
    ) -> StoreResult<Vec<Rejection>> {
        each_backend!(self, s => Sql::on(s.reader()).recent_rejections(tenant, operation, limit).await)
    }

    /// Deletes up to `limit` refusals older than `before` or past the
    /// newest [`KEPT_PER_CLASS`] of their class; how many it did.
    pub async fn prune_rejections(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        each_backend!(self, s => Sql::on(s.pool()).prune_rejections(before, limit).await)
    }
}

/// The roll-up's insert of `rows` refusals (5 values each), the same text in
/// both dialects.
pub(super) fn add_sql<D: Dialect>(rows: usize) -> String {
    format!(
        "insert into key_rejections (tenant, operation, key, at, mismatched) values {}",
        D::values_list(rows, 5)
    )
}

generic_sql!(impl {
    pub async fn add_rejections(&self, rows: &[Rejection]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        for batch in rows.chunks(BATCH) {
            let sql = add_sql::<D>(batch.len());
            let mut q = sqlx::query(&sql);
            for r in batch {
                let mismatched = r.mismatch.as_ref().map(|m| {
                    serde_json::json!(StoredMismatch {
                        pointers: m.pointers.clone(),
                        truncated: m.truncated,
                    })
                    .to_string()
                });
                q = q
                    .bind(r.tenant.as_str().to_owned())
                    .bind(r.operation.as_str().to_owned())
                    .bind(r.key.clone())
                    .bind(D::time_arg(r.at))
                    .bind(mismatched);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn recent_rejections(
        &self,
        tenant: &TenantId,
        operation: Option<&OperationName>,
        limit: u32,
    ) -> StoreResult<Vec<Rejection>> {
        let rows = sqlx::query(D::REJECTIONS.recent)
            .bind(tenant.as_str().to_owned())
            .bind(operation.map(|o| o.as_str().to_owned()))
            .bind(i64::from(limit))
            .fetch_all(self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let operation: String = row.try_get("operation")?;
                let mismatched: Option<String> = row.try_get("mismatched")?;
                let mismatch = mismatched
                    .map(|text| {
                        serde_json::from_str::<StoredMismatch>(&text)
                            .map(|m| Mismatch { pointers: m.pointers, truncated: m.truncated })
                            .map_err(|e| StoreError::Corrupt(format!("mismatched: {e}")))
                    })
                    .transpose()?;
                Ok(Rejection {
                    tenant: tenant.clone(),
                    operation: OperationName::parse(&operation)
                        .map_err(|_| StoreError::Corrupt(format!("operation {operation:?}")))?,
                    key: row.try_get("key")?,
                    at: D::time(row, "at")?,
                    mismatch,
                })
            })
            .collect()
    }

    pub async fn prune_rejections(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        let old = sqlx::query(D::REJECTIONS.prune_old)
            .bind(D::time_arg(before))
            .bind(i64::from(limit))
            .execute(self.pool)
            .await?;
        let surplus = sqlx::query(D::REJECTIONS.prune_surplus)
            .bind(i64::from(KEPT_PER_CLASS))
            .bind(i64::from(limit))
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&old) + D::rows_affected(&surplus))
    }
});
