//! Operation-class policies: one row per (tenant, operation) that an admin
//! has set, holding the policy's canonical JSON text. A class with no row
//! uses the defaults.
//!
//! The store keeps text and does not interpret it; the engine parses it with
//! the same checks as a `PUT`. Each call is one statement, tenant first.

use chrono::{DateTime, Utc};
use sqlx::Row;

use super::{PgStore, SqliteStore, Store, StoreError, StoreResult};
use crate::domain::{OperationName, TenantId};

/// A stored policy, as written.
#[derive(Debug, Clone)]
pub struct StoredClass {
    /// The policy's canonical JSON text.
    pub policy_json: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Store {
    pub async fn find_class(
        &self,
        t: &TenantId,
        op: &OperationName,
    ) -> StoreResult<Option<StoredClass>> {
        match self {
            Store::Postgres(s) => s.breaker().guard(s.find_class(t, op)).await,
            Store::Sqlite(s) => s.find_class(t, op).await,
        }
    }

    /// Inserts or replaces the class's policy.
    pub async fn put_class(
        &self,
        t: &TenantId,
        op: &OperationName,
        policy_json: &str,
    ) -> StoreResult<StoredClass> {
        match self {
            Store::Postgres(s) => s.put_class(t, op, policy_json).await,
            Store::Sqlite(s) => s.put_class(t, op, policy_json).await,
        }
    }

    /// Every class of the tenant with a stored policy, by operation name.
    pub async fn list_classes(&self, t: &TenantId) -> StoreResult<Vec<(String, StoredClass)>> {
        match self {
            Store::Postgres(s) => s.list_classes(t).await,
            Store::Sqlite(s) => s.list_classes(t).await,
        }
    }

    /// Removes the class's policy. True if there was one.
    pub async fn delete_class(&self, t: &TenantId, op: &OperationName) -> StoreResult<bool> {
        match self {
            Store::Postgres(s) => s.delete_class(t, op).await,
            Store::Sqlite(s) => s.delete_class(t, op).await,
        }
    }
}

const PG_FIND: &str = "select policy, created_at, updated_at from operation_class \
     where tenant = $1 and operation = $2";

const PG_PUT: &str =
    "insert into operation_class (tenant, operation, policy, created_at, updated_at) \
     values ($1, $2, $3, now(), now()) \
     on conflict on constraint operation_class_pkey \
       do update set policy = excluded.policy, updated_at = now() \
     returning policy, created_at, updated_at";

const PG_LIST: &str = "select operation, policy, created_at, updated_at from operation_class \
     where tenant = $1 order by operation";

const PG_DELETE: &str = "delete from operation_class where tenant = $1 and operation = $2";

impl PgStore {
    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn find_class(
        &self,
        t: &TenantId,
        op: &OperationName,
    ) -> StoreResult<Option<StoredClass>> {
        let row = sqlx::query(PG_FIND)
            .bind(t.as_str())
            .bind(op.as_str())
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| {
            Ok(StoredClass {
                policy_json: row.try_get("policy")?,
                created_at: row.try_get("created_at")?,
                updated_at: row.try_get("updated_at")?,
            })
        })
        .transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t))]
    pub async fn list_classes(&self, t: &TenantId) -> StoreResult<Vec<(String, StoredClass)>> {
        let rows = sqlx::query(PG_LIST)
            .bind(t.as_str())
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.try_get("operation")?,
                    StoredClass {
                        policy_json: row.try_get("policy")?,
                        created_at: row.try_get("created_at")?,
                        updated_at: row.try_get("updated_at")?,
                    },
                ))
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn put_class(
        &self,
        t: &TenantId,
        op: &OperationName,
        policy_json: &str,
    ) -> StoreResult<StoredClass> {
        let row = sqlx::query(PG_PUT)
            .bind(t.as_str())
            .bind(op.as_str())
            .bind(policy_json)
            .fetch_one(self.pool())
            .await?;
        Ok(StoredClass {
            policy_json: row.try_get("policy")?,
            created_at: row.try_get("created_at")?,
            updated_at: row.try_get("updated_at")?,
        })
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn delete_class(&self, t: &TenantId, op: &OperationName) -> StoreResult<bool> {
        let done = sqlx::query(PG_DELETE)
            .bind(t.as_str())
            .bind(op.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

const SQLITE_FIND: &str = "select policy, created_at, updated_at from operation_class \
     where tenant = ?1 and operation = ?2";

// ?4: now, in milliseconds (the embedded store's clock is this machine's).
const SQLITE_PUT: &str =
    "insert into operation_class (tenant, operation, policy, created_at, updated_at) \
     values (?1, ?2, ?3, ?4, ?4) \
     on conflict (tenant, operation) do update set policy = excluded.policy, updated_at = ?4 \
     returning policy, created_at, updated_at";

const SQLITE_LIST: &str = "select operation, policy, created_at, updated_at from operation_class \
     where tenant = ?1 order by operation";

const SQLITE_DELETE: &str = "delete from operation_class where tenant = ?1 and operation = ?2";

impl SqliteStore {
    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn find_class(
        &self,
        t: &TenantId,
        op: &OperationName,
    ) -> StoreResult<Option<StoredClass>> {
        let row = sqlx::query(SQLITE_FIND)
            .bind(t.as_str())
            .bind(op.as_str())
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| sqlite_class(&row)).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t))]
    pub async fn list_classes(&self, t: &TenantId) -> StoreResult<Vec<(String, StoredClass)>> {
        let rows = sqlx::query(SQLITE_LIST)
            .bind(t.as_str())
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("operation")?, sqlite_class(row)?)))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn put_class(
        &self,
        t: &TenantId,
        op: &OperationName,
        policy_json: &str,
    ) -> StoreResult<StoredClass> {
        let row = sqlx::query(SQLITE_PUT)
            .bind(t.as_str())
            .bind(op.as_str())
            .bind(policy_json)
            .bind(Utc::now().timestamp_millis())
            .fetch_one(self.pool())
            .await?;
        sqlite_class(&row)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn delete_class(&self, t: &TenantId, op: &OperationName) -> StoreResult<bool> {
        let done = sqlx::query(SQLITE_DELETE)
            .bind(t.as_str())
            .bind(op.as_str())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() == 1)
    }
}

