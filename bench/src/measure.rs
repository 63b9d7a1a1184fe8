//! One function per measurement. Each gets a fresh database (and, where it
//! drives the service, a fresh server process, so its peak RSS is its own),
//! and drops the database afterwards, whatever happened.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use crate::cli::Args;
use crate::db::{self, BenchDb};
use crate::hist::Latency;
use crate::load::{LoadResult, LoadSpec};
use crate::pgbench::Pgbench;
use crate::report::{Kind, Measurement};
use crate::server::ServerEnv;
use crate::steady::{self, Mix};
use crate::storm::{self, StormSpec};
use crate::workers::{rate, worker_throughput};
use crate::{idle, sql, workload};

/// The server caches final outcomes (in process by default), and
/// `IDEMKEY_CACHE=off` switches that off: the replay scenario measures cached
/// replays and `replay-cache-off` the same replays read from the database.
pub const SERVER_HAS_CACHE: bool = true;
pub const CACHE_OFF: Option<(&str, &str)> = Some(("IDEMKEY_CACHE", "off"));

/// The share of new keys in the mixed scenario.
pub const MIXED_NEW_PERCENT: u32 = 80;

pub struct Ctx {
    pub args: Args,
    pub env: ServerEnv,
    pub token: String,
    pub run_id: String,
    pub work_dir: PathBuf,
}

impl Ctx {
    pub(crate) fn spec(&self) -> LoadSpec {
        LoadSpec {
            warmup: self.args.warmup(),
            measure: self.args.measure(),
        }
    }

    pub(crate) async fn db(&self, label: &str) -> anyhow::Result<BenchDb> {
        BenchDb::create(&self.args.postgres, &self.run_id, label).await
    }
}

/// Drops the database, then hands back the measurement's own result.
pub(crate) async fn finish<T>(db: BenchDb, result: anyhow::Result<T>) -> anyhow::Result<T> {
    let name = db.name.clone();
    if let Err(e) = db.drop_now().await {
        eprintln!("warning: could not drop {name}: {e:#}");
    }
    result
}

/// Starts a server on `db`, drives `mix`, and reads its peak RSS.
pub(crate) async fn drive(
    ctx: &Ctx,
    env: &ServerEnv,
    db: &BenchDb,
    mix: Mix,
) -> anyhow::Result<(LoadResult, Option<f64>)> {
    let server = env.start(&db.url).await?;
    let run = steady::run(
        &server,
        &db.name,
        &ctx.token,
        mix,
        ctx.args.clients,
        ctx.args.replay_keys,
        ctx.spec(),
    )
    .await;
    let rss = server.peak_rss_mib().ok();
    server.stop().await?;
    Ok((run?, rss))
}

pub(crate) fn from_load(m: Measurement, r: &LoadResult, rss: Option<f64>) -> Measurement {
    let mut m = m.with_load(r);
    m.peak_rss_mib = rss;
    m
}

pub async fn limit_http(ctx: &Ctx) -> anyhow::Result<Measurement> {
    let db = ctx.db("limit_http").await?;
    let r = drive(ctx, &ctx.env, &db, Mix::Healthz).await;
    let (r, rss) = finish(db, r).await?;
    let mut m = Measurement::new(
        "limit-http",
        "HTTP limit: GET /healthz",
        Kind::Limit,
        ctx.args.clients,
    );
    m.notes
        .push("same load generator, same server binary; no auth, no database".into());
    Ok(from_load(m, &r, rss))
}

#[derive(Debug, Clone, Copy)]
pub enum DbLimit {
    ClaimComplete,
    Find,
    Mixed,
}

