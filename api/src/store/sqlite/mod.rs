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

mod files;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

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
}
