//! The anchor for the embedded default: the seeds' two statements (the text
//! of [`super::new_key_statements`]) on their own minimal table in their own
//! SQLite file, run from this process as a team's app would run them: one
//! task per client on a pool of as many connections, each statement in
//! autocommit.
//!
//! The file gets the service's durability, so the comparison is of write
//! paths and not of fsyncs: WAL journal, `synchronous = FULL` (a commit is
//! on disk before the statement returns) and the same busy timeout, as
//! `api/src/store/sqlite/mod.rs` opens its store. What SQLite actually
//! applied is read back from a pooled connection and reported.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use sha2::{Digest, Sha256};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Executor;

use super::{new_key_statements, schema, Slots, RESPONSE};
use crate::load::{closed_loop, LoadResult, LoadSpec, OpResult};
use crate::workload::{self, NEW_OPERATION, TENANT};

/// The service's busy timeout on its SQLite store.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How the anchor's file is opened: the service's settings.
pub fn options(path: &Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(BUSY_TIMEOUT)
}

/// The two statements with SQLite parameters. Both bind the same four
/// values in the same order: tenant, operation, key, then the statement's
/// own value (the request's hash for the claim, the response for the
/// completion).
pub fn statements() -> [String; 2] {
    new_key_statements(&Slots {
        tenant: "?1",
        operation: "?2",
        key: "?3",
        request_hash: "?4",
        response: "?4",
    })
}

/// What SQLite reports for the settings that make a commit durable.
#[derive(Debug, Clone, PartialEq)]
pub struct Durability {
    pub journal_mode: String,
    pub synchronous: String,
    pub busy_timeout_ms: i64,
}

impl Durability {
    /// `journal_mode = wal, synchronous = FULL, busy_timeout = 10000 ms`.
    pub fn describe(&self) -> String {
        format!(
            "journal_mode = {}, synchronous = {}, busy_timeout = {} ms",
            self.journal_mode, self.synchronous, self.busy_timeout_ms
        )
    }
}

/// `pragma synchronous`'s number as its name.
pub fn synchronous_name(level: i64) -> String {
    match level {
        0 => "OFF".into(),
        1 => "NORMAL".into(),
        2 => "FULL".into(),
        3 => "EXTRA".into(),
        other => format!("unknown ({other})"),
    }
}

/// The anchor's database: a fresh file with the seeds' table, and a pool of
/// `connections` connections, all opened before the run starts.
pub struct AppDb {
    pool: SqlitePool,
}

impl AppDb {
    pub async fn create(path: &Path, connections: usize) -> anyhow::Result<Self> {
        let n = u32::try_from(connections.max(1))?;
        let pool = SqlitePoolOptions::new()
            .max_connections(n)
            .min_connections(n)
            .connect_with(options(path))
            .await
            .with_context(|| format!("opening {}", path.display()))?;
        pool.execute(schema("blob").as_str()).await?;
        Ok(Self { pool })
    }

    pub async fn durability(&self) -> anyhow::Result<Durability> {
        let mut conn = self.pool.acquire().await?;
        let journal_mode: String = sqlx::query_scalar("pragma journal_mode")
            .fetch_one(&mut *conn)
            .await?;
        let synchronous: i64 = sqlx::query_scalar("pragma synchronous")
            .fetch_one(&mut *conn)
            .await?;
        let busy_timeout_ms: i64 = sqlx::query_scalar("pragma busy_timeout")
            .fetch_one(&mut *conn)
            .await?;
        Ok(Durability {
            journal_mode,
            synchronous: synchronous_name(synchronous),
            busy_timeout_ms,
        })
    }

    /// Completed rows in the table.
    pub async fn completed(&self) -> anyhow::Result<i64> {
        Ok(
            sqlx::query_scalar(
                "select count(*) from idempotency_record where status = 'COMPLETED'",
            )
            .fetch_one(&self.pool)
            .await?,
        )
    }

