//! Reading endpoint and delivery rows, once for both dialects.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Row, Type};

use super::super::claims::{generic_sql, Sql};
use super::super::dialect::Dialect;
use super::super::{StoreError, StoreResult};
use crate::domain::webhook::EventKind;
use crate::domain::{OperationName, TenantId};

/// An endpoint as stored. `secret` is for signing only: no answer shows it.
#[derive(Debug, Clone)]
pub struct StoredEndpoint {
    pub tenant: TenantId,
    pub id: String,
    pub operation: OperationName,
    pub url: String,
    pub secret: String,
    pub events: Vec<EventKind>,
    pub stuck_after: Option<Duration>,
    /// `(threshold, window)`.
    pub spike: Option<(u32, Duration)>,
    pub created_at: DateTime<Utc>,
}

/// One event queued for one endpoint, and how its delivery stands.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: i64,
    pub tenant: TenantId,
    pub endpoint_id: String,
    pub kind: EventKind,
    /// What the event is about, unique per endpoint and kind.
    pub subject: String,
    pub operation: OperationName,
    pub key: Option<String>,
    pub attempt: Option<i32>,
    pub occurred_at: DateTime<Utc>,
    pub reason: Option<String>,
    pub rejections: Option<i64>,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    /// Attempts made (or under way).
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// An endpoint's deliveries by state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryCounts {
    pub endpoint_id: String,
    pub pending: i64,
    pub delivered: i64,
    pub failed: i64,
}

fn corrupt(what: &str, value: impl std::fmt::Debug) -> StoreError {
    StoreError::Corrupt(format!("{what} {value:?}"))
}

fn ms(what: &str, value: Option<i64>) -> StoreResult<Option<Duration>> {
    value
        .map(|v| {
            u64::try_from(v)
                .map(Duration::from_millis)
                .map_err(|_| corrupt(what, v))
        })
        .transpose()
}

fn tenant(text: &str) -> StoreResult<TenantId> {
    TenantId::parse(text).map_err(|_| corrupt("tenant", text))
}

fn operation(text: &str) -> StoreResult<OperationName> {
    OperationName::parse(text).map_err(|_| corrupt("operation", text))
}

generic_sql!(impl {
    pub(super) fn endpoint_row(row: &<D as Database>::Row) -> StoreResult<StoredEndpoint> {
        let events: String = row.try_get("events")?;
        let events = events
            .split(',')
            .map(|w| EventKind::parse(w).ok_or_else(|| corrupt("event", w)))
            .collect::<StoreResult<Vec<_>>>()?;
        let threshold: Option<i64> = row.try_get("spike_threshold")?;
        let window = ms("spike_window_ms", row.try_get("spike_window_ms")?)?;
        let spike = match (threshold, window) {
            (Some(n), Some(w)) => Some((u32::try_from(n).map_err(|_| corrupt("spike_threshold", n))?, w)),
            _ => None,
        };
        Ok(StoredEndpoint {
            tenant: tenant(&row.try_get::<String, _>("tenant")?)?,
            id: row.try_get("id")?,
            operation: operation(&row.try_get::<String, _>("operation")?)?,
            url: row.try_get("url")?,
            secret: row.try_get("secret")?,
            events,
            stuck_after: ms("stuck_after_ms", row.try_get("stuck_after_ms")?)?,
            spike,
            created_at: D::time(row, "created_at")?,
        })
    }

    pub(super) fn delivery_row(row: &<D as Database>::Row) -> StoreResult<Delivery> {
        let kind: String = row.try_get("kind")?;
        Ok(Delivery {
            id: row.try_get("id")?,
            tenant: tenant(&row.try_get::<String, _>("tenant")?)?,
            endpoint_id: row.try_get("endpoint_id")?,
            kind: EventKind::parse(&kind).ok_or_else(|| corrupt("kind", &kind))?,
            subject: row.try_get("subject")?,
            operation: operation(&row.try_get::<String, _>("operation")?)?,
            key: row.try_get("key")?,
            attempt: row.try_get("attempt")?,
            occurred_at: D::time(row, "occurred_at")?,
            reason: row.try_get("reason")?,
            rejections: row.try_get("rejections")?,
            state: row.try_get("state")?,
            attempts: row.try_get("attempts")?,
            next_attempt_at: D::time(row, "next_attempt_at")?,
            last_attempt_at: D::opt_time(row, "last_attempt_at")?,
            last_status: row.try_get("last_status")?,
            last_error: row.try_get("last_error")?,
            delivered_at: D::opt_time(row, "delivered_at")?,
            created_at: D::time(row, "created_at")?,
        })
    }
});
