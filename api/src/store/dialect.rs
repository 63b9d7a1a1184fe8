//! What differs between the two databases besides the SQL text: how a time
//! is read from a row and bound as an argument, and where each dialect's
//! statements are. Everything else — binding, running, decoding, and where
//! the dialects lock differently, whether a statement runs at all — is
//! written once, generic over [`Dialect`], in each capability's `mod.rs`
//! (`claims`, `recovery`, `classes`, `watch`, `usage`, `tiering`, `webhooks`), with the
//! dialects' text in its `postgres.rs` and `sqlite.rs`.
//!
//! Times: both dialects take "now" from the database's own clock inside the
//! statement (Postgres `now()`, SQLite `julianday('now')`), so a statement
//! never carries the node's clock. Postgres keeps `timestamptz`, SQLite
//! epoch milliseconds; [`Dialect::time`] reads either into a `DateTime`.

use chrono::{DateTime, Utc};
use sqlx::{Encode, Postgres, Row, Sqlite, Type};

use super::{
    claims, classes, hot_keys, quotas, recovery, rejections, tiering, usage, watch, webhooks,
    StoreError, StoreResult,
};

pub trait Dialect: sqlx::Database {
    /// The claim path's statements in this dialect.
    const CLAIMS: claims::Statements;
    /// Steps, quarantine, resolve and listing.
    const RECOVERY: recovery::Statements;
    /// Operation classes and fingerprint rule sets.
    const CLASSES: classes::Statements;
    /// The lease watch's counts and visits.
    const WATCH: watch::Statements;
    /// Usage rows and the dashboard's counts.
    const USAGE: usage::Statements;
    /// Tiering and cleanup.
    const TIERING: tiering::Statements;
    /// Recent `key_reused` refusals.
    const REJECTIONS: rejections::Statements;
    /// The most claimed keys per class and minute.
    const HOT_KEYS: hot_keys::Statements;
    /// Per-tenant quotas and measured storage.
    const QUOTAS: quotas::Statements;
    /// Webhook endpoints and their deliveries.
    const WEBHOOKS: webhooks::Statements;

    /// What a numbered parameter starts with (`$1` or `?1`).
    const PARAMETER: &'static str;

    /// A time as this dialect binds it.
    type Time: for<'q> Encode<'q, Self> + Type<Self> + Send + 'static;

    fn time_arg(t: DateTime<Utc>) -> Self::Time;

    /// The time in `column` of `row`.
    fn time(row: &Self::Row, column: &str) -> StoreResult<DateTime<Utc>>;

    /// The time in `column` of `row`, which may be null.
    fn opt_time(row: &Self::Row, column: &str) -> StoreResult<Option<DateTime<Utc>>>;

    /// How many rows a statement changed.
    fn rows_affected(done: &Self::QueryResult) -> u64;

    /// `(?1, ?2), (?3, ?4)`: the numbered parameters of a multi-row
    /// `values` list of `rows` rows of `columns` each.
    fn values_list(rows: usize, columns: usize) -> String {
        (0..rows)
            .map(|r| {
                let row: Vec<String> = (1..=columns)
                    .map(|c| format!("{}{}", Self::PARAMETER, r * columns + c))
                    .collect();
                format!("({})", row.join(", "))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Dialect for Postgres {
    const CLAIMS: claims::Statements = claims::POSTGRES;
    const RECOVERY: recovery::Statements = recovery::POSTGRES;
    const CLASSES: classes::Statements = classes::POSTGRES;
    const WATCH: watch::Statements = watch::POSTGRES;
    const USAGE: usage::Statements = usage::POSTGRES;
    const TIERING: tiering::Statements = tiering::POSTGRES;
    const REJECTIONS: rejections::Statements = rejections::POSTGRES;
    const HOT_KEYS: hot_keys::Statements = hot_keys::POSTGRES;
    const QUOTAS: quotas::Statements = quotas::POSTGRES;
    const WEBHOOKS: webhooks::Statements = webhooks::POSTGRES;
    const PARAMETER: &'static str = "$";
    type Time = DateTime<Utc>;

    fn time_arg(t: DateTime<Utc>) -> Self::Time {
        t
    }

    fn time(row: &Self::Row, column: &str) -> StoreResult<DateTime<Utc>> {
        Ok(row.try_get(column)?)
    }

    fn opt_time(row: &Self::Row, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        Ok(row.try_get(column)?)
    }

    fn rows_affected(done: &Self::QueryResult) -> u64 {
        done.rows_affected()
    }
}

impl Dialect for Sqlite {
    const CLAIMS: claims::Statements = claims::SQLITE;
    const RECOVERY: recovery::Statements = recovery::SQLITE;
    const CLASSES: classes::Statements = classes::SQLITE;
    const WATCH: watch::Statements = watch::SQLITE;
    const USAGE: usage::Statements = usage::SQLITE;
    const TIERING: tiering::Statements = tiering::SQLITE;
    const REJECTIONS: rejections::Statements = rejections::SQLITE;
    const HOT_KEYS: hot_keys::Statements = hot_keys::SQLITE;
    const QUOTAS: quotas::Statements = quotas::SQLITE;
    const WEBHOOKS: webhooks::Statements = webhooks::SQLITE;
    const PARAMETER: &'static str = "?";
    /// Epoch milliseconds.
    type Time = i64;

    fn time_arg(t: DateTime<Utc>) -> Self::Time {
        t.timestamp_millis()
    }

    fn time(row: &Self::Row, column: &str) -> StoreResult<DateTime<Utc>> {
        let ms: i64 = row.try_get(column)?;
        from_millis(column, ms)
    }

    fn opt_time(row: &Self::Row, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        let ms: Option<i64> = row.try_get(column)?;
        ms.map(|ms| from_millis(column, ms)).transpose()
    }

    fn rows_affected(done: &Self::QueryResult) -> u64 {
        done.rows_affected()
    }
}

fn from_millis(column: &str, ms: i64) -> StoreResult<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| StoreError::Corrupt(format!("{column} {ms}")))
}
