//! The embedded default against its anchor, with `--sqlite-clients` clients
//! each: the service on its SQLite file (`new-keys-sqlite`), and the seeds'
//! two statements on a SQLite file of their own with the same durability,
//! run from this process (`limit-app-sqlite-new-keys`). Neither touches
//! Postgres; each gets its own directory in the run's work directory,
//! removed afterwards.

use super::{from_load, Ctx};
use crate::hist::Latency;
use crate::in_app::sqlite::{AppDb, BUSY_TIMEOUT};
use crate::load::{per_op, LoadResult};
use crate::report::{Kind, Measurement};
use crate::steady::{self, Mix};

/// Claim → complete on fresh keys against a server started on its embedded
/// default: no `IDEMKEY_DATABASE_URL`, its own data directory.
pub async fn new_keys_sqlite(ctx: &Ctx) -> anyhow::Result<Measurement> {
    let clients = ctx.args.sqlite_clients;
    let mut env = ctx.env.clone();
    env.data_dir = ctx.work_dir.join("new-keys-sqlite");
    std::fs::create_dir_all(&env.data_dir)?;
    let db_file = env.data_dir.join("idemkey.db");
    let result = async {
        let server = env.start_embedded().await?;
        let run = steady::run(
            &server,
            None,
            &ctx.token,
            Mix::NewKeys,
            clients,
            ctx.args.replay_keys,
            ctx.spec(),
        )
        .await;
        let rss = server.peak_rss_mib().ok();
        server.stop().await?;
        // The rows must have gone where the default puts them.
        anyhow::ensure!(
            db_file.exists(),
            "the server did not open its embedded default at {}",
            db_file.display()
        );
        Ok((run?, rss))
    }
    .await;
    let _ = std::fs::remove_dir_all(&env.data_dir);
    let (r, rss) = result?;
    let mut m = from_load(
        Measurement::new(
            "new-keys-sqlite",
            "new keys on the embedded default (SQLite)",
            Kind::Scenario,
            clients,
        ),
        &r,
        rss,
    );
    m.limit = Some("limit-app-sqlite-new-keys".into());
    m.notes.push(
        "no IDEMKEY_DATABASE_URL: the server's own SQLite file (WAL, synchronous = FULL) in a fresh data directory; its CPU includes SQLite's work".into(),
    );
    Ok(m)
}

/// The seeds' two statements on their own SQLite file with the service's
/// durability, `--sqlite-clients` tasks on a pool of as many connections;
/// then one task on one connection, reported beside it.
pub async fn limit_app_sqlite(ctx: &Ctx) -> anyhow::Result<Measurement> {
    let clients = ctx.args.sqlite_clients;
    let dir = ctx.work_dir.join("limit-app-sqlite");
    std::fs::create_dir_all(&dir)?;
    let result = async {
        let db = AppDb::create(&dir.join("app.db"), clients).await?;
        let durability = db.durability().await?;
        anyhow::ensure!(
            durability.journal_mode == "wal" && durability.synchronous == "FULL",
            "SQLite did not apply the service's durability: {}",
            durability.describe()
        );
        let r = db.run(clients, ctx.spec()).await;
        let completed = db.completed().await?;
        db.close().await;
        anyhow::ensure!(
            completed >= i64::try_from(r.ops)?,
            "{} new keys counted but only {completed} rows completed",
            r.ops
        );
        let one = if clients > 1 {
            let db = AppDb::create(&dir.join("app-one.db"), 1).await?;
            let one = db.run(1, ctx.spec()).await;
            db.close().await;
            Some(one)
        } else {
            None
        };
        Ok((durability, r, one))
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    let (durability, r, one) = result?;
    let title = format!(
        "In-app SQL on SQLite (WAL, synchronous=FULL, busy {} s)",
        BUSY_TIMEOUT.as_secs()
    );
    let mut m =
        Measurement::new("limit-app-sqlite-new-keys", &title, Kind::Limit, clients).with_load(&r);
    // No server: the work is this process's (the app's statements, and
    // SQLite's on each connection's thread).
    m.cpu_us_per_op = app_cpu_us_per_op(&r);
    m.notes.push(format!(
        "insert on conflict + update on its own file, {clients} tasks on a pool of {clients} connections in this process; server CPU column: this process's; SQLite reports {}",
        durability.describe()
    ));
    if let Some(one) = one {
        let p99 = Latency::of(&one.latency).map(|l| l.p99_ms);
        m.notes.push(format!(
            "one task on one connection: {:.0}/s, p99 {} ms, {} µs CPU/op",
            one.throughput(),
            p99.map_or("–".into(), |p| format!("{p:.2}")),
            app_cpu_us_per_op(&one).map_or("–".into(), |c| format!("{c:.0}"))
        ));
        m.detail("one_connection_ops_per_s", one.throughput());
        m.detail("one_connection_p99_ms", p99);
        m.detail("one_connection_cpu_us_per_op", app_cpu_us_per_op(&one));
    }
    Ok(m)
}

fn app_cpu_us_per_op(r: &LoadResult) -> Option<f64> {
    per_op(r.generator_cpu?, r.ops)
}
