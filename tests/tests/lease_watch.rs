//! The lease watch: stuck keys counted on /metrics, and expired leases of a
//! quarantine-policy class quarantined without anyone claiming them.

use std::time::Duration;

use idemkey_tests::TestApp;
use serde_json::json;

/// A server whose background workers wake every 100 ms.
async fn watched(backend: idemkey_tests::db::Backend) -> TestApp {
    TestApp::spawn_on_with(backend, |vars| {
        vars.insert("IDEMKEY_WORKERS".into(), "on".into());
        vars.insert("IDEMKEY_WORKER_INTERVAL".into(), "100ms".into());
    })
    .await
}

/// Awaits a condition on the server's state, checked after each watch
/// interval; fails loudly after 10 s.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn stuck_keys_are_counted_and_quarantine_classes_are_quarantined(app: TestApp) {
    let put = app
        .put_class("payouts.send", json!({"on_lease_expiry": "quarantine"}))
        .await;
    assert_eq!(put.status, 200, "{}", put.text);
    app.claim("payouts.send", "p1", json!({"n": 1}))
        .await
        .assert(201, "claimed");
    app.claim("charges.create", "c1", json!({"n": 1}))
        .await
        .assert(201, "claimed");
    app.claim("charges.create", "c2", json!({"n": 2}))
        .await
        .assert(201, "claimed");

    app.expire_lease("p1").await;
    app.expire_lease("c1").await;

    // The quarantine-policy key is quarantined by the watch, unclaimed.
    until("p1 to be quarantined", || async {
        app.lookup("payouts.send", "p1").await.json()["state"] == "quarantined"
    })
    .await;
    let record = app.lookup("payouts.send", "p1").await.json();
    let last = record["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["event"].as_str(), last["by"].as_str()),
        (Some("quarantined"), Some("lease watch"))
    );
    // The takeover-policy key is left for the next claim to take over.
    app.lookup("charges.create", "c1")
        .await
        .assert(200, "in_progress");
    until("the counts on /metrics", || async {
        let m = app.metrics().await;
        m.get(r#"idemkey_stuck_keys{kind="quarantined"}"#) == 1.0
            && m.get(r#"idemkey_stuck_keys{kind="lease_expired"}"#) == 1.0
            && m.get(r#"idemkey_stuck_keys{kind="in_progress"}"#) == 2.0
    })
    .await;
    let m = app.metrics().await;
    assert_eq!(m.get("idemkey_lease_watch_quarantined_total"), 1.0);
    app.claim("charges.create", "c1", json!({"n": 1}))
        .await
        .assert(200, "recovering");

    // Under the quarantine policy no claim ever owns p1 again; an admin's
    // resolve decides, and replays return the chosen outcome.
    app.claim("payouts.send", "p1", json!({"n": 1}))
        .await
        .assert(409, "quarantined");
    let admin = app.token_with(&[idemkey_api::auth::Role::Admin]);
    let outcome = json!({"status_code": 201, "body": {"payout": "po_found"}});
    app.call_as(
        &admin,
        "payouts.send",
        "p1",
        "resolve",
        json!({"outcome": outcome}),
    )
    .await
    .assert(200, "completed");
    let replay = app.claim("payouts.send", "p1", json!({"n": 1})).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], outcome);
}

async fn stuck_keys_on(backend: idemkey_tests::db::Backend) {
    stuck_keys_are_counted_and_quarantine_classes_are_quarantined(watched(backend).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lease_watch_works_on_postgres() {
    stuck_keys_on(idemkey_tests::db::Backend::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lease_watch_works_on_sqlite() {
    stuck_keys_on(idemkey_tests::db::Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn registrations_of_waits_long_over_are_forgotten() {
    // Arrange: two nodes' registrations as waiters, one over for minutes.
    let app = watched(idemkey_tests::db::Backend::Postgres).await;
    for (key, until) in [
        ("old", "now() - interval '2 minutes'"),
        ("live", "now() + interval '1 hour'"),
    ] {
        app.sql(&format!(
            "insert into key_waiter (tenant, operation, key, node, until) \
             values ('{}', 'charges.create', '{key}', 'n-{key}', {until})",
            app.tenant
        ))
        .await;
    }
    let pool = sqlx::PgPool::connect(&app.database_url).await.unwrap();
    let left = || async {
        sqlx::query_scalar::<_, String>("select key from key_waiter order by key")
            .fetch_all(&pool)
            .await
            .unwrap()
    };

    // Act: the watch runs every 100 ms.
    until("the old registration to go", || async {
        left().await == ["live"]
    })
    .await;

    // Assert: the live one stays.
    assert_eq!(left().await, ["live"]);
}