pub async fn limit_db(ctx: &Ctx, which: DbLimit) -> anyhow::Result<Measurement> {
    let (name, title) = match which {
        DbLimit::ClaimComplete => (
            "limit-db-claim-complete",
            "DB limit: pgbench INSERT_CLAIM + COMPLETE",
        ),
        DbLimit::Find => ("limit-db-find", "DB lookup: pgbench FIND"),
        DbLimit::Mixed => (
            "limit-db-mixed",
            "DB limit: pgbench 80/20 claim+complete / FIND",
        ),
    };
    let db = ctx.db(name).await?;
    let result = pgbench_limit(ctx, &db, which).await;
    let r = finish(db, result).await?;
    let mut m = Measurement::new(name, title, Kind::Limit, ctx.args.clients);
    m.ops = Some(r.transactions);
    m.seconds = Some(ctx.args.measure().as_secs_f64());
    m.throughput = Some(r.tps);
    m.latency = Latency::of(&r.latency);
    m.machine_busy = r.machine_busy;
    m.db_cpu_us_per_op = r.db_cpu_us_per_tx;
    if r.failed > 0 {
        m.errors
            .insert("pgbench failed transactions".into(), r.failed);
    }
    m.notes.push(format!(
        "{} pgbench connections, prepared statements generated from the service's SQL",
        ctx.args.clients
    ));
    Ok(m)
}

async fn pgbench_limit(
    ctx: &Ctx,
    db: &BenchDb,
    which: DbLimit,
) -> anyhow::Result<crate::pgbench::PgbenchResult> {
    ctx.env.migrate(&db.url).await?;
    let write = |file: &str, text: String| -> anyhow::Result<PathBuf> {
        let path = ctx.work_dir.join(file);
        std::fs::write(&path, text)?;
        Ok(path)
    };
    let claim_complete = || -> anyhow::Result<PathBuf> {
        write("claim_complete.sql", sql::claim_complete_script()?)
    };
    let find = || -> anyhow::Result<PathBuf> {
        write("find.sql", sql::find_script(ctx.args.replay_keys)?)
    };
    // FIND reads the replay keys (`1..=replay_keys` under the replay
    // operation); the mixed run's claims use that operation too, with random
    // 62-bit keys that never meet the filled ones.
    let (scripts, operation) = match which {
        DbLimit::ClaimComplete => (vec![(claim_complete()?, 1)], workload::NEW_OPERATION),
        DbLimit::Find => (vec![(find()?, 1)], workload::REPLAY_OPERATION),
        DbLimit::Mixed => (
            vec![
                (claim_complete()?, MIXED_NEW_PERCENT),
                (find()?, 100 - MIXED_NEW_PERCENT),
            ],
            workload::REPLAY_OPERATION,
        ),
    };
    if !matches!(which, DbLimit::ClaimComplete) {
        db::fill_replay_keys(db, ctx.args.replay_keys).await?;
    }
    let defines = workload::script_values(operation).defines();
    let bench = Pgbench {
        binary: &ctx.args.pgbench,
        database_url: &db.url,
        db_name: &db.name,
        scripts,
        clients: ctx.args.clients,
        defines,
        work_dir: &ctx.work_dir,
    };
    bench.run(ctx.args.warmup(), ctx.args.measure()).await
}

/// Of the growth table's rows, one in this many is due for tiering and
/// another has expired, for the workers' throughput at that size.
pub const GROWTH_DUE_EVERY: u64 = 100;

