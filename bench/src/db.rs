//! Benchmark databases: created fresh per measurement (`idemkey_bench_*`),
//! dropped afterwards; bulk fills in SQL (never through the API); Postgres's
//! own counters for the hot-key storm.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::{Connection, Executor, PgConnection, Row};

use crate::workload::{self, TENANT};

/// A database for one measurement.
pub struct BenchDb {
    pub name: String,
    pub url: String,
    server_url: String,
}

impl BenchDb {
    /// Creates `idemkey_bench_<run>_<label>` on the server at `server_url`
    /// (`postgres://user@host:port`, no database).
    pub async fn create(server_url: &str, run: &str, label: &str) -> anyhow::Result<Self> {
        let name = format!("idemkey_bench_{run}_{}", label.replace('-', "_"));
        let mut admin = admin(server_url).await?;
        admin
            .execute(format!("create database {name}").as_str())
            .await
            .with_context(|| format!("creating database {name}"))?;
        Ok(Self {
            url: format!("{}/{name}", server_url.trim_end_matches('/')),
            name,
            server_url: server_url.to_owned(),
        })
    }

    pub async fn drop_now(self) -> anyhow::Result<()> {
        let mut admin = admin(&self.server_url).await?;
        admin
            .execute(format!("drop database if exists {} with (force)", self.name).as_str())
            .await
            .with_context(|| format!("dropping database {}", self.name))?;
        Ok(())
    }

    pub async fn connect(&self) -> anyhow::Result<PgConnection> {
        PgConnection::connect(&self.url)
            .await
            .with_context(|| format!("connecting to {}", self.name))
    }
}

async fn admin(server_url: &str) -> anyhow::Result<PgConnection> {
    let url = format!("{}/postgres", server_url.trim_end_matches('/'));
    PgConnection::connect(&url)
        .await
        .with_context(|| format!("connecting to {url}"))
}

/// Drops databases earlier (interrupted) runs left behind.
pub async fn drop_leftovers(server_url: &str) -> anyhow::Result<usize> {
    let mut admin = admin(server_url).await?;
    let names: Vec<String> = sqlx::query_scalar(
        "select datname from pg_database where datname like 'idemkey\\_bench\\_%'",
    )
    .fetch_all(&mut admin)
    .await?;
    for name in &names {
        admin
            .execute(format!("drop database if exists {name} with (force)").as_str())
            .await?;
    }
    Ok(names.len())
}

/// Inserts completed records `first..=last` into `idempotency_key`, shaped
/// like the service's own rows (fingerprint, outcome and its hash, audit
/// trail, times), in one statement. Rows are written in key order so each
/// partition's indexes grow at their right edge, as a bulk load should.
///
/// Records are hot and inside their window (`tier_at` = `expires_at`, 23 h
/// ahead), so no worker touches them, except with `due_every` = n: then
/// every n-th record is due for tiering (`g % n = 0`) and another n-th has
/// expired (`g % n = n / 2`), for the workers' throughput.
async fn fill_range(
    conn: &mut PgConnection,
    operation: &str,
    key_sql: &str,
    (first, last): (u64, u64),
    due_every: Option<u64>,
) -> anyhow::Result<()> {
    let n = due_every.unwrap_or(0);
    let (tier_at, expires_at) = if n >= 2 {
        (
            format!("case when g % {n} = 0 then now() - interval '1 minute' else now() + interval '23 hours' end"),
            format!("case when g % {n} = {} then now() - interval '1 minute' else now() + interval '23 hours' end", n / 2),
        )
    } else {
        (
            "now() + interval '23 hours'".to_owned(),
            "now() + interval '23 hours'".to_owned(),
        )
    };
    let sql = format!(
        "insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt, \
           owner_token_hash, claimed_at, lease_expires_at, lease_ms, outcome, outcome_hash, \
           completed_at, expires_at, window_ms, tier_at, created_at, updated_at, steps, history) \
         select $1, $2, {key_sql}, $3, 'completed', 1, $4, now() - interval '1 hour', \
           now() - interval '1 hour' + interval '30 seconds', 30000, $5, $6, now() - interval '1 hour', \
           {expires_at}, 86400000, {tier_at}, now() - interval '1 hour', now() - interval '1 hour', '{{}}', $7 \
         from generate_series($8::bigint, $9::bigint) as g"
    );
    let history = r#"[{"event":"claimed","attempt":1,"at":"2026-01-01T00:00:00.000Z"},{"event":"completed","attempt":1,"at":"2026-01-01T00:00:00.100Z"}]"#;
    sqlx::query(&sql)
        .bind(TENANT)
        .bind(operation)
        .bind(workload::replay_fingerprint().to_vec())
        .bind(vec![0u8; 32])
        .bind(workload::OUTCOME)
        .bind(workload::outcome_hash().to_vec())
        .bind(history)
        .bind(i64::try_from(first)?)
        .bind(i64::try_from(last)?)
        .execute(conn)
        .await
        .context("bulk fill")?;
    Ok(())
}

