//! `wait_ms`: a duplicate that arrives while the owner works waits, and is
//! woken by the owner's completion (or release) — pushed, not polled — on
//! the same node or, through Postgres, on another one.

use std::time::Duration;

use idemkey_api::domain::{IdempotencyKey, OperationName, ScopedKey, TenantId};
use idemkey_tests::app::{encode, test_vars, Answer, Metrics};
use idemkey_tests::db::fresh_database;
use idemkey_tests::process::ServerProcess;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::waiting::until_waiting;
use idemkey_tests::TestApp;
use serde_json::{json, Value};
use sqlx::Connection;

const OP: &str = "charges.create";

fn outcome() -> Value {
    json!({"status_code": 201, "body": {"charge": "ch_9", "amount": "25.00"}, "resource_id": "ch_9"})
}

/// A duplicate claim of `key` on `app` that waits up to 10 s for its owner.
fn waiting_claim(app: &TestApp, key: &str) -> impl std::future::Future<Output = Answer> {
    let (client, url, bearer) = (app.client.clone(), app.key_url(OP, key), app.token.clone());
    async move {
        let body = json!({"request": {"a": 1}, "wait_ms": 10_000});
        let response = client
            .post(format!("{url}/claim"))
            .bearer_auth(bearer)
            .json(&body)
            .send()
            .await
            .unwrap();
        Answer::from(response).await
    }
}

async fn a_waiting_duplicate_is_answered_with_the_outcome_once_the_owner_completes(app: TestApp) {
    // Arrange: an owner, and a duplicate that is already waiting.
    let token = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    let waiter = tokio::spawn(waiting_claim(&app, "k1"));
    until_waiting(|| app.metrics(), 1.0).await;

    // Act
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
    let waited = waiter.await.unwrap();

    // Assert: it was woken by the completion itself, not a periodic re-read.
    waited.assert(200, "completed");
    assert_eq!(waited.json()["outcome"], outcome());
    let metrics = app.metrics().await;
    assert!(metrics.get("idemkey_waiter_wakeups_total{cause=\"event\"}") >= 1.0);
    assert_eq!(metrics.get("idemkey_claim_waiters"), 0.0);
}

async fn a_waiting_duplicate_becomes_the_owner_when_the_owner_releases(app: TestApp) {
    let token = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    let waiter = tokio::spawn(waiting_claim(&app, "k1"));
    until_waiting(|| app.metrics(), 1.0).await;

    app.release(OP, "k1", &token).await.assert(200, "released");
    let waited = waiter.await.unwrap();

    waited.assert(201, "claimed");
    assert_eq!(waited.json()["attempt"], 1);
    let metrics = app.metrics().await;
    assert!(metrics.get("idemkey_waiter_wakeups_total{cause=\"event\"}") >= 1.0);
}

async fn many_waiting_duplicates_share_one_look_when_they_are_woken(app: TestApp) {
    // Arrange: twenty duplicates waiting on one key.
    let token = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    let mut waiters = Vec::new();
    for _ in 0..20 {
        waiters.push(tokio::spawn(waiting_claim(&app, "k1")));
    }
    until_waiting(|| app.metrics(), 20.0).await;
    let before = app.metrics().await.statements();

    // Act
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
    for waiter in waiters {
        let waited = waiter.await.unwrap();
        waited.assert(200, "completed");
        assert_eq!(waited.json()["outcome"], outcome());
    }

    // Assert: the completion itself, then a handful of shared looks (two
    // statements each) rather than one per waiter.
    let spent = app.metrics().await.statements() - before;
    println!("statements for 20 woken waiters (with the completion): {spent}");
    assert!(spent <= 1.0 + 2.0 * 4.0, "{spent} statements");
}

