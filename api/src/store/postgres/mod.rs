//! The Postgres backend: the production ownership authority.
//!
//! Times come from the database clock (`now()`), so leases and windows mean
//! the same thing on every node whatever their own clocks say.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Connection;

use super::breaker::Breaker;
use super::{claims, StoreResult};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// Columns every statement returns, plus the database clock.
macro_rules! record {
    () => {
        " state, fingerprint, attempt, owner_token_hash, claimed_at, lease_expires_at, \
          outcome, outcome_hash, completed_at, quarantine_reason, expires_at, created_at, \
          updated_at, steps, history, segment, segment_offset, segment_len, \
          segment_sha256, tiered_at, rules_digest, window_ms, field_digests, now() as observed_at "
    };
}

/// The database clock as RFC 3339 text, for audit events.
macro_rules! now_text {
    () => {
        "to_char(now() at time zone 'utc', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
    };
}

/// The audit trail with one more event: the first event (the claim) and
/// the latest 49 are kept.
macro_rules! history_with {
    ($($event:expr),+) => {
        concat!(
            " (case when jsonb_array_length(history::jsonb) >= 50 \
               then history::jsonb - 1 else history::jsonb end \
               || jsonb_build_array(jsonb_build_object(",
            $($event,)+
            ", 'at', ", now_text!(), ")))::text "
        )
    };
}

macro_rules! append_history {
    ($($event:expr),+) => {
        concat!(" history = ", history_with!($($event),+))
    };
}

macro_rules! scoped {
    () => {
        " tenant = $1 and operation = $2 and key = $3 "
    };
}

/// Not gone (see `pg_gone!`): a record that is gone is gone for every
/// caller, its owner included.
macro_rules! live {
    () => {
        concat!(" and not", pg_gone!())
    };
}

/// A completion's new window end: at least a whole window after now.
macro_rules! window_after_completion {
    () => {
        " expires_at = greatest(expires_at, now() + window_ms * interval '1 millisecond') "
    };
}

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

/// The statements a claim and a completion issue, public so the benchmark
/// (`bench/`) replays exactly this SQL with pgbench to measure the database's
/// own limit: the script is generated from these constants and cannot drift.
pub mod sql {
    pub use super::{COMPLETE, FIND, INSERT_CLAIM};
}

/// A new claim: `$1..$3` the scoped key, `$4` fingerprint, `$5` owner hash,
/// `$6` lease, `$7` replay window, `$8` tiering delay (ms), `$9` the
/// fingerprint rules' digest (null: the defaults), `$10` the field digests
/// (null: none). No row: taken.
pub const INSERT_CLAIM: &str = concat!(
    "insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt, \
       owner_token_hash, claimed_at, lease_expires_at, lease_ms, expires_at, window_ms, tier_at, \
       created_at, updated_at, rules_digest, field_digests, history) \
     values ($1, $2, $3, $4, 'in_progress', 1, $5, now(), now() + $6 * interval '1 millisecond', $6, \
       now() + $7 * interval '1 millisecond', $7, now() + $8 * interval '1 millisecond', now(), now(), $9, $10, \
       jsonb_build_array(jsonb_build_object('event', 'claimed', 'attempt', 1, 'at', ",
    now_text!(),
    "))::text) on conflict do nothing returning",
    record!()
);

/// The record of the scoped key `$1..$3` (the replay read).
pub const FIND: &str = concat!("select", record!(), "from idempotency_key where", scoped!());

const RENEW_EXPIRED: &str = concat!(
    "update idempotency_key set fingerprint = $4, state = 'in_progress', attempt = 1, \
       owner_token_hash = $5, claimed_at = now(), lease_expires_at = now() + $6 * interval '1 millisecond', \
       lease_ms = $6, outcome = null, outcome_hash = null, completed_at = null, quarantine_reason = null, \
       expires_at = now() + $7 * interval '1 millisecond', window_ms = $7, \
       tier_at = now() + $8 * interval '1 millisecond', \
       created_at = now(), updated_at = now(), steps = '{}', segment = null, \
       segment_offset = null, segment_len = null, segment_sha256 = null, tiered_at = null, \
       rules_digest = $9, field_digests = $10, \
       history = jsonb_build_array(jsonb_build_object('event', 'claimed', 'attempt', 1, 'renewed', true, 'at', ",
    now_text!(),
    "))::text where",
    scoped!(),
    "and",
    pg_gone!(),
    "returning",
    record!()
);

/// `$4` the attempt and `$7` the owner hash seen (the version; the attempt
/// alone restarts at 1 when a record is written anew), `$5` the new owner
/// hash, `$6` lease.
const TAKE_OVER: &str = concat!(
    "update idempotency_key set attempt = attempt + 1, owner_token_hash = $5, claimed_at = now(), \
       lease_expires_at = now() + $6 * interval '1 millisecond', lease_ms = $6, updated_at = now(), ",
    append_history!("'event', 'taken_over', 'attempt', attempt + 1"),
    "where",
    scoped!(),
    "and state = 'in_progress' and attempt = $4 and owner_token_hash = $7 \
       and lease_expires_at <= now() returning",
    record!()
);

/// The owner (`$4` its token hash) stores outcome `$5` with hash `$6`.
pub const COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = $5, outcome_hash = $6, \
       completed_at = now(), updated_at = now(),",
    window_after_completion!(),
    ",",
    append_history!("'event', 'completed', 'attempt', attempt"),
    "where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4",
    live!(),
    "returning",
    record!()
);

const QUARANTINE_EXPIRED: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = 'lease expired', \
       updated_at = now(), ",
    append_history!("'event', 'quarantined', 'attempt', attempt, 'reason', 'lease expired', 'by', 'lease watch'"),
    "where",
    scoped!(),
    "and state = 'in_progress' and attempt = $4 and owner_token_hash = $5 \
       and lease_expires_at <= now() returning",
    record!()
);

const HEARTBEAT: &str = concat!(
    "update idempotency_key set \
       lease_expires_at = now() + coalesce($5, lease_ms) * interval '1 millisecond', \
       updated_at = now() \
     where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4",
    live!(),
    "returning",
    record!()
);

const RELEASE: &str = concat!(
    "delete from idempotency_key where",
    scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4"
);

/// A pooled connection idle at least this long is pinged before use.
///
/// sqlx pings every connection as it goes back to the pool, so one released
/// a moment ago is known to be good; its default of pinging again on every
/// acquire added a round trip to every statement (seen in the benchmark's
/// profile). A connection that died while idle for less than this fails its
/// statement, which answers 503 `unavailable` (retryable, never "new"), and
/// sqlx then discards it.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    url: String,
    breaker: Arc<Breaker>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

impl PgStore {
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= PING_IF_IDLE_FOR {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect_lazy(url)
            .context("IDEMKEY_DATABASE_URL is not a valid Postgres URL")?;
        Ok(Self {
            pool,
            url: url.to_owned(),
            breaker: Arc::default(),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Fails calls fast while the database is away (shared by every clone).
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// Creates the database if it is missing, then applies the migrations.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let url = &self.url;
        if !sqlx::Postgres::database_exists(url).await.unwrap_or(true) {
            // Several nodes may start at once; losing the race is fine.
            if let Err(e) = sqlx::Postgres::create_database(url).await {
                if !sqlx::Postgres::database_exists(url).await.unwrap_or(false) {
                    return Err(e).context("creating the database");
                }
            }
        }
        MIGRATOR
            .run(&self.pool)
            .await
            .context("applying Postgres migrations")
    }

    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("select 1").execute(&self.pool).await?;
        Ok(())
    }
}
