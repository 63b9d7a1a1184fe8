//! The most claimed keys of each class, per minute, for the dashboard: each
//! node's usage roll-up writes the top few keys of its per-minute summaries
//! (`domain::top_keys`) on every flush, one row per key, minute and node,
//! replaced by the node's newer figure (a floor of the key's claims, which
//! only grows); a read sums the nodes. Pruned with the usage rows.
//!
//! Written once for both dialects (see `dialect`); only the SQL differs,
//! in `postgres.rs` and `sqlite.rs` beside this file.

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{generic_sql, Sql};
use super::dialect::Dialect;
use super::{Store, StoreError, StoreResult};
use crate::domain::{OperationName, TenantId};

mod postgres;
mod sqlite;

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// Rows added per statement (each row binds 6 values).
const BATCH: usize = 500;

/// Claims of one key in one minute on one node, so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotKeyMinute {
    pub tenant: TenantId,
    pub operation: OperationName,
    pub minute: DateTime<Utc>,
    pub key: String,
    /// The node that counted them (a random name per process).
    pub node: String,
    pub claims: i64,
}

/// A key's claims summed over a span, for the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotKey {
    pub operation: OperationName,
    pub key: String,
    pub claims: i64,
}

/// The statements in one dialect.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// Followed by a `values` list of (tenant, operation, minute, key, node,
    /// claims).
    pub add: &'static str,
    /// What follows the list: keep the larger of the two floors.
    pub on_conflict: &'static str,
    /// 1 tenant, 2 since, 3 keys per class: each class's keys with the most
    /// claims since then, most first.
    pub top: &'static str,
    /// 1 before, 2 limit.
    pub prune: &'static str,
}

impl Store {
    /// Writes the nodes' figures for the keys' minutes, all or nothing
    /// (writing the same figures again changes nothing). A (tenant, class,
    /// minute, key, node) appears at most once per call.
    pub async fn add_hot_keys(&self, rows: &[HotKeyMinute]) -> StoreResult<()> {
        each_backend!(self, s => Sql::on(s.pool()).add_hot_keys(rows).await)
    }

    /// Per class, the `per_class` keys of the tenant with the most claims
    /// since `since`, most first.
    pub async fn hot_keys(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        per_class: u32,
    ) -> StoreResult<Vec<HotKey>> {
        each_backend!(self, s => Sql::on(s.reader()).hot_keys(tenant, since, per_class).await)
    }

    /// Deletes up to `limit` rows older than `before`; how many it did.
    pub async fn prune_hot_keys(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        each_backend!(self, s => Sql::on(s.pool()).prune_hot_keys(before, limit).await)
    }
}

/// The roll-up's upsert of `rows` hot-key rows (6 values each).
pub(super) fn add_sql<D: Dialect>(rows: usize) -> String {
    format!(
        "{}{}{}",
        D::HOT_KEYS.add,
        D::values_list(rows, 6),
        D::HOT_KEYS.on_conflict
    )
}

generic_sql!(impl {
    pub async fn add_hot_keys(&self, rows: &[HotKeyMinute]) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        for batch in rows.chunks(BATCH) {
            let sql = add_sql::<D>(batch.len());
            let mut q = sqlx::query(&sql);
            for r in batch {
                q = q
                    .bind(r.tenant.as_str().to_owned())
                    .bind(r.operation.as_str().to_owned())
                    .bind(D::time_arg(r.minute))
                    .bind(r.key.clone())
                    .bind(r.node.clone())
                    .bind(r.claims);
            }
            q.execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub async fn hot_keys(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        per_class: u32,
    ) -> StoreResult<Vec<HotKey>> {
        let rows = sqlx::query(D::HOT_KEYS.top)
            .bind(tenant.as_str().to_owned())
            .bind(D::time_arg(since))
            .bind(i64::from(per_class))
            .fetch_all(self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                let operation: String = row.try_get("operation")?;
                Ok(HotKey {
                    operation: OperationName::parse(&operation)
                        .map_err(|_| StoreError::Corrupt(format!("operation {operation:?}")))?,
                    key: row.try_get("key")?,
                    claims: row.try_get("claims")?,
                })
            })
            .collect()
    }

    pub async fn prune_hot_keys(&self, before: DateTime<Utc>, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(D::HOT_KEYS.prune)
            .bind(D::time_arg(before))
            .bind(i64::from(limit))
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done))
    }
});
