//! The SQLite backend: the embedded default, one file in the data directory.
//!
//! WAL mode lets readers run beside the single writer; `synchronous = full`
//! makes every commit durable before we answer. Each transition is one
//! statement, and SQLite takes the write lock when such a statement starts,
//! so guard and write are atomic exactly as in Postgres. Times come from
//! SQLite's own clock inside each statement (`sqlite_now!`: epoch
//! milliseconds, read once per statement), on an embedded store this
//! machine's.

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::{claims, StoreResult};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

macro_rules! record {
    () => {
        concat!(
            " state, fingerprint, attempt, owner_token_hash, claimed_at, lease_expires_at, \
          outcome, outcome_hash, completed_at, quarantine_reason, expires_at, created_at, \
          updated_at, steps, history, segment, segment_offset, segment_len, \
          segment_sha256, tiered_at, rules_digest, window_ms, field_digests, ",
            sqlite_now!(),
            " as observed_at "
        )
    };
}

/// The statement's clock as RFC 3339 text, for audit events (the same
/// moment as `sqlite_now!`: SQLite reads the clock once per statement).
macro_rules! now_text {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
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

// ?1 tenant, ?2 operation, ?3 key; later numbers per statement, the same as
// in the Postgres dialect.
macro_rules! scoped {
    () => {
        " tenant = ?1 and operation = ?2 and key = ?3 "
    };
}

/// Not gone (see `sqlite_gone!`).
macro_rules! live {
    () => {
        concat!(" and not", sqlite_gone!(now))
    };
}

/// A completion's new window end: at least a whole window after now.
macro_rules! window_after_completion {
    () => {
        concat!(
            " expires_at = max(expires_at, ",
            sqlite_now!(),
            " + window_ms) "
        )
    };
}

mod files;
mod recovery;

pub(super) use recovery::RECOVERY;

/// The claim path in this dialect (see `claims::Statements`).
pub(super) const CLAIMS: claims::Statements = claims::Statements {
    insert_claim: INSERT_CLAIM,
    find: FIND,
    renew_expired: RENEW_EXPIRED,
    take_over: TAKE_OVER,
    quarantine_expired: QUARANTINE_EXPIRED,
    complete: COMPLETE,
    heartbeat: HEARTBEAT,
    release: RELEASE,
};

// ?4 fingerprint, ?5 owner hash, ?6 lease ms, ?7 window ms, ?8 tier-after ms,
// ?9 the fingerprint rules' digest (null: the defaults)
const INSERT_CLAIM: &str = concat!(
    "insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt, \
       owner_token_hash, claimed_at, lease_expires_at, lease_ms, expires_at, window_ms, tier_at, \
       created_at, updated_at, rules_digest, field_digests, history) \
     values (?1, ?2, ?3, ?4, 'in_progress', 1, ?5, ",
    sqlite_now!(),
    ", ",
    sqlite_now!(),
    " + ?6, ?6, ",
    sqlite_now!(),
    " + ?7, ?7, ",
    sqlite_now!(),
    " + ?8, ",
    sqlite_now!(),
    ", ",
    sqlite_now!(),
    ", ?9, ?10, \
       json_array(json_object('event', 'claimed', 'attempt', 1, 'at', ",
    now_text!(),
    "))) on conflict do nothing returning",
    record!()
);

const FIND: &str = concat!("select", record!(), "from idempotency_key where", scoped!());

const RENEW_EXPIRED: &str = concat!(
    "update idempotency_key set fingerprint = ?4, state = 'in_progress', attempt = 1, \
       owner_token_hash = ?5, claimed_at = ", sqlite_now!(), ", lease_expires_at = ", sqlite_now!(), " + ?6, lease_ms = ?6, \
       outcome = null, outcome_hash = null, completed_at = null, quarantine_reason = null, \
       expires_at = ", sqlite_now!(), " + ?7, window_ms = ?7, tier_at = ", sqlite_now!(), " + ?8, created_at = ", sqlite_now!(), ", updated_at = ", sqlite_now!(), ", steps = '{}', segment = null, \
       segment_offset = null, segment_len = null, segment_sha256 = null, tiered_at = null, \
       rules_digest = ?9, field_digests = ?10, \
       history = json_array(json_object('event', 'claimed', 'attempt', 1, 'renewed', json('true'), 'at', ",
    now_text!(),
    ")) where",
    scoped!(),
    "and",
    sqlite_gone!(now),
    "returning",
    record!()
);

// ?4 seen attempt, ?5 new owner hash, ?6 lease ms, ?7 seen owner hash (the
// version; the attempt alone restarts at 1 when a record is written anew)
const TAKE_OVER: &str = concat!(
    "update idempotency_key set attempt = attempt + 1, owner_token_hash = ?5, claimed_at = ",
    sqlite_now!(),
    ", \
       lease_expires_at = ",
    sqlite_now!(),
    " + ?6, lease_ms = ?6, updated_at = ",
    sqlite_now!(),
    ", ",
    append_history!("'event', 'taken_over', 'attempt', attempt + 1"),
    "where",
    scoped!(),
    "and state = 'in_progress' and attempt = ?4 and owner_token_hash = ?7 \
       and lease_expires_at <= ",
    sqlite_now!(),
    " returning",
    record!()
);

// ?4 seen attempt, ?5 seen owner hash
const QUARANTINE_EXPIRED: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = 'lease expired', \
       updated_at = ", sqlite_now!(), ", ",
    append_history!("'event', 'quarantined', 'attempt', attempt, 'reason', 'lease expired', 'by', 'lease watch'"),
    "where",
    scoped!(),
    "and state = 'in_progress' and attempt = ?4 and owner_token_hash = ?5 \
       and lease_expires_at <= ", sqlite_now!(), " returning",
    record!()
);

// ?4 owner hash, ?5 outcome, ?6 outcome hash
const COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = ?5, outcome_hash = ?6, \
       completed_at = ",
    sqlite_now!(),
    ", updated_at = ",
    sqlite_now!(),
    ",",
    window_after_completion!(),
    ",",
    append_history!("'event', 'completed', 'attempt', attempt"),
    "where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4",
    live!(),
    "returning",
    record!()
);

// ?4 owner hash, ?5 lease ms or null
const HEARTBEAT: &str = concat!(
    "update idempotency_key set lease_expires_at = ",
    sqlite_now!(),
    " + coalesce(?5, lease_ms), updated_at = ",
    sqlite_now!(),
    " \
     where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4",
    live!(),
    "returning",
    record!()
);

// ?4 owner hash
const RELEASE: &str = concat!(
    "delete from idempotency_key where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4"
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
}
