//! One function per measurement. Each gets a fresh database (and, where it
//! drives the service, a fresh server process, so its peak RSS is its own),
//! and drops the database afterwards, whatever happened.
//!
//! This module holds what every measurement shares: the run's context, the
//! database's clean-up, driving a server with a load mix, and turning a
//! failure into a report row. The measurements themselves are in `limits`
//! (the machine's own limits: HTTP, and pgbench with the service's SQL),
//! `scenarios` (the service under load: new keys, growth, replays, mixed,
//! a hot key, idle connections) and `embedded` (the service on its SQLite
//! default against the same in-app SQL on SQLite); all are re-exported here.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use crate::cli::Args;
use crate::db::BenchDb;
use crate::load::{LoadResult, LoadSpec};
use crate::report::{Kind, Measurement};
use crate::server::ServerEnv;
use crate::steady::{self, Mix};

mod embedded;
mod limits;
mod scenarios;

pub use embedded::{limit_app_sqlite, new_keys_sqlite};
pub use limits::{limit_db, limit_http, DbLimit};
pub use scenarios::{hot_key, idle_connections, mixed, new_keys, replays, GROWTH_DUE_EVERY};

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
        Some(&db.name),
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

pub fn human(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n.is_multiple_of(1_000_000) => format!("{}M", n / 1_000_000),
        n if n >= 1_000 && n.is_multiple_of(1_000) => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
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
