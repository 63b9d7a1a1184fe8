//! Fault rounds: "no effect twice" on real processes while things break.
//!
//! Each round runs several `idemkey` servers on one database, a fake
//! provider that never deduplicates, and many concurrent clients following
//! the recipe (tests/src/faults/clients.rs); one fault is injected again
//! and again during the load phase, then healed, and the checker
//! (tests/src/faults/checker.rs) judges every key: one charge per effect id,
//! at most one `claimed`, the replay equal to what the effect's completer
//! stored, nothing acknowledged lost. The rounds:
//!
//! - `kill`: a server process killed with SIGKILL at random moments, then
//!   started again (three servers);
//! - `postgres`: a private Postgres cluster crashed (`immediate`) or shut
//!   down (`fast`), then started again;
//! - `redis`: the Redis cache flushed, or killed and started again empty;
//! - `s3`: a private Garage (the archive) killed and started again while
//!   the tiering worker moves outcomes to it every 200 ms;
//! - `link`: one server's link to Postgres (through a TCP proxy) slowed
//!   down, then cut: every live connection dropped, new ones refused.
//!
//! Run with `-- --nocapture` to see the figures. `IDEMKEY_FAULT_ROUNDS`,
//! `IDEMKEY_FAULT_OPS`, `IDEMKEY_FAULT_SECONDS` and `IDEMKEY_FAULT_ONLY`
//! size a longer soak (tests/src/faults/mod.rs).

use std::collections::HashMap;
use std::net::ToSocketAddrs;
use std::time::Duration;

use idemkey_tests::app::test_vars;
use idemkey_tests::db::{admin_url, fresh_database, scalar};
use idemkey_tests::faults::checker::{Figures, Violation};
use idemkey_tests::faults::cluster::PgCluster;
use idemkey_tests::faults::fleet::{Fleet, Provider};
use idemkey_tests::faults::proxy::Proxy;
use idemkey_tests::faults::{pause, Running, Settings};
use idemkey_tests::garage::GarageServer;
use idemkey_tests::redis::RedisServer;
use idemkey_tests::tiering::{archive_vars, until};
use serde_json::json;
use tokio::task::block_in_place;
use tokio::time::Instant;

const FAULTS: [&str; 5] = ["kill", "postgres", "redis", "s3", "link"];

