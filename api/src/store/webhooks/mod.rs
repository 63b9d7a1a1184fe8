//! Webhook endpoints and the durable queue of their deliveries.
//!
//! - **Finding events** reads only what the store already records: keys'
//!   states, attempts and claim times, and the `key_rejections` roll-up.
//!   Each `queue_*` statement is one `insert … select` over every
//!   endpoint that wants the event, so nothing is added to the claim path.
//!   A row's `subject` names the occurrence (the key, its attempt and that
//!   attempt's claim time; or a spike's window), and the unique
//!   `(tenant, endpoint, kind, subject)` makes queueing idempotent: every
//!   node may run the pass at once, any number of times.
//! - **Taking a delivery** is one update that counts the attempt and moves
//!   `next_attempt_at` past the request's timeout; on Postgres it picks its
//!   rows `for update skip locked`, so two nodes never take the same row,
//!   and a node that dies mid-request leaves the row due again after the
//!   timeout. **Finishing** names the attempt count it took the row at.
//! - An endpoint sees only its own tenant's and class's keys: every join
//!   and every `where` leads with the tenant.
//!
//! Written once for both dialects (see `dialect`); only the SQL differs.

mod decode;
mod postgres;
mod sqlite;

use std::time::Duration;

use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::claims::{generic_sql, Sql};
use super::dialect::Dialect;
use super::{millis, Store, StoreResult};
use crate::domain::webhook::EventKind;
use crate::domain::{OperationName, TenantId};
pub use decode::{Delivery, DeliveryCounts, StoredEndpoint};

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// The statements in one dialect.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// 1 tenant, 2 id, 3 operation, 4 url, 5 secret, 6 events, 7 stuck
    /// after ms, 8 spike threshold, 9 spike window ms, 10 most endpoints of
    /// the class; no row is added when the class already has that many.
    pub insert_endpoint: &'static str,
    /// 1 tenant, 2 operation (null: every class).
    pub endpoints: &'static str,
    /// 1 tenant, 2 id.
    pub endpoint: &'static str,
    /// 1 tenant, 2 id; its deliveries go with it.
    pub delete_endpoint: &'static str,
    /// Each: 1 limit. Queues what is new of one event kind, for every
    /// endpoint that wants it.
    pub queue_quarantined: &'static str,
    pub queue_stuck: &'static str,
    pub queue_taken_over: &'static str,
    pub queue_spikes: &'static str,
    /// 1 lease ms, 2 limit: takes due deliveries, counting the attempt.
    pub take_due: &'static str,
    /// 1 tenant, 2 id, 3 attempts when taken, 4 state, 5 ms until the next
    /// attempt (null when finished), 6 status code, 7 error.
    pub finish: &'static str,
    /// 1 tenant, 2 endpoint id, 3 limit; newest first.
    pub deliveries: &'static str,
    /// 1 tenant: rows of (`endpoint_id`, `state`, `n`).
    pub counts: &'static str,
    /// 1 age ms, 2 limit: finished deliveries last changed longer ago.
    pub prune: &'static str,
}

/// A new endpoint's row.
#[derive(Debug, Clone)]
pub struct NewEndpoint<'a> {
    pub id: &'a str,
    pub operation: &'a OperationName,
    pub url: &'a str,
    pub secret: &'a str,
    pub events: &'a [EventKind],
    pub stuck_after: Option<Duration>,
    pub spike: Option<(u32, Duration)>,
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptResult {
    /// `pending` (to be tried again after `retry_in`), `delivered` or
    /// `failed`.
    pub state: &'static str,
    pub retry_in: Option<Duration>,
    pub status: Option<u16>,
    pub error: Option<String>,
}

impl Store {
    /// Adds an endpoint; false when its class already has `most`.
    pub async fn insert_endpoint(
        &self,
        tenant: &TenantId,
        e: &NewEndpoint<'_>,
        most: usize,
    ) -> StoreResult<bool> {
        dispatch!(self, s => Sql::on(s.pool()).insert_endpoint(tenant, e, most).await)
    }

