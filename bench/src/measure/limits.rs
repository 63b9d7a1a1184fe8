//! The machine's own limits, measured in the same run as the scenarios:
//! the server's cheapest endpoint over HTTP, and pgbench running the
//! service's exact SQL (claim + complete, lookups, and the mixed share),
//! and the anchor: pgbench running the seeds' in-app SQL on its own table.

use std::path::PathBuf;

use super::{drive, finish, from_load, Ctx, MIXED_NEW_PERCENT};
use crate::db::{self, BenchDb};
use crate::hist::Latency;
use crate::pgbench::Pgbench;
use crate::report::{Kind, Measurement};
use crate::steady::Mix;
use crate::{in_app, sql, workload};

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
    /// The seeds' in-app SQL: a new key (`in_app`).
    AppNewKeys,
    /// The seeds' in-app SQL: 80 % new keys, 20 % replays.
    AppMixed,
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
        DbLimit::AppNewKeys => (
            "limit-app-new-keys",
            "In-app SQL: insert on conflict + update, own table",
        ),
        DbLimit::AppMixed => (
            "limit-app-mixed",
            "In-app SQL: 80/20 new keys / select, own table",
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
    m.notes.push(match which {
        DbLimit::AppNewKeys | DbLimit::AppMixed => format!(
            "{} pgbench connections, prepared statements: the seeds' two autocommit statements on a table with only its primary key",
            ctx.args.clients
        ),
        _ => format!(
            "{} pgbench connections, prepared statements generated from the service's SQL",
            ctx.args.clients
        ),
    });
    Ok(m)
}

async fn pgbench_limit(
    ctx: &Ctx,
    db: &BenchDb,
    which: DbLimit,
) -> anyhow::Result<crate::pgbench::PgbenchResult> {
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
    if let DbLimit::AppNewKeys | DbLimit::AppMixed = which {
        in_app::create(db).await?;
        let new = write(
            "app_new.sql",
            in_app::new_key_script(workload::NEW_OPERATION),
        )?;
        let scripts = if let DbLimit::AppMixed = which {
            in_app::fill(db, ctx.args.replay_keys).await?;
            let replay = write(
                "app_replay.sql",
                in_app::replay_script(ctx.args.replay_keys),
            )?;
            vec![(new, MIXED_NEW_PERCENT), (replay, 100 - MIXED_NEW_PERCENT)]
        } else {
            vec![(new, 1)]
        };
        return run_pgbench(ctx, db, scripts, Vec::new()).await;
    }
    ctx.env.migrate(&db.url).await?;
    let (scripts, operation) = match which {
        DbLimit::ClaimComplete => (vec![(claim_complete()?, 1)], workload::NEW_OPERATION),
        DbLimit::Find => (vec![(find()?, 1)], workload::REPLAY_OPERATION),
        DbLimit::Mixed | DbLimit::AppNewKeys | DbLimit::AppMixed => (
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
    run_pgbench(ctx, db, scripts, defines).await
}

async fn run_pgbench(
    ctx: &Ctx,
    db: &BenchDb,
    scripts: Vec<(PathBuf, u32)>,
    defines: Vec<String>,
) -> anyhow::Result<crate::pgbench::PgbenchResult> {
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
