//! Tiering and cleanup (SPEC sections 6 and 7) against real servers: the
//! archive is a real S3-compatible store (Garage, started by
//! `scripts/garage.sh`; each test gets a fresh prefix in the shared bucket,
//! or a private node when it stops the store), records live in Postgres or
//! SQLite, and the workers are the real ones, woken every 200 ms.
//!
//! Waiting for a worker is waiting for a condition (a record tiered, a row
//! gone), polled with a deadline; nothing sleeps for a fixed time.

use std::time::Duration;

use idemkey_tests::db::{scalar, Backend};
use idemkey_tests::garage::{shared_garage, GarageServer};
use idemkey_tests::tiering::{
    archive_vars, complete_verbatim, outcome_text, quick_tiering, send_completion, until,
    wait_until_archived, OP,
};
use idemkey_tests::TestApp;
use serde_json::{json, Value};

async fn a_tiered_key_replays_byte_for_byte_and_still_refuses_another_fingerprint(app: TestApp) {
    // Arrange: a completed key, and its replay while hot.
    app.put_class(OP, quick_tiering()).await.assert(200, "");
    let owner = complete_verbatim(&app, "order-1", 1).await;
    let hot = app.claim(OP, "order-1", json!({ "n": 1 })).await;
    hot.assert(200, "completed");

    // Act: the worker moves it to the archive.
    wait_until_archived(&app, "order-1").await;

    // Assert: the row kept its key and fingerprint but not the outcome...
    let outcomes_in_rows = scalar(
        &app.database_url,
        "select count(*) from idempotency_key where outcome is not null",
    )
    .await;
    assert_eq!(outcomes_in_rows, 0, "the outcome left the row");
    // ...and a node that never saw the key replays the same bytes from the
    // archive, refuses another fingerprint, and shows the same outcome.
    let fresh = app.spawn_twin().await;
    let tiered = fresh.claim(OP, "order-1", json!({ "n": 1 })).await;
    assert_eq!(tiered.status, 200, "{}", tiered.text);
    assert_eq!(tiered.text, hot.text, "the tiered replay is byte for byte");
    assert!(tiered.text.contains(&outcome_text(1)), "{}", tiered.text);
    fresh
        .claim(OP, "order-1", json!({ "n": 2 }))
        .await
        .assert(422, "key_reused");
    let found = fresh.lookup(OP, "order-1").await;
    assert!(found.text.contains(&outcome_text(1)), "{}", found.text);
    assert_eq!(found.json()["tier"], "archived");
    assert_eq!(found.json()["attempt"], 1);
    let events: Vec<String> = found.json()["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["claimed", "completed", "tiered"]);
    // The owner completing again with the same outcome gets the record,
    // its outcome read through the archive; another outcome is refused.
    let again = send_completion(&fresh, "order-1", &owner, 1).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert!(again.text.contains(&outcome_text(1)), "{}", again.text);
    send_completion(&fresh, "order-1", &owner, 2)
        .await
        .assert(409, "already_completed");
}

async fn tiering_runs_on_every_node_without_double_work(app: TestApp) {
    // Arrange: many keys due at once, and three more nodes with workers.
    app.put_class(OP, quick_tiering()).await.assert(200, "");
    const KEYS: usize = 120;
    let mut writes = tokio::task::JoinSet::new();
    for n in 0..KEYS {
        let (address, token) = (app.address.clone(), app.token.clone());
        writes.spawn(async move {
            let client = reqwest::Client::new();
            let url = format!("{address}/v1/keys/{OP}/k-{n}");
            let claimed: Value = client
                .post(format!("{url}/claim"))
                .bearer_auth(&token)
                .json(&json!({ "request": { "n": n } }))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let done = client
                .post(format!("{url}/complete"))
                .bearer_auth(&token)
                .json(&json!({ "owner_token": claimed["owner_token"], "outcome": { "status_code": 200, "body": n } }))
                .send()
                .await
                .unwrap();
            assert_eq!(done.status(), 200);
        });
    }
    while let Some(done) = writes.join_next().await {
        done.unwrap();
    }
    let _nodes = [
        app.spawn_twin().await,
        app.spawn_twin().await,
        app.spawn_twin().await,
    ];

    // Act
    until("every key is tiered", Duration::from_secs(60), || async {
        scalar(
            &app.database_url,
            "select count(*) from idempotency_key where segment is not null",
        )
        .await
            == KEYS as i64
    })
    .await;

    // Assert: each record was packed once, into one segment, by one node.
    let packed = scalar(
        &app.database_url,
        "select coalesce(sum(records), 0) from archive_segment where state = 'live'",
    )
    .await;
    assert_eq!(packed, KEYS as i64, "no record was packed twice");
    let tiered_twice = scalar(
        &app.database_url,
        "select count(*) from idempotency_key where history like '%tiered%tiered%'",
    )
    .await;
    assert_eq!(tiered_twice, 0);
    for n in [0, KEYS / 2, KEYS - 1] {
        let replay = app.claim(OP, &format!("k-{n}"), json!({ "n": n })).await;
        replay.assert(200, "completed");
        assert_eq!(replay.json()["outcome"]["body"], n);
    }
    // The dashboard says where the outcome lives now.
    let viewer = app.token_with(&[idemkey_api::auth::Role::Viewer]);
    let visitor = idemkey_tests::dashboard::Visitor::signed_in(&app, &viewer).await;
    visitor
        .get(&format!("/dashboard/keys/{OP}/k-0"))
        .await
        .assert_contains("archived (segment");
}

async fn a_shortened_policy_does_not_expire_records_early(app: TestApp) {
    // Arrange: `early` is promised eight seconds; then the window shrinks
    // to one second and `late` is written under it.
    app.put_class(OP, json!({ "replay_window": "8s", "hot_retention": "1s" }))
        .await
        .assert(200, "");
    complete_verbatim(&app, "early", 1).await;
    let promised = app.lookup(OP, "early").await.json()["expires_at"].clone();
    app.put_class(OP, json!({ "replay_window": "1s", "hot_retention": "1s" }))
        .await
        .assert(200, "");
    complete_verbatim(&app, "late", 2).await;
    let count_of = |key: &'static str| {
        let url = app.database_url.clone();
        async move {
            scalar(
                &url,
                &format!("select count(*) from idempotency_key where key = '{key}'"),
            )
            .await
        }
    };

    // Act: cleanup removes `late` on its own one-second schedule.
    until("cleanup removes late", Duration::from_secs(30), || async {
        count_of("late").await == 0
    })
    .await;

    // Assert: `early`, older than `late`, is still kept and still replays.
    let kept = app.lookup(OP, "early").await;
    assert_eq!(kept.status, 200, "{}", kept.text);
    assert_eq!(kept.json()["expires_at"], promised);
    app.claim(OP, "early", json!({ "n": 1 }))
        .await
        .assert(200, "completed");
    app.claim(OP, "late", json!({ "n": 99 }))
        .await
        .assert(201, "claimed");

    // Then it goes on its own schedule, and so does its segment; the key
    // is new again, as documented.
    wait_until_archived(&app, "early").await;
    until("cleanup removes early", Duration::from_secs(30), || async {
        count_of("early").await == 0
    })
    .await;
    until(
        "its segment is deleted",
        Duration::from_secs(30),
        || async { scalar(&app.database_url, "select count(*) from archive_segment").await == 0 },
    )
    .await;
    app.claim(OP, "early", json!({ "n": 42 }))
        .await
        .assert(201, "claimed");
}

