//! The archive worker's share of the suite: its throughput draining a
//! backlog (tiering, then cleanup), and lookups of tiered keys (scenario 6).

use std::time::{Duration, Instant};

use anyhow::Context;

use crate::db::{self, BenchDb};
use crate::measure::{drive, finish, from_load, human, Ctx, CACHE_OFF};
use crate::report::{Kind, Measurement};
use crate::steady::Mix;

/// How fast one node's archive worker drained a backlog.
pub struct WorkerThroughput {
    pub tiered: u64,
    pub tiering_seconds: f64,
    pub cleaned: u64,
    pub cleanup_seconds: f64,
}

pub fn rate(n: u64, seconds: f64) -> String {
    if seconds > 0.0 {
        format!("{:.0}", n as f64 / seconds)
    } else {
        "n/a".into()
    }
}

/// Starts a server whose archive worker wakes at once and drains `db`'s
/// backlog (tiering first, then cleanup, in the same wake); times each half
/// by watching the backlog from outside.
pub async fn worker_throughput(ctx: &Ctx, db: &BenchDb) -> anyhow::Result<WorkerThroughput> {
    const POLL: Duration = Duration::from_millis(250);
    const BUDGET: Duration = Duration::from_secs(600);
    let (due, expired) = db::worker_backlog(db).await?;
    let mut env = ctx.env.clone();
    env.extra
        .push(("IDEMKEY_WORKER_INTERVAL".into(), "1h".into()));
    let started = Instant::now();
    let server = env.start(&db.url).await?;
    let mut tiered_at = None;
    let outcome = loop {
        let (left_due, left_expired) = db::worker_backlog(db).await?;
        if tiered_at.is_none() && left_due == 0 {
            tiered_at = Some(started.elapsed());
        }
        if let (Some(t), 0) = (tiered_at, left_expired) {
            break Ok(WorkerThroughput {
                tiered: due.unsigned_abs(),
                tiering_seconds: t.as_secs_f64(),
                cleaned: expired.unsigned_abs(),
                cleanup_seconds: (started.elapsed() - t).as_secs_f64(),
            });
        }
        if started.elapsed() > BUDGET {
            break Err(anyhow::anyhow!(
                "the worker left {left_due} due and {left_expired} expired records after {BUDGET:?}"
            ));
        }
        tokio::time::sleep(POLL).await;
    };
    server.stop().await?;
    outcome
}

/// (6) Replays of tiered keys with the cache off: every answer is a read of
/// the routing entry plus a ranged read of the archive (the server's default
/// local-directory archive). Judged against the in-house table lookup.
pub async fn tiered(ctx: &Ctx) -> anyhow::Result<Measurement> {
    let (var, value) = CACHE_OFF.context("the server has no cache switch")?;
    let mut env = ctx.env.clone();
    env.extra.push((var.into(), value.into()));
    let db = ctx.db("tiered").await?;
    let result = async {
        env.migrate(&db.url).await?;
        db::fill_replay_keys(&db, ctx.args.replay_keys).await?;
        db::make_all_due(&db).await?;
        let w = worker_throughput(ctx, &db).await?;
        let load = drive(ctx, &env, &db, Mix::Replays).await?;
        Ok::<_, anyhow::Error>((load, w))
    }
    .await;
    let ((r, rss), w) = finish(db, result).await?;
    let mut m = from_load(
        Measurement::new(
            "tiered",
            "lookups of tiered keys (cache off)",
            Kind::Scenario,
            ctx.args.clients,
        ),
        &r,
        rss,
    );
    m.limit = Some("limit-db-find".into());
    m.notes.push(format!(
        "{} keys tiered first ({} records/s), then random replays, each a routing-entry read plus a ranged read of a local-directory segment",
        human(ctx.args.replay_keys),
        rate(w.tiered, w.tiering_seconds)
    ));
    Ok(m)
}