/// A storm of duplicates that start waiting at once: on Postgres each
/// must be registered as a waiter before it waits, and they share one
/// registration and, after it, a handful of looks, rather than each making
/// its own registration and then needing a look newer than it.
async fn a_storm_of_duplicates_starts_waiting_on_a_handful_of_statements(app: TestApp) {
    // Arrange
    let token = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    let before = app.metrics().await.statements();

    // Act: sixty duplicates at once.
    let waiters: Vec<_> = (0..60)
        .map(|_| tokio::spawn(waiting_claim(&app, "k1")))
        .collect();
    until_waiting(|| app.metrics(), 60.0).await;
    let spent = app.metrics().await.statements() - before;

    // Assert: a look shared by the first ones (insert, read), one
    // registration, and a look after it — a few of each as arrivals
    // straddle them — never one per duplicate.
    println!("statements for 60 duplicates to start waiting: {spent}");
    assert!(
        spent <= 16.0,
        "{spent} statements for 60 waiting duplicates"
    );
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
    for waiter in waiters {
        waiter.await.unwrap().assert(200, "completed");
    }
}

idemkey_tests::on_every_backend!(
    a_waiting_duplicate_is_answered_with_the_outcome_once_the_owner_completes,
    a_waiting_duplicate_becomes_the_owner_when_the_owner_releases,
    many_waiting_duplicates_share_one_look_when_they_are_woken,
    a_storm_of_duplicates_starts_waiting_on_a_handful_of_statements,
);

async fn post(url: String, bearer: &str, body: Value) -> Answer {
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(bearer)
        .json(&body)
        .send()
        .await
        .expect("request");
    Answer::from(response).await
}

