//! The SQLite backend: the embedded default, one file in the data directory.
//!
//! WAL mode lets readers run beside the single writer; `synchronous = full`
//! makes every commit durable before we answer. Each transition is one
//! statement, and SQLite takes the write lock when such a statement starts,
//! so guard and write are atomic exactly as in Postgres. Times come from this
//! machine's clock, which is the only clock an embedded store has.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::Row;

use super::{
    hash32, millis, opt_hash32, routing_from_parts, window, Completion, KeyRecord, NewClaim,
    StoreError, StoreResult, Version,
};
use crate::domain::{Fingerprint, OwnerTokenHash, RecordState, ScopedKey};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

macro_rules! record {
    () => {
        " state, fingerprint, attempt, owner_token_hash, claimed_at, lease_expires_at, \
          outcome, outcome_hash, completed_at, quarantine_reason, expires_at, created_at, \
          updated_at, steps, history, segment, segment_offset, segment_len, \
          segment_sha256, tiered_at, rules_digest, window_ms "
    };
}

/// `?4` (now, in ms) as RFC 3339 text, for audit events.
macro_rules! now_text {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', ?4 / 1000.0, 'unixepoch')"
    };
}

/// The audit trail with one more event: the first event (the claim) and
/// the latest 49 are kept.
macro_rules! history_with {
    ($($event:expr),+) => {
        concat!(
            " json_insert(case when json_array_length(history) >= 50 \
               then json_remove(history, '$[1]') else history end, '$[#]', json_object(",
            $($event,)+
            ", 'at', ", now_text!(), ")) "
        )
    };
}

macro_rules! append_history {
    ($($event:expr),+) => {
        concat!(" history = ", history_with!($($event),+))
    };
}

// ?1 tenant, ?2 operation, ?3 key, ?4 now (ms, except in FIND); later
// numbers per statement.
macro_rules! scoped {
    () => {
        " tenant = ?1 and operation = ?2 and key = ?3 "
    };
}

/// Not gone (see `sqlite_gone!`).
macro_rules! live {
    () => {
        concat!(" and not", sqlite_gone!("?4"))
    };
}

/// A completion's new window end: at least a whole window after now.
macro_rules! window_after_completion {
    () => {
        " expires_at = max(expires_at, ?4 + window_ms) "
    };
}

mod files;
mod recovery;
mod usage;

// ?5 fingerprint, ?6 owner hash, ?7 lease ms, ?8 window ms, ?9 tier-after ms,
// ?10 the fingerprint rules' digest (null: the defaults)
const INSERT_CLAIM: &str = concat!(
    "insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt, \
       owner_token_hash, claimed_at, lease_expires_at, lease_ms, expires_at, window_ms, tier_at, \
       created_at, updated_at, rules_digest, history) \
     values (?1, ?2, ?3, ?5, 'in_progress', 1, ?6, ?4, ?4 + ?7, ?7, ?4 + ?8, ?8, ?4 + ?9, ?4, ?4, ?10, \
       json_array(json_object('event', 'claimed', 'attempt', 1, 'at', ",
    now_text!(),
    "))) on conflict do nothing returning",
    record!()
);

const FIND: &str = concat!("select", record!(), "from idempotency_key where", scoped!());

const RENEW_EXPIRED: &str = concat!(
    "update idempotency_key set fingerprint = ?5, state = 'in_progress', attempt = 1, \
       owner_token_hash = ?6, claimed_at = ?4, lease_expires_at = ?4 + ?7, lease_ms = ?7, \
       outcome = null, outcome_hash = null, completed_at = null, quarantine_reason = null, \
       expires_at = ?4 + ?8, window_ms = ?8, tier_at = ?4 + ?9, created_at = ?4, updated_at = ?4, steps = '{}', segment = null, \
       segment_offset = null, segment_len = null, segment_sha256 = null, tiered_at = null, \
       rules_digest = ?10, \
       history = json_array(json_object('event', 'claimed', 'attempt', 1, 'renewed', json('true'), 'at', ",
    now_text!(),
    ")) where",
    scoped!(),
    "and",
    sqlite_gone!("?4"),
    "returning",
    record!()
);

