//! The service under load, each scenario against its limit: new keys (on
//! an empty table, or on a pre-filled one with the workers' throughput at
//! that size), replays with the cache on and off, the mixed share, a storm
//! on one hot key, and idle keep-alive connections.

use super::{drive, finish, from_load, human, Ctx, CACHE_OFF, MIXED_NEW_PERCENT, SERVER_HAS_CACHE};
use crate::db;
use crate::hist::Latency;
use crate::idle;
use crate::report::{Kind, Measurement};
use crate::steady::Mix;
use crate::storm::{self, StormSpec};
use crate::workers::{rate, worker_throughput};

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
    m.limit = Some("limit-app-new-keys".into());
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
    m.limit = Some("limit-app-mixed".into());
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
