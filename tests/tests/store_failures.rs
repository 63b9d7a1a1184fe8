//! When the store cannot answer, the answer is a retryable 503 — never "new"
//! (invariant 6). And the quarantined row of the claim table.

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
