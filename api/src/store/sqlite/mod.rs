//! The SQLite backend: the embedded default, one file in the data directory.
//!
//! WAL mode lets readers run beside the single writer; `synchronous = full`
//! makes every commit durable before we answer. Each transition is one
//! statement, and SQLite takes the write lock when such a statement starts,
//! so guard and write are atomic exactly as in Postgres.
//!
//! SQLite has one writer at a time, and a connection that finds the write
//! lock taken sleeps in its busy handler (1, 2, 5, … up to 100 ms between
//! tries) rather than queueing: with several writing connections, claims
//! waited on those sleeps, not on each other (p99 in the hundreds of
//! milliseconds at 16 clients). So every statement goes through one writing
//! connection, which callers queue for in order, and only the replay read
//! (`find`) and the dashboard's reads use a pool of reading connections. Times come from
//! SQLite's own clock inside each statement (`sqlite_now!`: epoch
//! milliseconds, read once per statement), on an embedded store this
//! machine's.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use super::batch::{Batcher, Sizes};
use super::claims::batch::{self, ClaimCall, CompleteCall, Write};
use super::{Completion, KeyRecord, NewClaim, StoreResult};
use crate::domain::ScopedKey;

mod files;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

#[derive(Clone)]
pub struct SqliteStore {
    /// The one writing connection (every statement unless said otherwise).
    pool: SqlitePool,
    /// Connections for reads only.
    readers: SqlitePool,
    writes: Arc<Batcher<Write, Option<KeyRecord>>>,
}

/// Reading connections (WAL readers run beside the writer).
const READERS: u32 = 8;

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").finish_non_exhaustive()
    }
}

impl SqliteStore {
    pub async fn connect(url: &str, batch_max: usize) -> anyhow::Result<Self> {
        let options = SqliteConnectOptions::from_str(url)
            .context("IDEMKEY_DATABASE_URL is not a valid sqlite:// URL")?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let in_memory = url.contains(":memory:") || url.contains("mode=memory");
        if !in_memory {
            files::make_private(options.get_filename())?;
        }
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options.clone());
        // An in-memory database lives in its one connection.
        let readers = if in_memory {
            pool.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(READERS)
                .acquire_timeout(Duration::from_secs(10))
                .connect_lazy_with(options)
        };
        let writes = Arc::new(batch::sqlite_batcher(batch_max));
        Ok(Self {
            pool,
            readers,
            writes,
        })
    }

    /// The writing connection: every statement that may write, and any
    /// read that must see the caller's own writes in one transaction.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// Batches of writes run so far, by kind.
    pub(in crate::store) fn batch_sizes(&self) -> Vec<(&'static str, Sizes)> {
        vec![("claims and completions", self.writes.sizes())]
    }

    /// A new claim, in one transaction with the writes queued beside it.
    pub(in crate::store) async fn insert_claim(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        let call = Write::Claim(ClaimCall {
            key: k.clone(),
            claim: c.clone(),
        });
        self.write(call).await
    }

    /// A completion, in one transaction with the writes queued beside it.
    pub(in crate::store) async fn complete(
        &self,
        k: &ScopedKey,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        self.write(Write::Complete(CompleteCall::new(k, c))).await
    }

    async fn write(&self, call: Write) -> StoreResult<Option<KeyRecord>> {
        let pool = self.pool.clone();
        self.writes
            .submit(call, move |calls| batch::sqlite_writes(pool.clone(), calls))
            .await
    }

    /// Reading connections, for reads on their own.
    pub fn reader(&self) -> &SqlitePool {
        &self.readers
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .context("applying SQLite migrations")
    }
}