    /// `clients` tasks, each claiming and completing fresh keys (the
    /// service scenarios' random 32-hex keys) in a closed loop on the pool.
    pub async fn run(&self, clients: usize, spec: LoadSpec) -> LoadResult {
        let [insert, update] = statements();
        let (insert, update): (Arc<str>, Arc<str>) = (insert.into(), update.into());
        let states = (0..clients.max(1))
            .map(|_| Client {
                pool: self.pool.clone(),
                rng: SmallRng::from_rng(&mut rand::rng()),
                insert: insert.clone(),
                update: update.clone(),
            })
            .collect();
        // No server and no Postgres: this process's own CPU (the app and
        // SQLite, whose work runs on each connection's thread) is the
        // generator's figure.
        closed_loop(spec, None, None, states, |mut c: Client| {
            Box::pin(async move {
                let result = new_key(&mut c).await;
                (c, result)
            })
        })
        .await
    }

    pub async fn close(self) {
        self.pool.close().await;
    }
}

struct Client {
    pool: SqlitePool,
    rng: SmallRng,
    insert: Arc<str>,
    update: Arc<str>,
}

/// One new key: the claim, then the completion, each its own autocommit
/// statement on whichever pooled connection is free. The claim must insert
/// the row and the completion must update it, or the operation failed.
async fn new_key(c: &mut Client) -> OpResult {
    let key = workload::random_key(&mut c.rng);
    let hash = Sha256::digest(key.as_bytes()).to_vec();
    let claimed = sqlx::query(&c.insert)
        .bind(TENANT)
        .bind(NEW_OPERATION)
        .bind(&key)
        .bind(hash)
        .execute(&c.pool)
        .await
        .map_err(|e| format!("claim: {e}"))?;
    if claimed.rows_affected() != 1 {
        return Err("claim inserted no row".into());
    }
    let completed = sqlx::query(&c.update)
        .bind(TENANT)
        .bind(NEW_OPERATION)
        .bind(&key)
        .bind(RESPONSE)
        .execute(&c.pool)
        .await
        .map_err(|e| format!("complete: {e}"))?;
    if completed.rows_affected() != 1 {
        return Err("complete updated no row".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_statements_bind_tenant_operation_key_then_their_own_value() {
        let [insert, update] = statements();
        assert!(insert.contains("values (?1, ?2, ?3, ?4, 'PROCESSING') on conflict do nothing"));
        assert!(update.contains(
            "response_body = ?4 where tenant_id = ?1 and operation = ?2 and idempotency_key = ?3"
        ));
        assert!(!format!("{insert}{update}").contains("?5"));
    }

    #[tokio::test]
    async fn a_short_run_completes_every_key_it_counts_with_the_services_durability() {
        let dir =
            std::env::temp_dir().join(format!("idemkey-bench-test-{:x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let db = AppDb::create(&dir.join("app.db"), 4).await.unwrap();
        let durability = db.durability().await.unwrap();
        let spec = LoadSpec {
            warmup: Duration::ZERO,
            measure: Duration::from_millis(300),
        };
        let r = db.run(4, spec).await;
        let completed = db.completed().await.unwrap();
        db.close().await;
        std::fs::remove_dir_all(&dir).unwrap();
        println!(
            "{} new keys in {:?} ({:.0}/s), {completed} completed rows; {}",
            r.ops,
            r.window,
            r.throughput(),
            durability.describe()
        );
        assert_eq!(
            durability.describe(),
            "journal_mode = wal, synchronous = FULL, busy_timeout = 10000 ms"
        );
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert!(r.ops > 0);
        // Operations still running when the window closed complete too.
        assert!(
            completed >= i64::try_from(r.ops).unwrap(),
            "{completed} < {}",
            r.ops
        );
    }

    #[test]
    fn synchronous_levels_are_named_as_sqlite_names_them() {
        assert_eq!(synchronous_name(2), "FULL");
        assert_eq!(synchronous_name(1), "NORMAL");
        assert_eq!(synchronous_name(9), "unknown (9)");
    }
}
