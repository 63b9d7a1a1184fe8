//! The rounds of `tests/tests/fault_rounds.rs`: for each fault, the
//! processes it needs, the shape of its class and callers, and the fault
//! injected again and again while the callers work.

use std::collections::HashMap;
use std::net::ToSocketAddrs;
use std::time::Duration;

use idemkey_api::auth::Role;
use serde_json::json;
use tokio::task::block_in_place;
use tokio::time::Instant;

use super::checker::{Figures, Violation};
use super::cluster::PgCluster;
use super::contested::Contest;
use super::fleet::{Fleet, Provider};
use super::proxy::Proxy;
use super::{pause, Running, Settings, Shape};
use crate::app::test_vars;
use crate::db::{admin_url, fresh_database, scalar};
use crate::garage::GarageServer;
use crate::redis::RedisServer;
use crate::tiering::{archive_vars, until};
use crate::tokens::{fresh_tenant, token};

/// Every round, in the order a run cycles through them.
pub const FAULTS: [&str; 7] = [
    "kill", "postgres", "redis", "s3", "link", "window", "release",
];

/// A round's figures and the promises it found broken.
pub type Report = (Figures, Vec<Violation>);

/// The connections of the `release` round's slow server.
const SLOW_POOL: u32 = 24;

/// Runs the round of `fault` (one of [`FAULTS`]).
pub async fn run(fault: &str, settings: &Settings) -> Report {
    match fault {
        "kill" => kill_round(settings).await,
        "postgres" => postgres_round(settings).await,
        "redis" => redis_round(settings).await,
        "s3" => s3_round(settings).await,
        "link" => link_round(settings).await,
        "window" => window_round(settings).await,
        "release" => release_round(settings).await,
        _ => panic!("no fault round {fault:?}"),
    }
}

/// The variables of a server on `database_url` with its workers waking
/// twice a second.
pub fn node_vars(database_url: &str) -> HashMap<String, String> {
    let mut vars = test_vars(database_url);
    vars.insert("IDEMKEY_WORKERS".into(), "on".into());
    vars.insert("IDEMKEY_WORKER_INTERVAL".into(), "500ms".into());
    vars
}

/// Three servers; one of them killed with SIGKILL at random moments and
/// started again a moment later.
async fn kill_round(settings: &Settings) -> Report {
    let db = fresh_database().await;
    let fleet = Fleet::start(vec![node_vars(&db); 3]).await;
    let provider = Provider::start().await;
    let started = Instant::now();
    let mut running = Running::start("kill", &fleet, &provider, settings, Shape::default()).await;
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
    let mut running =
        Running::start("postgres", &fleet, &provider, settings, Shape::default()).await;
    let mut faults = 0u64;
    while Instant::now() < running.load_ends {
        pause(Duration::from_millis(500), Duration::from_millis(1_500)).await;
        let mode = if faults.is_multiple_of(2) {
            "immediate"
        } else {
            "fast"
        };
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
    let mut running = Running::start("redis", &fleet, &provider, settings, Shape::default()).await;
    let mut faults = 0u64;
    while Instant::now() < running.load_ends {
        pause(Duration::from_millis(500), Duration::from_millis(1_500)).await;
        if faults.is_multiple_of(2) {
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
    let quick = Shape {
        policy: json!({"replay_window": "1h", "hot_retention": "1s", "lease": "2s"}),
        ..Shape::default()
    };
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
    let mut running = Running::start("link", &fleet, &provider, settings, Shape::default()).await;
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

/// Three servers and a class whose replay window is two seconds (claims
/// ask for 1.5 s leases): many owners work past the window under
/// heartbeats, owners that die after the effect are recovered after the
/// first window ended, later callers come while the key is protected; one
/// server at a time is killed with SIGKILL and started again.
async fn window_round(settings: &Settings) -> Report {
    let db = fresh_database().await;
    let fleet = Fleet::start(vec![node_vars(&db); 3]).await;
    let provider = Provider::start().await;
    let short = Shape {
        policy: json!({"replay_window": "2s", "lease": "2s"}),
        window: Duration::from_secs(2),
        lease_ms: 1_500,
        short_window: true,
        contested: None,
    };
    let started = Instant::now();
    let mut running = Running::start("window", &fleet, &provider, settings, short).await;
    let mut faults = 0;
    while Instant::now() < running.load_ends {
        pause(Duration::from_millis(500), Duration::from_millis(2_000)).await;
        let victim = rand::random_range(0..fleet.len());
        fleet.kill(victim).await;
        faults += 1;
        pause(Duration::ZERO, Duration::from_millis(500)).await;
        fleet.restart(victim).await;
    }
    running.finish().await;
    running.judge("window", &provider, faults, started).await
}

/// Two servers for the usual callers, and a third whose link to Postgres
/// (through a TCP proxy) is delayed by 600 ms each way once it is warm:
/// the contested keys' retries go there, so their reads and takeovers reach
/// the database seconds apart while the key is released and claimed again
/// for a corrected request (tests/src/faults/contested.rs). Each contested
/// key counts as one fault.
async fn release_round(settings: &Settings) -> Report {
    let db = fresh_database().await;
    let fleet = Fleet::start(vec![node_vars(&db); 2]).await;
    let proxy = Proxy::start(postgres_address()).await;
    // Without TLS, so the tap can read which key a statement names.
    let mut vars = test_vars(&format!("{}?sslmode=disable", proxy.url_for(&db)));
    vars.insert("IDEMKEY_DATABASE_POOL".into(), SLOW_POOL.to_string());
    let slow = Fleet::start(vec![vars]).await;
    let slow_address = slow.addresses.get(0);
    warm_up(&slow_address, &proxy).await;
    let latency = Duration::from_millis(600);
    proxy.set_latency(latency);
    let provider = Provider::start().await;
    let contested = Shape {
        contested: Some(Contest {
            server: slow_address,
            latency,
            tap: proxy.tap.clone(),
        }),
        ..Shape::default()
    };
    let started = Instant::now();
    let mut running = Running::start("release", &fleet, &provider, settings, contested).await;
    running.finish().await;
    let faults = settings.operations.div_ceil(8) as u64;
    running.judge("release", &provider, faults, started).await
}

/// Fills the server's pool while its link is still quick (a new
/// connection over the slow link would take seconds): concurrent lookups
/// over a link delayed by 50 ms, each holding a connection a while.
async fn warm_up(server: &str, proxy: &Proxy) {
    proxy.set_latency(Duration::from_millis(50));
    let reader = token(&fresh_tenant(), &[Role::Viewer]);
    let mut lookups = tokio::task::JoinSet::new();
    for n in 0..SLOW_POOL {
        let (url, reader) = (format!("{server}/v1/keys/warm/k{n}"), reader.clone());
        lookups.spawn(async move {
            reqwest::Client::new()
                .get(url)
                .bearer_auth(reader)
                .send()
                .await
        });
    }
    while let Some(answer) = lookups.join_next().await {
        answer
            .expect("a lookup")
            .expect("the slow server answers while its link is quick");
    }
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