/// The replay keys: `1..=n` as decimal text, completed with
/// [`workload::REPLAY_REQUEST`]'s fingerprint (pgbench's FIND picks the same).
pub async fn fill_replay_keys(db: &BenchDb, n: u64) -> anyhow::Result<()> {
    let mut conn = db.connect().await?;
    fill_range(
        &mut conn,
        workload::REPLAY_OPERATION,
        "g::text",
        (1, n),
        None,
    )
    .await?;
    conn.execute("analyze idempotency_key").await?;
    Ok(())
}

/// Makes every record due for tiering now.
pub async fn make_all_due(db: &BenchDb) -> anyhow::Result<()> {
    let mut conn = db.connect().await?;
    conn.execute("update idempotency_key set tier_at = now() - interval '1 minute'")
        .await?;
    Ok(())
}

/// Records due for tiering and not tiered yet, and records past their window.
pub async fn worker_backlog(db: &BenchDb) -> anyhow::Result<(i64, i64)> {
    let mut conn = db.connect().await?;
    let row = sqlx::query(
        "select (select count(*) from idempotency_key where state = 'completed' \
                   and segment is null and tier_at <= now() and expires_at > now()), \
                (select count(*) from idempotency_key where expires_at <= now())",
    )
    .fetch_one(&mut conn)
    .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

/// How long the growth fill took.
#[derive(Debug, Clone, Copy)]
pub struct FillTiming {
    pub insert: Duration,
    pub vacuum: Duration,
}

/// The growth table: `rows` completed records under the new-key operation,
/// with 32-hex keys spread evenly over the same key space the benchmark's
/// random keys use (so new inserts land among them), in batches; then a
/// `vacuum analyze`, the state a long-running table is in (and so autovacuum
/// does not start on the fresh rows in the middle of the measurement).
pub async fn fill_growth(
    db: &BenchDb,
    rows: u64,
    due_every: Option<u64>,
) -> anyhow::Result<FillTiming> {
    const BATCH: u64 = 1_000_000;
    let mut conn = db.connect().await?;
    conn.execute("set synchronous_commit = off").await?;
    // Key g is g * (2^64 / rows), as 16 hex digits, padded to 32: evenly
    // spread over the first 64 bits of the 128-bit key space, in key order.
    let stride = (u64::MAX / rows.max(1)).max(1);
    let key_sql = format!(
        "lpad(to_hex((g::numeric * {stride} - 9223372036854775808)::bigint # (-9223372036854775808)::bigint), 16, '0') || '0000000000000000'"
    );
    let started = Instant::now();
    let mut first = 0;
    while first < rows {
        let last = (first + BATCH).min(rows) - 1;
        fill_range(
            &mut conn,
            workload::NEW_OPERATION,
            &key_sql,
            (first, last),
            due_every,
        )
        .await?;
        eprintln!("  growth fill: {} / {rows} rows", last + 1);
        first = last + 1;
    }
    let insert = started.elapsed();
    let started = Instant::now();
    conn.execute("vacuum analyze idempotency_key").await?;
    // Write the load's dirty pages out now: a table that grew over months
    // has none pending, and a checkpoint falling inside the measurement
    // would be the bulk load's cost, not the service's.
    conn.execute("checkpoint").await?;
    Ok(FillTiming {
        insert,
        vacuum: started.elapsed(),
    })
}

/// Index and sequential scans Postgres has counted on the record table.
pub async fn table_scans(db: &BenchDb) -> anyhow::Result<(i64, i64)> {
    let mut conn = db.connect().await?;
    let row = sqlx::query(
        "select coalesce(sum(idx_scan), 0)::bigint, coalesce(sum(seq_scan), 0)::bigint \
         from pg_stat_user_tables where relname like 'idempotency\\_key\\_p%'",
    )
    .fetch_one(&mut conn)
    .await?;
    Ok((row.try_get(0)?, row.try_get(1)?))
}

pub async fn row_count(db: &BenchDb) -> anyhow::Result<i64> {
    let mut conn = db.connect().await?;
    Ok(sqlx::query_scalar("select count(*) from idempotency_key")
        .fetch_one(&mut conn)
        .await?)
}
