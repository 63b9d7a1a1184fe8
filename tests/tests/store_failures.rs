//! When the store cannot answer, the answer is a retryable 503 — never "new"
//! (invariant 6). And the quarantined row of the claim table.

use std::time::{Duration, Instant};

use idemkey_tests::faults::cluster::PgCluster;
use idemkey_tests::TestApp;
use serde_json::json;
use sqlx::Connection;

const OP: &str = "charges.create";

/// Cuts the app's database off (no new connections, existing ones ended), or
/// lets it back in.
async fn set_database_reachable(app: &TestApp, reachable: bool) {
    let name = app.database_url.rsplit('/').next().unwrap();
    let mut admin = sqlx::PgConnection::connect(&idemkey_tests::db::admin_url())
        .await
        .unwrap();
    sqlx::query(&format!(
        "alter database {name} with allow_connections {reachable}"
    ))
    .execute(&mut admin)
    .await
    .unwrap();
    if !reachable {
        sqlx::query("select pg_terminate_backend(pid) from pg_stat_activity where datname = $1")
            .bind(name)
            .execute(&mut admin)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn claims_get_a_retryable_503_while_the_database_cannot_answer_and_replay_after() {
    let app = TestApp::spawn().await;
    let token = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    app.complete(OP, "k1", &token, json!({"status_code": 201}))
        .await
        .assert(200, "completed");
    app.client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();

    set_database_reachable(&app, false).await;
    let during = app.claim(OP, "k1", json!({"a": 1})).await;
    let new_key = app.claim(OP, "k2", json!({"a": 1})).await;
    let ready = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .unwrap();
    let healthy = app
        .client
        .get(format!("{}/healthz", app.address))
        .send()
        .await
        .unwrap();
    set_database_reachable(&app, true).await;

    during.assert(503, "unavailable");
    assert_eq!(during.retry_after.as_deref(), Some("1"));
    new_key.assert(503, "unavailable");
    assert_eq!(ready.status(), 503, "readyz follows the database");
    assert_eq!(healthy.status(), 200, "healthz is the process alone");
    app.claim(OP, "k1", json!({"a": 1}))
        .await
        .assert(200, "completed");
    app.claim(OP, "k2", json!({"a": 1}))
        .await
        .assert(201, "claimed");
}

#[tokio::test]
async fn a_quarantined_key_refuses_claims_until_it_is_resolved() {
    let app = TestApp::spawn().await;
    app.claim(OP, "k1", json!({"a": 1}))
        .await
        .assert(201, "claimed");
    app.sql("update idempotency_key set state = 'quarantined', quarantine_reason = 'provider timeout' where key = 'k1'")
        .await;

    let claim = app.claim(OP, "k1", json!({"a": 1})).await;
    let reused = app.claim(OP, "k1", json!({"a": 2})).await;
    let lookup = app.lookup(OP, "k1").await;

    claim.assert(409, "quarantined");
    reused.assert(422, "key_reused");
    lookup.assert(200, "quarantined");
    assert_eq!(lookup.json()["quarantine_reason"], "provider timeout");
}

/// A database that is away costs each request no more than a moment: after
/// a few calls in a row could not reach it, the rest are refused at once
/// (503 with `Retry-After`), `/readyz` says so within a second, and calls go
/// through again as soon as it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_the_database_stopped_calls_fail_fast_and_recover_at_once() {
    let cluster = PgCluster::start().await;
    let app = TestApp::spawn_node(&cluster.fresh_database().await, |_| {}).await;
    app.claim(OP, "k1", json!({"a": 1}))
        .await
        .assert(201, "claimed");

    // The first calls wait for the pool to give up connecting; three in a
    // row open the breaker.
    tokio::task::block_in_place(|| cluster.stop("fast"));
    let started = Instant::now();
    let (a, b, c) = tokio::join!(
        app.claim(OP, "w1", json!({"a": 1})),
        app.claim(OP, "w2", json!({"a": 1})),
        app.claim(OP, "w3", json!({"a": 1})),
    );
    let first_took = started.elapsed();
    for waited in [a, b, c] {
        waited.assert(503, "unavailable");
    }

    let started = Instant::now();
    let fast = app.claim(OP, "k2", json!({"a": 1})).await;
    let fast_took = started.elapsed();
    let started = Instant::now();
    let ready = app
        .client
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .unwrap();
    let ready_took = started.elapsed();

    fast.assert(503, "unavailable");
    assert_eq!(fast.retry_after.as_deref(), Some("1"));
    assert!(fast_took < Duration::from_millis(500), "took {fast_took:?}");
    assert_eq!(ready.status(), 503);
    assert!(ready_took < Duration::from_secs(1), "took {ready_took:?}");

    // Back: the first calls after the database restarts go through.
    tokio::task::block_in_place(|| cluster.start_server());
    let back = Instant::now();
    loop {
        let answer = app.claim(OP, "k3", json!({"a": 1})).await;
        if answer.status == 201 {
            break;
        }
        answer.assert(503, "unavailable");
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "still refused {:?} after the database came back",
            back.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "database stopped: the first calls took {first_took:?}, then one took {fast_took:?} \
         and /readyz {ready_took:?}; back {:?} after the restart",
        back.elapsed()
    );
    app.lookup(OP, "k1").await.assert(200, "in_progress");
}