    /// The tenant's endpoints (of one class, or of all), by class, oldest
    /// first.
    pub async fn endpoints(
        &self,
        tenant: &TenantId,
        operation: Option<&OperationName>,
    ) -> StoreResult<Vec<StoredEndpoint>> {
        dispatch!(self, s => Sql::on(s.pool()).endpoints(tenant, operation).await)
    }

    pub async fn endpoint(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> StoreResult<Option<StoredEndpoint>> {
        dispatch!(self, s => Sql::on(s.pool()).endpoint(tenant, id).await)
    }

    /// Deletes an endpoint and its deliveries; false when there was none.
    pub async fn delete_endpoint(&self, tenant: &TenantId, id: &str) -> StoreResult<bool> {
        dispatch!(self, s => Sql::on(s.pool()).delete_endpoint(tenant, id).await)
    }

    /// Queues up to `limit` new events of each kind; how many it queued.
    pub async fn queue_events(&self, limit: u32) -> StoreResult<u64> {
        each_backend!(self, s => Sql::on(s.pool()).queue_events(limit).await)
    }

    /// Takes up to `limit` due deliveries for `lease` (no other worker
    /// takes them meanwhile), counting the attempt.
    pub async fn take_deliveries(&self, lease: Duration, limit: u32) -> StoreResult<Vec<Delivery>> {
        each_backend!(self, s => Sql::on(s.pool()).take_deliveries(lease, limit).await)
    }

    /// Records how the attempt taken at `d.attempts` ended; false when the
    /// row was taken again meanwhile (its lease ran out).
    pub async fn finish_delivery(&self, d: &Delivery, r: &AttemptResult) -> StoreResult<bool> {
        each_backend!(self, s => Sql::on(s.pool()).finish_delivery(d, r).await)
    }

    /// An endpoint's newest deliveries.
    pub async fn deliveries(
        &self,
        tenant: &TenantId,
        endpoint: &str,
        limit: u32,
    ) -> StoreResult<Vec<Delivery>> {
        dispatch!(self, s => Sql::on(s.pool()).deliveries(tenant, endpoint, limit).await)
    }

    /// Deliveries per endpoint and state, for the tenant.
    pub async fn delivery_counts(&self, tenant: &TenantId) -> StoreResult<Vec<DeliveryCounts>> {
        dispatch!(self, s => Sql::on(s.pool()).delivery_counts(tenant).await)
    }

    /// Deletes up to `limit` finished deliveries older than `age`.
    pub async fn prune_deliveries(&self, age: Duration, limit: u32) -> StoreResult<u64> {
        each_backend!(self, s => Sql::on(s.pool()).prune_deliveries(age, limit).await)
    }
}

generic_sql!(impl {
    pub async fn insert_endpoint(&self, tenant: &TenantId, e: &NewEndpoint<'_>, most: usize) -> StoreResult<bool> {
        let events: Vec<&str> = e.events.iter().map(|k| k.as_str()).collect();
        let done = sqlx::query(D::WEBHOOKS.insert_endpoint)
            .bind(tenant.as_str().to_owned())
            .bind(e.id.to_owned())
            .bind(e.operation.as_str().to_owned())
            .bind(e.url.to_owned())
            .bind(e.secret.to_owned())
            .bind(events.join(","))
            .bind(e.stuck_after.map(millis))
            .bind(e.spike.map(|(n, _)| i64::from(n)))
            .bind(e.spike.map(|(_, w)| millis(w)))
            .bind(i64::try_from(most).unwrap_or(i64::MAX))
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    pub async fn endpoints(&self, tenant: &TenantId, operation: Option<&OperationName>) -> StoreResult<Vec<StoredEndpoint>> {
        let rows = sqlx::query(D::WEBHOOKS.endpoints)
            .bind(tenant.as_str().to_owned())
            .bind(operation.map(|o| o.as_str().to_owned()))
            .fetch_all(self.pool)
            .await?;
        rows.iter().map(Self::endpoint_row).collect()
    }

    pub async fn endpoint(&self, tenant: &TenantId, id: &str) -> StoreResult<Option<StoredEndpoint>> {
        let row = sqlx::query(D::WEBHOOKS.endpoint)
            .bind(tenant.as_str().to_owned())
            .bind(id.to_owned())
            .fetch_optional(self.pool)
            .await?;
        row.as_ref().map(Self::endpoint_row).transpose()
    }

    pub async fn delete_endpoint(&self, tenant: &TenantId, id: &str) -> StoreResult<bool> {
        let done = sqlx::query(D::WEBHOOKS.delete_endpoint)
            .bind(tenant.as_str().to_owned())
            .bind(id.to_owned())
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    pub async fn queue_events(&self, limit: u32) -> StoreResult<u64> {
        let mut queued = 0;
        for statement in [
            D::WEBHOOKS.queue_quarantined,
            D::WEBHOOKS.queue_stuck,
            D::WEBHOOKS.queue_taken_over,
            D::WEBHOOKS.queue_spikes,
        ] {
            let done = sqlx::query(statement)
                .bind(i64::from(limit))
                .execute(self.pool)
                .await?;
            queued += D::rows_affected(&done);
        }
        Ok(queued)
    }

    pub async fn take_deliveries(&self, lease: Duration, limit: u32) -> StoreResult<Vec<Delivery>> {
        let rows = sqlx::query(D::WEBHOOKS.take_due)
            .bind(millis(lease))
            .bind(i64::from(limit))
            .fetch_all(self.pool)
            .await?;
        rows.iter().map(Self::delivery_row).collect()
    }

    pub async fn finish_delivery(&self, d: &Delivery, r: &AttemptResult) -> StoreResult<bool> {
        let done = sqlx::query(D::WEBHOOKS.finish)
            .bind(d.tenant.as_str().to_owned())
            .bind(d.id)
            .bind(d.attempts)
            .bind(r.state.to_owned())
            .bind(r.retry_in.map(millis))
            .bind(r.status.map(i64::from))
            .bind(r.error.clone())
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    pub async fn deliveries(&self, tenant: &TenantId, endpoint: &str, limit: u32) -> StoreResult<Vec<Delivery>> {
        let rows = sqlx::query(D::WEBHOOKS.deliveries)
            .bind(tenant.as_str().to_owned())
            .bind(endpoint.to_owned())
            .bind(i64::from(limit))
            .fetch_all(self.pool)
            .await?;
        rows.iter().map(Self::delivery_row).collect()
    }

    pub async fn delivery_counts(&self, tenant: &TenantId) -> StoreResult<Vec<DeliveryCounts>> {
        let rows = sqlx::query(D::WEBHOOKS.counts)
            .bind(tenant.as_str().to_owned())
            .fetch_all(self.pool)
            .await?;
        let mut counts: Vec<DeliveryCounts> = Vec::new();
        for row in &rows {
            let endpoint: String = row.try_get("endpoint_id")?;
            let state: String = row.try_get("state")?;
            let n: i64 = row.try_get("n")?;
            let i = match counts.iter().position(|c| c.endpoint_id == endpoint) {
                Some(i) => i,
                None => {
                    counts.push(DeliveryCounts { endpoint_id: endpoint, ..Default::default() });
                    counts.len() - 1
                }
            };
            let c = &mut counts[i];
            match state.as_str() {
                "pending" => c.pending = n,
                "delivered" => c.delivered = n,
                _ => c.failed = n,
            }
        }
        Ok(counts)
    }

    pub async fn prune_deliveries(&self, age: Duration, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(D::WEBHOOKS.prune)
            .bind(millis(age))
            .bind(i64::from(limit))
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done))
    }
});