type Report = (Figures, Vec<Violation>);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_effect_happens_twice_whatever_fails() {
    let all = Settings::from_env(FAULTS.len());
    let faults: Vec<&str> = FAULTS.into_iter().filter(|f| all.runs(f)).collect();
    assert!(
        !faults.is_empty(),
        "IDEMKEY_FAULT_ONLY names no fault of {FAULTS:?}"
    );
    let settings = Settings {
        rounds: std::env::var("IDEMKEY_FAULT_ROUNDS").map_or(faults.len(), |_| all.rounds),
        ..all
    };
    let started = Instant::now();
    let mut total = Figures::default();
    let mut violations = Vec::new();
    for round in 0..settings.rounds {
        let fault = faults[round % faults.len()];
        let (figures, found) = match fault {
            "kill" => kill_round(&settings).await,
            "postgres" => postgres_round(&settings).await,
            "redis" => redis_round(&settings).await,
            "s3" => s3_round(&settings).await,
            _ => link_round(&settings).await,
        };
        total += figures;
        for v in found {
            println!("VIOLATION in the {fault} round: {v}");
            violations.push(format!("[{fault}] {v}"));
        }
    }
    println!(
        "fault rounds, total: {total} ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    assert!(
        violations.is_empty(),
        "{} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// The checker itself: clients that skip the provider lookup on
/// `recovering` charge again after every death, and the round must say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_clients_that_recover_without_looking() {
    // Arrange: one server, no fault, half of the owners dying after the charge.
    let settings = Settings {
        operations: 20,
        load: Duration::from_secs(3),
        die_per_mille: 500,
        careless: true,
        ..Settings::from_env(1)
    };
    let db = fresh_database().await;
    let fleet = Fleet::start(vec![node_vars(&db)]).await;
    let provider = Provider::start().await;

    // Act
    let started = Instant::now();
    let mut running = Running::start("careless", &fleet, &provider, &settings, policy()).await;
    running.finish().await;
    let (figures, violations) = running.judge("careless", &provider, 0, started).await;

    // Assert: every death was followed by a second charge, and reported.
    println!(
        "the careless clients' round: {} violations found, as it should",
        violations.len()
    );
    assert!(figures.deaths > 0, "some owners died: {figures}");
    assert!(figures.charges > figures.operations, "{figures}");
    assert!(
        violations
            .iter()
            .any(|v| v.what.contains("charged its effect id 2 times")),
        "the checker reports the duplicate charges"
    );
}

/// The variables of a server on `database_url` with its workers waking
/// twice a second.
fn node_vars(database_url: &str) -> HashMap<String, String> {
    let mut vars = test_vars(database_url);
    vars.insert("IDEMKEY_WORKERS".into(), "on".into());
    vars.insert("IDEMKEY_WORKER_INTERVAL".into(), "500ms".into());
    vars
}

/// Short leases (claims ask for 2 s) inside a one-hour window.
fn policy() -> serde_json::Value {
    json!({"replay_window": "1h", "lease": "2s"})
}

/// Three servers; one of them killed with SIGKILL at random moments and
/// started again a moment later.
async fn kill_round(settings: &Settings) -> Report {
    let db = fresh_database().await;
    let fleet = Fleet::start(vec![node_vars(&db); 3]).await;
    let provider = Provider::start().await;
    let started = Instant::now();
    let mut running = Running::start("kill", &fleet, &provider, settings, policy()).await;
    let mut faults = 0;
    while Instant::now() < running.load_ends {
        pause(Duration::from_millis(200), Duration::from_millis(1_000)).await;
        let victim = rand::random_range(0..fleet.len());
        fleet.kill(victim).await;
        faults += 1;
        pause(Duration::ZERO, Duration::from_millis(700)).await;
        fleet.restart(victim).await;
    }
    running.finish().await;
    running.judge("kill", &provider, faults, started).await
}

/// Two servers on a private Postgres cluster, which crashes or shuts down
/// and comes back after an outage of up to 1.5 s.
async fn postgres_round(settings: &Settings) -> Report {
    let cluster = PgCluster::start().await;
    let db = cluster.fresh_database().await;
    let fleet = Fleet::start(vec![node_vars(&db); 2]).await;
    let provider = Provider::start().await;
    let started = Instant::now();
    let mut running = Running::start("postgres", &fleet, &provider, settings, policy()).await;
    let mut faults = 0;
    while Instant::now() < running.load_ends {
        pause(Duration::from_millis(500), Duration::from_millis(1_500)).await;
        let mode = if faults % 2 == 0 { "immediate" } else { "fast" };
        block_in_place(|| cluster.stop(mode));
        faults += 1;
        pause(Duration::from_millis(200), Duration::from_millis(1_500)).await;
        block_in_place(|| cluster.start_server());
    }
    running.finish().await;
    running.judge("postgres", &provider, faults, started).await
}

/// Two servers sharing a private Redis cache, which is flushed, or killed
/// and started again empty after up to 1.5 s.
async fn redis_round(settings: &Settings) -> Report {
    let mut redis = RedisServer::start().await;
    let mut vars = node_vars(&fresh_database().await);
    vars.insert("IDEMKEY_REDIS_URL".into(), redis.url());
    let fleet = Fleet::start(vec![vars; 2]).await;
    let provider = Provider::start().await;
    let started = Instant::now();
    let mut running = Running::start("redis", &fleet, &provider, settings, policy()).await;
    let mut faults = 0;
    while Instant::now() < running.load_ends {
        pause(Duration::from_millis(500), Duration::from_millis(1_500)).await;
        if faults % 2 == 0 {
            redis.flushall().await;
        } else {
            redis.stop().await;
            pause(Duration::from_millis(300), Duration::from_millis(1_500)).await;
            redis.restart().await;
        }
        faults += 1;
    }
    running.finish().await;
    running.judge("redis", &provider, faults, started).await
}

/// Two servers tiering to a private Garage every 200 ms (records tier one
/// second after their first claim); Garage is killed and started again
/// while they do. At the end every key must have reached the archive, so
/// the final replays read through it.
async fn s3_round(settings: &Settings) -> Report {
    let garage = block_in_place(start_private_garage);
    let db = fresh_database().await;
    let mut vars = node_vars(&db);
    archive_vars(&mut vars, &garage.target);
    let fleet = Fleet::start(vec![vars; 2]).await;
    let provider = Provider::start().await;
    let quick = json!({"replay_window": "1h", "hot_retention": "1s", "lease": "2s"});
    let started = Instant::now();
    let mut running = Running::start("s3", &fleet, &provider, settings, quick).await;
    let mut faults = 0;
    while Instant::now() < running.load_ends {
        pause(Duration::from_millis(800), Duration::from_millis(2_000)).await;
        block_in_place(|| garage.stop());
        faults += 1;
        pause(Duration::from_millis(500), Duration::from_millis(2_000)).await;
        block_in_place(|| garage.restart());
    }
    running.finish().await;
    let keys = settings.operations as i64;
    let archived = "select count(*) from idempotency_key where segment is not null";
    until(
        "every key of the s3 round is archived",
        Duration::from_secs(60),
        || async { scalar(&db, archived).await == keys },
    )
    .await;
    println!("fault round s3: all {keys} outcomes archived before the final replays");
    running.judge("s3", &provider, faults, started).await
}

/// A private Garage node; fails loudly when Garage is not installed
/// (scripts/install-garage.sh builds it once).
fn start_private_garage() -> GarageServer {
    let tools = std::env::var_os("IDEMKEY_TOOLS_DIR").map_or_else(
        || {
            std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/idemkey-tools")
        },
        std::path::PathBuf::from,
    );
    assert!(
        tools.join("bin/garage").exists(),
        "Garage is not installed in {}: run scripts/install-garage.sh (once, 15-20 minutes) \
         or scripts/services.sh",
        tools.display()
    );
    GarageServer::start()
}

/// Three servers, each reaching Postgres through its own proxy; one link
/// at a time gets 20-250 ms of latency each way for a while, then is cut
/// (live connections dropped, new ones refused) for up to 1.5 s.
async fn link_round(settings: &Settings) -> Report {
    let db = fresh_database().await;
    let upstream = postgres_address();
    let mut proxies = Vec::new();
    for _ in 0..3 {
        proxies.push(Proxy::start(upstream).await);
    }
    let vars = proxies.iter().map(|p| node_vars(&p.url_for(&db))).collect();
    let fleet = Fleet::start(vars).await;
    let provider = Provider::start().await;
    let started = Instant::now();
    let mut running = Running::start("link", &fleet, &provider, settings, policy()).await;
    let mut faults = 0;
    while Instant::now() < running.load_ends {
        let proxy = &proxies[rand::random_range(0..proxies.len())];
        proxy.set_latency(Duration::from_millis(rand::random_range(20..=250)));
        pause(Duration::from_millis(500), Duration::from_millis(2_000)).await;
        proxy.cut();
        faults += 2;
        pause(Duration::from_millis(200), Duration::from_millis(1_500)).await;
        proxy.heal();
        pause(Duration::from_millis(200), Duration::from_millis(800)).await;
    }
    running.finish().await;
    running.judge("link", &provider, faults, started).await
}

/// The shared Postgres server's address (from the tests' admin URL).
fn postgres_address() -> std::net::SocketAddr {
    let url = admin_url();
    let authority = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .expect("a postgres:// URL");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:5432")
    };
    host.to_socket_addrs()
        .expect("resolve the Postgres host")
        .next()
        .expect("an address")
}