/// A server process's metrics, scraped with a `metrics` token.
async fn metrics_of(address: &str) -> Metrics {
    let scraper = token("ops", &[idemkey_api::auth::Role::Metrics]);
    let response = reqwest::Client::new()
        .get(format!("{address}/metrics"))
        .bearer_auth(scraper)
        .send()
        .await
        .expect("metrics");
    assert_eq!(response.status(), 200, "a metrics token may scrape");
    Metrics::parse(&response.text().await.expect("metrics text"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_on_one_node_is_woken_by_a_completion_on_another() {
    // Arrange: two server processes on one database; the owner claims on B,
    // the duplicate waits on A.
    let database_url = fresh_database().await;
    let vars = test_vars(&database_url);
    let a = ServerProcess::start(&vars).await;
    let b = ServerProcess::start(&vars).await;
    let bearer = token(&fresh_tenant(), &[idemkey_api::auth::Role::Client]);
    let on = |server: &ServerProcess, call: &str| {
        format!(
            "{}/v1/keys/{OP}/{}/{call}",
            server.address,
            encode("order-7")
        )
    };
    let claimed = post(on(&b, "claim"), &bearer, json!({"request": {"a": 1}})).await;
    claimed.assert(201, "claimed");
    let waiter = tokio::spawn({
        let (url, bearer) = (on(&a, "claim"), bearer.clone());
        async move {
            post(
                url,
                &bearer,
                json!({"request": {"a": 1}, "wait_ms": 10_000}),
            )
            .await
        }
    });
    until_waiting(|| metrics_of(&a.address), 1.0).await;

    // Act
    let body = json!({"owner_token": claimed.owner_token(), "outcome": outcome()});
    post(on(&b, "complete"), &bearer, body)
        .await
        .assert(200, "completed");
    let waited = waiter.await.unwrap();

    // Assert: A heard of it from the database and woke its waiter.
    waited.assert(200, "completed");
    assert_eq!(waited.json()["outcome"], outcome());
    let metrics = metrics_of(&a.address).await;
    assert!(metrics.get("idemkey_key_events_total{source=\"postgres\"}") >= 1.0);
    assert!(metrics.get("idemkey_waiter_wakeups_total{cause=\"event\"}") >= 1.0);
    a.stop().await;
    b.stop().await;
}

/// Listens on the key-event channel of a database.
async fn key_events(database_url: &str) -> sqlx::postgres::PgListener {
    let mut listener = sqlx::postgres::PgListener::connect(database_url)
        .await
        .unwrap();
    listener
        .listen(idemkey_api::store::KEY_EVENTS_CHANNEL)
        .await
        .unwrap();
    listener
}

/// Every key event heard before a sentinel sent now: notifications arrive
/// in commit order, so the sentinel's arrival proves nothing committed
/// earlier is still on its way.
async fn events_before_sentinel(
    listener: &mut sqlx::postgres::PgListener,
    database_url: &str,
) -> Vec<String> {
    let mut conn = sqlx::postgres::PgConnection::connect(database_url)
        .await
        .unwrap();
    sqlx::query("select pg_notify($1, 'sentinel')")
        .bind(idemkey_api::store::KEY_EVENTS_CHANNEL)
        .execute(&mut conn)
        .await
        .unwrap();
    let mut heard = Vec::new();
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .expect("the sentinel")
            .unwrap();
        if n.payload() == "sentinel" {
            return heard;
        }
        heard.push(n.payload().to_owned());
    }
}

fn scoped(tenant: &str, key: &str) -> ScopedKey {
    ScopedKey {
        tenant: TenantId::parse(tenant).unwrap(),
        operation: OperationName::parse(OP).unwrap(),
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

#[tokio::test]
async fn changes_nobody_waits_on_send_no_key_event() {
    // Arrange: a server on Postgres, and a listener on its key events.
    let app = TestApp::spawn().await;
    let mut listener = key_events(&app.database_url).await;

    // Act: complete, release, quarantine and resolve keys nobody waits on.
    let token = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
    let token = app.claim(OP, "k2", json!({"a": 1})).await.owner_token();
    app.release(OP, "k2", &token).await.assert(200, "released");
    let token = app.claim(OP, "k3", json!({"a": 1})).await.owner_token();
    let body = json!({"owner_token": token, "reason": "timeout"});
    app.call(OP, "k3", "quarantine", body)
        .await
        .assert(200, "quarantined");
    let heard = events_before_sentinel(&mut listener, &app.database_url).await;

    // Assert: not one notification (each would have serialised commits).
    assert_eq!(heard, Vec::<String>::new());
    let statements = app.metrics().await;
    assert_eq!(
        statements.get("idemkey_store_statements_total{statement=\"announce\"}"),
        0.0
    );
}

#[tokio::test]
async fn a_window_shortened_by_hand_is_announced_by_the_digest_the_server_computes() {
    // Arrange: a completed key, and a listener on the key-event channel.
    let app = TestApp::spawn().await;
    let key = "order/42?x=1";
    let token = app.claim(OP, key, json!({"a": 1})).await.owner_token();
    app.complete(OP, key, &token, outcome())
        .await
        .assert(200, "completed");
    let mut listener = key_events(&app.database_url).await;

    // Act: an operator ends the window in the database, not through us.
    app.expire_window(key).await;
    let heard = events_before_sentinel(&mut listener, &app.database_url).await;

    // Assert: the database named the key as the server would.
    assert_eq!(heard, vec![scoped(&app.tenant, key).hash().to_hex()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_on_one_node_is_woken_by_a_release_on_another() {
    // Arrange: two nodes on one database; the owner claims on B, the
    // duplicate waits on A.
    let a = TestApp::spawn().await;
    let b = TestApp::spawn_node(&a.database_url, |_| {})
        .await
        .as_tenant_of(&a);
    let token = b.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    let waiter = tokio::spawn(waiting_claim(&a, "k1"));
    until_waiting(|| a.metrics(), 1.0).await;

    // Act
    b.release(OP, "k1", &token).await.assert(200, "released");
    let waited = waiter.await.unwrap();

    // Assert: B asked whether anyone waits, announced, and A's waiter was
    // woken by that event (not its periodic re-read) and owns the key.
    waited.assert(201, "claimed");
    let (a_metrics, b_metrics) = (a.metrics().await, b.metrics().await);
    assert!(a_metrics.get("idemkey_waiter_wakeups_total{cause=\"event\"}") >= 1.0);
    assert_eq!(
        a_metrics.get("idemkey_waiter_wakeups_total{cause=\"safety_reread\"}"),
        0.0
    );
    assert_eq!(
        b_metrics.get("idemkey_store_statements_total{statement=\"announce\"}"),
        1.0
    );
}
