//! Operation-class policies: one row per (tenant, operation) that an admin
//! has set, holding the policy's canonical JSON text. A class with no row
//! uses the defaults. Beside them, fingerprint rule sets, content-addressed.
//!
//! The store keeps text and does not interpret it; the engine parses it with
//! the same checks as a `PUT`. Each call is one statement, tenant first,
//! written once for both dialects (see `dialect`); only the SQL differs.

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{generic_sql, Sql};
use super::dialect::Dialect;
use super::{Store, StoreResult};
use crate::domain::{OperationName, TenantId};

mod postgres;
mod sqlite;

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// A stored policy, as written.
#[derive(Debug, Clone)]
pub struct StoredClass {
    /// The policy's canonical JSON text.
    pub policy_json: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The classes' statements in one dialect.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// 1 tenant, 2 operation.
    pub find: &'static str,
    /// 1 tenant, 2 operation, 3 policy; returns the row.
    pub put: &'static str,
    /// 1 tenant.
    pub list: &'static str,
    /// 1 tenant, 2 operation.
    pub delete: &'static str,
    /// 1 digest, 2 rules JSON; a digest already kept is left alone.
    pub remember_rules: &'static str,
    /// 1 digest.
    pub rules: &'static str,
}

impl Store {
    pub async fn find_class(
        &self,
        t: &TenantId,
        op: &OperationName,
    ) -> StoreResult<Option<StoredClass>> {
        dispatch!(self, s => Sql::on(s.reader()).find_class(t, op).await)
    }

    /// Inserts or replaces the class's policy.
    pub async fn put_class(
        &self,
        t: &TenantId,
        op: &OperationName,
        policy_json: &str,
    ) -> StoreResult<StoredClass> {
        each_backend!(self, s => Sql::on(s.pool()).put_class(t, op, policy_json).await)
    }

    /// Every class of the tenant with a stored policy, by operation name.
    pub async fn list_classes(&self, t: &TenantId) -> StoreResult<Vec<(String, StoredClass)>> {
        each_backend!(self, s => Sql::on(s.reader()).list_classes(t).await)
    }

    /// Removes the class's policy. True if there was one.
    pub async fn delete_class(&self, t: &TenantId, op: &OperationName) -> StoreResult<bool> {
        each_backend!(self, s => Sql::on(s.pool()).delete_class(t, op).await)
    }

    /// Keeps a rule set under its digest; one already there is left alone.
    pub async fn remember_rules(&self, digest: &[u8; 32], rules_json: &str) -> StoreResult<()> {
        each_backend!(self, s => Sql::on(s.pool()).remember_rules(digest, rules_json).await)
    }

    /// The rule set kept under `digest`, as JSON.
    pub async fn rules(&self, digest: &[u8; 32]) -> StoreResult<Option<String>> {
        each_backend!(self, s => Sql::on(s.reader()).rules(digest).await)
    }
}

generic_sql!(impl {
    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn find_class(&self, t: &TenantId, op: &OperationName) -> StoreResult<Option<StoredClass>> {
        let row = sqlx::query(D::CLASSES.find)
            .bind(t.as_str().to_owned())
            .bind(op.as_str().to_owned())
            .fetch_optional(self.pool)
            .await?;
        row.map(|row| class::<D>(&row)).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t))]
    pub async fn list_classes(&self, t: &TenantId) -> StoreResult<Vec<(String, StoredClass)>> {
        let rows = sqlx::query(D::CLASSES.list)
            .bind(t.as_str().to_owned())
            .fetch_all(self.pool)
            .await?;
        rows.iter()
            .map(|row| Ok((row.try_get("operation")?, class::<D>(row)?)))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn put_class(&self, t: &TenantId, op: &OperationName, policy_json: &str) -> StoreResult<StoredClass> {
        let row = sqlx::query(D::CLASSES.put)
            .bind(t.as_str().to_owned())
            .bind(op.as_str().to_owned())
            .bind(policy_json.to_owned())
            .fetch_one(self.pool)
            .await?;
        class::<D>(&row)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %t, operation = %op))]
    pub async fn delete_class(&self, t: &TenantId, op: &OperationName) -> StoreResult<bool> {
        let done = sqlx::query(D::CLASSES.delete)
            .bind(t.as_str().to_owned())
            .bind(op.as_str().to_owned())
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    pub async fn remember_rules(&self, digest: &[u8; 32], rules_json: &str) -> StoreResult<()> {
        sqlx::query(D::CLASSES.remember_rules)
            .bind(digest.to_vec())
            .bind(rules_json.to_owned())
            .execute(self.pool)
            .await?;
        Ok(())
    }

    pub async fn rules(&self, digest: &[u8; 32]) -> StoreResult<Option<String>> {
        let row = sqlx::query(D::CLASSES.rules)
            .bind(digest.to_vec())
            .fetch_optional(self.pool)
            .await?;
        Ok(row.map(|row| row.try_get("rules")).transpose()?)
    }
});

fn class<D>(row: &D::Row) -> StoreResult<StoredClass>
where
    D: Dialect,
    for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
    String: for<'r> Decode<'r, D> + Type<D>,
{
    Ok(StoredClass {
        policy_json: row.try_get("policy")?,
        created_at: D::time(row, "created_at")?,
        updated_at: D::time(row, "updated_at")?,
    })
}