// ?5 seen attempt, ?6 new owner hash, ?7 lease ms, ?8 seen owner hash (the
// version; the attempt alone restarts at 1 when a record is written anew)
const TAKE_OVER: &str = concat!(
    "update idempotency_key set attempt = attempt + 1, owner_token_hash = ?6, claimed_at = ?4, \
       lease_expires_at = ?4 + ?7, lease_ms = ?7, updated_at = ?4, ",
    append_history!("'event', 'taken_over', 'attempt', attempt + 1"),
    "where",
    scoped!(),
    "and state = 'in_progress' and attempt = ?5 and owner_token_hash = ?8 \
       and lease_expires_at <= ?4 returning",
    record!()
);

// ?5 seen attempt, ?6 seen owner hash
const QUARANTINE_EXPIRED: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = 'lease expired', \
       updated_at = ?4, ",
    append_history!("'event', 'quarantined', 'attempt', attempt, 'reason', 'lease expired', 'by', 'lease watch'"),
    "where",
    scoped!(),
    "and state = 'in_progress' and attempt = ?5 and owner_token_hash = ?6 \
       and lease_expires_at <= ?4 returning",
    record!()
);

// ?5 owner hash, ?6 outcome, ?7 outcome hash
const COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = ?6, outcome_hash = ?7, \
       completed_at = ?4, updated_at = ?4,",
    window_after_completion!(),
    ",",
    append_history!("'event', 'completed', 'attempt', attempt"),
    "where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?5",
    live!(),
    "returning",
    record!()
);

// ?5 owner hash, ?6 lease ms or null
const HEARTBEAT: &str = concat!(
    "update idempotency_key set lease_expires_at = ?4 + coalesce(?6, lease_ms), updated_at = ?4 \
     where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?5",
    live!(),
    "returning",
    record!()
);

// ?5 owner hash
const RELEASE: &str = concat!(
    "delete from idempotency_key where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?5"
);

#[derive(Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

type SqliteQuery<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>>;

impl SqliteStore {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .context("IDEMKEY_DATABASE_URL is not a valid sqlite:// URL")?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        if !url.contains(":memory:") && !url.contains("mode=memory") {
            files::make_private(options.get_filename())?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options);
        Ok(Self { pool })
    }

    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .context("applying SQLite migrations")
    }

    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("select 1").execute(&self.pool).await?;
        Ok(())
    }

    pub async fn insert_claim(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        self.fetch_record(new_claim(sqlx::query(INSERT_CLAIM), k, now, c), now)
            .await
    }

    pub async fn find(&self, k: &ScopedKey) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = sqlx::query(FIND)
            .bind(k.tenant.as_str().to_owned())
            .bind(k.operation.as_str().to_owned())
            .bind(k.key.as_str().to_owned());
        self.fetch_record(q, now).await
    }

    pub async fn renew_expired(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        self.fetch_record(new_claim(sqlx::query(RENEW_EXPIRED), k, now, c), now)
            .await
    }

    pub async fn take_over(
        &self,
        k: &ScopedKey,
        seen: Version,
        owner: OwnerTokenHash,
        lease: Duration,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = bind_key(sqlx::query(TAKE_OVER), k, now)
            .bind(seen.attempt)
            .bind(owner.0.to_vec())
            .bind(millis(lease))
            .bind(seen.owner.0.to_vec());
        self.fetch_record(q, now).await
    }

    pub async fn quarantine_expired(
        &self,
        k: &ScopedKey,
        seen: Version,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = bind_key(sqlx::query(QUARANTINE_EXPIRED), k, now)
            .bind(seen.attempt)
            .bind(seen.owner.0.to_vec());
        self.fetch_record(q, now).await
    }

    pub async fn complete(
        &self,
        k: &ScopedKey,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = bind_key(sqlx::query(COMPLETE), k, now)
            .bind(c.owner.0.to_vec())
            .bind(c.outcome_json.to_owned())
            .bind(c.outcome_hash.to_vec());
        self.fetch_record(q, now).await
    }

    pub async fn heartbeat(
        &self,
        k: &ScopedKey,
        owner: OwnerTokenHash,
        lease: Option<Duration>,
    ) -> StoreResult<Option<KeyRecord>> {
        let now = Utc::now();
        let q = bind_key(sqlx::query(HEARTBEAT), k, now)
            .bind(owner.0.to_vec())
            .bind(lease.map(millis));
        self.fetch_record(q, now).await
    }

    pub async fn release(&self, k: &ScopedKey, owner: OwnerTokenHash) -> StoreResult<bool> {
        let done = bind_key(sqlx::query(RELEASE), k, Utc::now())
            .bind(owner.0.to_vec())
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    async fn fetch_record(
        &self,
        q: SqliteQuery<'_>,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<KeyRecord>> {
        q.fetch_optional(&self.pool)
            .await?
            .map(|row| record_from_row(&row, now))
            .transpose()
    }
}