fn sqlite_class(row: &sqlx::sqlite::SqliteRow) -> StoreResult<StoredClass> {
    let time = |column: &str| -> StoreResult<DateTime<Utc>> {
        let ms: i64 = row.try_get(column)?;
        DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| StoreError::Corrupt(format!("operation_class.{column} {ms}")))
    };
    Ok(StoredClass {
        policy_json: row.try_get("policy")?,
        created_at: time("created_at")?,
        updated_at: time("updated_at")?,
    })
}

/// Fingerprint rule sets, content-addressed (`fingerprint_rules`): saved
/// beside a policy, read back to judge a record written under them.
impl Store {
    /// Keeps a rule set under its digest; one already there is left alone.
    pub async fn remember_rules(&self, digest: &[u8; 32], rules_json: &str) -> StoreResult<()> {
        match self {
            Store::Postgres(s) => {
                sqlx::query(
                    "insert into fingerprint_rules (digest, rules) values ($1, $2) \
                     on conflict do nothing",
                )
                .bind(digest.to_vec())
                .bind(rules_json)
                .execute(s.pool())
                .await?;
            }
            Store::Sqlite(s) => {
                sqlx::query(
                    "insert into fingerprint_rules (digest, rules, created_at) \
                     values (?1, ?2, ?3) on conflict do nothing",
                )
                .bind(digest.to_vec())
                .bind(rules_json)
                .bind(Utc::now().timestamp_millis())
                .execute(s.pool())
                .await?;
            }
        }
        Ok(())
    }

    /// The rule set kept under `digest`, as JSON.
    pub async fn rules(&self, digest: &[u8; 32]) -> StoreResult<Option<String>> {
        Ok(match self {
            Store::Postgres(s) => {
                sqlx::query_scalar("select rules from fingerprint_rules where digest = $1")
                    .bind(digest.to_vec())
                    .fetch_optional(s.pool())
                    .await?
            }
            Store::Sqlite(s) => {
                sqlx::query_scalar("select rules from fingerprint_rules where digest = ?1")
                    .bind(digest.to_vec())
                    .fetch_optional(s.pool())
                    .await?
            }
        })
    }
}