mod postgres {
    use super::*;

    async fn app() -> TestApp {
        TestApp::spawn_on_with(Backend::Postgres, |vars| {
            archive_vars(vars, &shared_garage())
        })
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_tiered_key_replays_byte_for_byte_and_still_refuses_another_fingerprint() {
        super::a_tiered_key_replays_byte_for_byte_and_still_refuses_another_fingerprint(app().await)
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn tiering_runs_on_every_node_without_double_work() {
        super::tiering_runs_on_every_node_without_double_work(app().await).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_shortened_policy_does_not_expire_records_early() {
        super::a_shortened_policy_does_not_expire_records_early(app().await).await
    }
}

mod sqlite {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_tiered_key_replays_byte_for_byte_and_still_refuses_another_fingerprint() {
        let app =
            TestApp::spawn_on_with(Backend::Sqlite, |vars| archive_vars(vars, &shared_garage()))
                .await;
        super::a_tiered_key_replays_byte_for_byte_and_still_refuses_another_fingerprint(app).await
    }

    /// The embedded default: SQLite and a local-directory archive.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_shortened_policy_does_not_expire_records_early_on_the_embedded_default() {
        let dir = std::env::temp_dir().join(format!("archive-{:016x}", rand::random::<u64>()));
        let app = TestApp::spawn_on_with(Backend::Sqlite, |vars| {
            vars.insert(
                "IDEMKEY_ARCHIVE_URL".into(),
                format!("file://{}", dir.display()),
            );
            vars.insert("IDEMKEY_WORKERS".into(), "on".into());
            vars.insert("IDEMKEY_WORKER_INTERVAL".into(), "200ms".into());
        })
        .await;
        super::a_shortened_policy_does_not_expire_records_early(app).await
    }
}

/// With the object store stopped, a tiered key is neither new nor
/// claimable: 503 with Retry-After; key reuse is still told apart (the
/// fingerprint is in the row). Once the store is back the same calls replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_object_store_answers_503_and_never_a_new_owner() {
    // Arrange
    let garage = GarageServer::start();
    let app =
        TestApp::spawn_on_with(Backend::Postgres, |vars| archive_vars(vars, &garage.target)).await;
    app.put_class(OP, quick_tiering()).await.assert(200, "");
    complete_verbatim(&app, "order-1", 1).await;
    wait_until_archived(&app, "order-1").await;
    let fresh = app.spawn_twin().await; // nothing cached

    // Act
    garage.stop();

    // Assert
    let claim = fresh.claim(OP, "order-1", json!({ "n": 1 })).await;
    claim.assert(503, "unavailable");
    assert!(claim.retry_after.is_some(), "503 carries Retry-After");
    let lookup = fresh.lookup(OP, "order-1").await;
    lookup.assert(503, "unavailable");
    fresh
        .claim(OP, "order-1", json!({ "n": 2 }))
        .await
        .assert(422, "key_reused");
    let owners = scalar(
        &app.database_url,
        "select count(*) from idempotency_key where state <> 'completed' or attempt <> 1",
    )
    .await;
    assert_eq!(owners, 0, "no new owner, no takeover");

    garage.restart();
    let replay = fresh.claim(OP, "order-1", json!({ "n": 1 })).await;
    replay.assert(200, "completed");
    assert!(replay.text.contains(&outcome_text(1)), "{}", replay.text);
    fresh.lookup(OP, "order-1").await.assert(200, "completed");
}