/// New keys on an empty table, or (growth) on one pre-filled with `rows`,
/// followed by the tiering and cleanup throughput at that size.
pub async fn new_keys(ctx: &Ctx, growth_rows: Option<u64>) -> anyhow::Result<Measurement> {
    let (name, title) = match growth_rows {
        None => ("new-keys", "new keys: claim → complete".to_owned()),
        Some(rows) => ("growth", format!("new keys on {} rows", human(rows))),
    };
    let db = ctx.db(name).await?;
    let result = async {
        let Some(rows) = growth_rows else {
            return Ok::<_, anyhow::Error>((drive(ctx, &ctx.env, &db, Mix::NewKeys).await?, None));
        };
        ctx.env.migrate(&db.url).await?;
        let t = db::fill_growth(&db, rows, Some(GROWTH_DUE_EVERY)).await?;
        let fill = (t, db::row_count(&db).await?);
        // The workers stay off while new keys are measured, then run alone.
        let mut quiet = ctx.env.clone();
        quiet.extra.push(("IDEMKEY_WORKERS".into(), "off".into()));
        let load = drive(ctx, &quiet, &db, Mix::NewKeys).await?;
        let workers = worker_throughput(ctx, &db).await?;
        Ok((load, Some((fill, workers))))
    }
    .await;
    let ((r, rss), growth) = finish(db, result).await?;
    let mut m = from_load(
        Measurement::new(name, &title, Kind::Scenario, ctx.args.clients),
        &r,
        rss,
    );
    m.limit = Some("limit-db-claim-complete".into());
    if let Some(((t, rows), w)) = growth {
        m.detail("prefilled_rows", rows);
        m.detail("fill_insert_seconds", t.insert.as_secs_f64());
        m.detail("fill_vacuum_seconds", t.vacuum.as_secs_f64());
        m.notes.push(format!(
            "bulk load of {} rows: insert {:.0} s + vacuum analyze {:.0} s",
            human(rows.unsigned_abs()),
            t.insert.as_secs_f64(),
            t.vacuum.as_secs_f64()
        ));
        m.detail("tiered_records", w.tiered);
        m.detail("tiering_seconds", w.tiering_seconds);
        m.detail("cleaned_records", w.cleaned);
        m.detail("cleanup_seconds", w.cleanup_seconds);
        m.notes.push(format!(
            "at that size: tiering {} records/s ({} in {:.1} s), cleanup {} records/s ({} in {:.1} s), one node, local-directory archive",
            rate(w.tiered, w.tiering_seconds),
            human(w.tiered),
            w.tiering_seconds,
            rate(w.cleaned, w.cleanup_seconds),
            human(w.cleaned),
            w.cleanup_seconds
        ));
    }
    Ok(m)
}