fn bind_key<'q>(q: SqliteQuery<'q>, k: &ScopedKey, now: DateTime<Utc>) -> SqliteQuery<'q> {
    q.bind(k.tenant.as_str().to_owned())
        .bind(k.operation.as_str().to_owned())
        .bind(k.key.as_str().to_owned())
        .bind(now.timestamp_millis())
}

fn new_claim<'q>(
    q: SqliteQuery<'q>,
    k: &ScopedKey,
    now: DateTime<Utc>,
    c: &NewClaim,
) -> SqliteQuery<'q> {
    bind_key(q, k, now)
        .bind(c.fingerprint.as_bytes().to_vec())
        .bind(c.owner.0.to_vec())
        .bind(millis(c.lease))
        .bind(millis(c.replay_window))
        .bind(millis(c.tier_after))
        .bind(c.rules_digest.map(|d| d.to_vec()))
}

fn time(row: &SqliteRow, column: &str) -> StoreResult<DateTime<Utc>> {
    let ms: i64 = row.try_get(column)?;
    DateTime::from_timestamp_millis(ms).ok_or_else(|| StoreError::Corrupt(format!("{column} {ms}")))
}

fn opt_time(row: &SqliteRow, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
    let ms: Option<i64> = row.try_get(column)?;
    ms.map(|ms| {
        DateTime::from_timestamp_millis(ms)
            .ok_or_else(|| StoreError::Corrupt(format!("{column} {ms}")))
    })
    .transpose()
}

fn record_from_row(row: &SqliteRow, now: DateTime<Utc>) -> StoreResult<KeyRecord> {
    let state: String = row.try_get("state")?;
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    let owner: Vec<u8> = row.try_get("owner_token_hash")?;
    let outcome_hash: Option<Vec<u8>> = row.try_get("outcome_hash")?;
    Ok(KeyRecord {
        state: RecordState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("state {state:?}")))?,
        fingerprint: Fingerprint::from_slice(&fingerprint)
            .ok_or_else(|| StoreError::Corrupt("fingerprint length".into()))?,
        attempt: row.try_get("attempt")?,
        owner_token_hash: OwnerTokenHash(hash32(&owner)?),
        claimed_at: time(row, "claimed_at")?,
        lease_expires_at: time(row, "lease_expires_at")?,
        outcome: row.try_get("outcome")?,
        steps: row.try_get("steps")?,
        history: row.try_get("history")?,
        outcome_hash: outcome_hash.as_deref().map(hash32).transpose()?,
        completed_at: opt_time(row, "completed_at")?,
        quarantine_reason: row.try_get("quarantine_reason")?,
        expires_at: time(row, "expires_at")?,
        replay_window: window(row.try_get("window_ms")?)?,
        created_at: time(row, "created_at")?,
        updated_at: time(row, "updated_at")?,
        observed_at: now,
        routing: routing_from_parts(
            row.try_get("segment")?,
            row.try_get("segment_offset")?,
            row.try_get("segment_len")?,
            row.try_get("segment_sha256")?,
            opt_time(row, "tiered_at")?,
        )?,
        rules_digest: opt_hash32(row.try_get("rules_digest")?)?,
    })
}