pub fn human(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

pub async fn replays(ctx: &Ctx, cache_off: bool) -> anyhow::Result<Measurement> {
    let (name, title) = match (cache_off, SERVER_HAS_CACHE) {
        (true, _) => ("replay-cache-off", "replays, cache off"),
        (false, true) => ("replay", "replays, cache on"),
        (false, false) => ("replay", "replays (default: no cache in this build)"),
    };
    let mut env = ctx.env.clone();
    if cache_off {
        let Some((var, value)) = CACHE_OFF else {
            return Ok(Measurement::skipped(
                name,
                title,
                Kind::Scenario,
                "the server has no cache switch yet (TODO(cache merge): IDEMKEY_CACHE=off, see bench/src/measure.rs)",
            ));
        };
        env.extra.push((var.into(), value.into()));
    }
    let db = ctx.db(name).await?;
    let result = async {
        env.migrate(&db.url).await?;
        db::fill_replay_keys(&db, ctx.args.replay_keys).await?;
        drive(ctx, &env, &db, Mix::Replays).await
    }
    .await;
    let (r, rss) = finish(db, result).await?;
    let mut m = from_load(
        Measurement::new(name, title, Kind::Scenario, ctx.args.clients),
        &r,
        rss,
    );
    m.limit = Some(
        if cache_off {
            "limit-db-find"
        } else {
            "limit-http"
        }
        .into(),
    );
    m.notes.push(format!(
        "random picks among {} completed keys",
        human(ctx.args.replay_keys)
    ));
    Ok(m)
}

pub async fn mixed(ctx: &Ctx) -> anyhow::Result<Measurement> {
    let db = ctx.db("mixed").await?;
    let result = async {
        ctx.env.migrate(&db.url).await?;
        db::fill_replay_keys(&db, ctx.args.replay_keys).await?;
        drive(
            ctx,
            &ctx.env,
            &db,
            Mix::Mixed {
                new_percent: MIXED_NEW_PERCENT,
            },
        )
        .await
    }
    .await;
    let (r, rss) = finish(db, result).await?;
    let mut m = from_load(
        Measurement::new(
            "mixed",
            "mixed: 80 % new / 20 % replay",
            Kind::Scenario,
            ctx.args.clients,
        ),
        &r,
        rss,
    );
    m.limit = Some("limit-db-mixed".into());
    Ok(m)
}

pub async fn hot_key(ctx: &Ctx) -> anyhow::Result<Measurement> {
    let db = ctx.db("hot_key").await?;
    let spec = StormSpec {
        clients: ctx.args.storm_clients,
        owner_works: std::time::Duration::from_millis(ctx.args.storm_owner_ms),
        wait_ms: ctx.args.storm_wait_ms,
    };
    let result = async {
        let server = ctx.env.start(&db.url).await?;
        let r = storm::run(&server, &db, &ctx.token, &ctx.args.db_reads_metric, spec).await;
        let rss = server.peak_rss_mib().ok();
        server.stop().await?;
        Ok::<_, anyhow::Error>((r?, rss))
    }
    .await;
    let (r, rss) = finish(db, result).await?;
    let mut m = Measurement::new(
        "hot-key",
        &format!("hot-key storm: {} clients, one key", spec.clients),
        Kind::Scenario,
        spec.clients,
    );
    m.ops = Some(r.answers.values().sum());
    m.seconds = Some(r.storm.as_secs_f64());
    m.latency = Latency::of(&r.latency);
    m.peak_rss_mib = rss;
    m.cpu_us_per_op = r
        .server_cpu
        .map(|c| c.as_secs_f64() * 1e6 / spec.clients.max(1) as f64);
    let answers: Vec<String> = r.answers.iter().map(|(k, v)| format!("{v}× {k}")).collect();
    m.notes.push(format!(
        "owner completes after {} ms; waiters use wait_ms {}; answers: {}",
        ctx.args.storm_owner_ms,
        spec.wait_ms,
        answers.join(", ")
    ));
    if let Some(lag) = Latency::of(&r.lag_after_complete) {
        m.notes.push(format!(
            "replay seen {:.0} ms (p50) / {:.0} ms (max) after the completion",
            lag.p50_ms, lag.max_ms
        ));
        m.detail("lag_after_complete", lag);
    }
    m.notes.push(match r.metric_reads {
        Some(reads) => format!("server DB reads (/metrics): {reads:.0}"),
        None => "server DB reads: n/a (no /metrics in this build)".into(),
    });
    m.notes.push(format!(
        "Postgres index scans on the key's table: {} (seq scans {})",
        r.pg_index_scans, r.pg_seq_scans
    ));
    m.detail("answers", &r.answers);
    m.detail("metric_db_reads", r.metric_reads);
    m.detail("pg_index_scans", r.pg_index_scans);
    m.detail("pg_seq_scans", r.pg_seq_scans);
    m.detail("storm_ms", r.storm.as_secs_f64() * 1000.0);
    m.detail(
        "server_cpu_ms",
        r.server_cpu.map(|c| c.as_secs_f64() * 1000.0),
    );
    Ok(m)
}

pub async fn idle_connections(ctx: &Ctx) -> anyhow::Result<Measurement> {
    let db = ctx.db("idle").await?;
    let result = async {
        let server = ctx.env.start(&db.url).await?;
        let r = idle::run(&server, ctx.args.idle_connections).await;
        server.stop().await?;
        r
    }
    .await;
    let r = finish(db, result).await?;
    let mut m = Measurement::new(
        "idle-connections",
        &format!("{} idle keep-alive connections", r.connections),
        Kind::Scenario,
        r.connections,
    );
    m.peak_rss_mib = Some(r.peak_rss_mib);
    m.notes.push(format!(
        "RSS {:.1} MiB before, {:.1} MiB with all open ({:.1} KiB each); server held {} descriptors",
        r.rss_before_mib,
        r.rss_with_connections_mib,
        (r.rss_with_connections_mib - r.rss_before_mib) * 1024.0 / r.connections.max(1) as f64,
        r.server_fds
    ));
    m.detail("rss_before_mib", r.rss_before_mib);
    m.detail("rss_with_connections_mib", r.rss_with_connections_mib);
    m.detail("server_fds", r.server_fds);
    Ok(m)
}

/// The suite's wall clock, for the budget line of the report.
pub fn elapsed_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// Runs `f`, turning a failure into a row that says so.
pub async fn or_failed(
    name: &str,
    title: &str,
    kind: Kind,
    f: impl std::future::Future<Output = anyhow::Result<Measurement>>,
) -> Measurement {
    match f.await.with_context(|| format!("measuring {name}")) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e:#}");
            Measurement::skipped(name, title, kind, &format!("failed: {e:#}"))
        }
    }
}
