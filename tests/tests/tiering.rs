//! Tiering and cleanup (SPEC sections 6 and 7) against real servers: the
//! archive is a real S3-compatible store (Garage, started by
//! `scripts/garage.sh`; each test gets a fresh prefix in the shared bucket,
//! or a private node when it stops the store), records live in Postgres or
//! SQLite, and the workers are the real ones, woken every 200 ms.
//!
//! Waiting for a worker is waiting for a condition (a record tiered, a row
//! gone), polled with a deadline; nothing sleeps for a fixed time.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use idemkey_tests::app::{test_vars, Answer};
use idemkey_tests::db::{scalar, Backend};
use idemkey_tests::garage::{shared_garage, GarageServer, S3Target};
use idemkey_tests::process::ServerProcess;
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "charges.create";

/// An outcome with spacing and number spellings a re-serialisation would
/// lose: what replays must be exactly these bytes.
fn outcome_text(n: usize) -> String {
    format!(
        r#"{{"status_code": 201, "headers": {{"x-request": "r-{n}"}},
   "body": {{"amount": 25.00, "id": "ch_{n}", "note": "✓ line\nbreak"}} , "resource_id": "ch_{n}"}}"#
    )
}

/// The variables that put the archive at a fresh prefix of `target` and
/// wake the workers every 200 ms.
fn archive_vars(vars: &mut HashMap<String, String>, target: &S3Target) {
    let prefix = format!("tiering/{:016x}", rand::random::<u64>());
    vars.insert(
        "IDEMKEY_ARCHIVE_URL".into(),
        format!("s3://{}/{prefix}", target.bucket),
    );
    let s = &target.settings;
    for (name, value) in [
        ("AWS_ENDPOINT_URL", &s.endpoint),
        ("AWS_REGION", &s.region),
        ("AWS_ACCESS_KEY_ID", &s.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", &s.secret_access_key),
    ] {
        if let Some(value) = value {
            vars.insert(name.into(), value.clone());
        }
    }
    vars.insert("IDEMKEY_WORKERS".into(), "on".into());
    vars.insert("IDEMKEY_WORKER_INTERVAL".into(), "200ms".into());
}

/// Polls `check` until it holds; panics with `what` after `timeout`.
async fn until<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Claims `key` and completes it with `outcome_text(n)` sent verbatim;
/// returns the owner token.
async fn complete_verbatim(app: &TestApp, key: &str, n: usize) -> String {
    let claimed = app.claim(OP, key, json!({ "n": n })).await;
    claimed.assert(201, "claimed");
    let owner = claimed.owner_token();
    let done = send_completion(app, key, &owner, n).await;
    assert_eq!(done.status, 200, "{}", done.text);
    owner
}

async fn send_completion(app: &TestApp, key: &str, owner: &str, n: usize) -> Answer {
    let body = format!(
        r#"{{"owner_token": "{owner}", "outcome": {}}}"#,
        outcome_text(n)
    );
    app.post_raw(&format!("{}/complete", app.key_url(OP, key)), body)
        .await
}

async fn tier_of(app: &TestApp, key: &str) -> String {
    let found = app.lookup(OP, key).await;
    assert_eq!(found.status, 200, "{}", found.text);
    found.json()["tier"].as_str().unwrap_or_default().to_owned()
}

async fn wait_until_archived(app: &TestApp, key: &str) {
    until(
        &format!("{key} is archived"),
        Duration::from_secs(60),
        || async { tier_of(app, key).await == "archived" },
    )
    .await;
}

/// A policy whose records tier after one second and stay an hour.
fn quick_tiering() -> Value {
    json!({ "replay_window": "1h", "hot_retention": "1s" })
}

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

/// The worker killed with SIGKILL at `failpoint` while tiering a batch; a
/// second process then finishes the job. Every record is readable exactly
/// once, no claim is left behind, and the orphaned segment (if any) is gone.
async fn a_killed_tiering_run_loses_nothing(backend: Backend, failpoint: &str) {
    // Arrange: keys completed through a server without workers.
    let target = shared_garage();
    let mut vars = test_vars(&backend.fresh().await);
    archive_vars(&mut vars, &target);
    let writer = TestApp::spawn_node(&vars["IDEMKEY_DATABASE_URL"], |v| {
        v.clone_from(&vars);
        v.insert("IDEMKEY_WORKERS".into(), "off".into());
    })
    .await;
    writer.put_class(OP, quick_tiering()).await.assert(200, "");
    const KEYS: usize = 20;
    for n in 0..KEYS {
        complete_verbatim(&writer, &format!("k-{n}"), n).await;
    }
    let db = writer.database_url.clone();

    // Act: a worker process stops dead at the failpoint and is killed.
    let mut crashing = vars.clone();
    crashing.insert("IDEMKEY_TEST_FAILPOINT".into(), failpoint.into());
    let doomed = ServerProcess::start(&crashing).await;
    doomed
        .wait_for_log("failpoint reached", Duration::from_secs(60))
        .await;
    doomed.stop().await;

    // Assert: nothing was slimmed, and one segment was left pending.
    let slimmed = scalar(
        &db,
        "select count(*) from idempotency_key where segment is not null or outcome is null",
    )
    .await;
    assert_eq!(slimmed, 0, "a killed run changes no record");
    assert_eq!(
        scalar(
            &db,
            "select count(*) from archive_segment where state = 'pending'"
        )
        .await,
        1
    );

    // A healthy process finishes: everything tiered, the orphan deleted.
    let healthy = ServerProcess::start(&vars).await;
    until(
        "every key is tiered and the orphan gone",
        Duration::from_secs(60),
        || async {
            let tiered = scalar(
                &db,
                "select count(*) from idempotency_key where segment is not null",
            )
            .await;
            let stray = scalar(
                &db,
                "select count(*) from archive_segment where state <> 'live'",
            )
            .await;
            tiered == KEYS as i64 && stray == 0
        },
    )
    .await;
    assert_eq!(
        scalar(
            &db,
            "select count(*) from idempotency_key where state <> 'completed' or attempt <> 1"
        )
        .await,
        0,
        "no orphaned claim"
    );
    assert_eq!(
        scalar(&db, "select coalesce(sum(records), 0) from archive_segment").await,
        KEYS as i64,
        "each record is in exactly one live segment"
    );
    // Read through the writer, which never cached these outcomes.
    for n in 0..KEYS {
        let replay = writer.claim(OP, &format!("k-{n}"), json!({ "n": n })).await;
        replay.assert(200, "completed");
        assert!(replay.text.contains(&outcome_text(n)), "{}", replay.text);
    }
    healthy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_tiering_killed_after_upload_before_slimming_loses_nothing() {
    a_killed_tiering_run_loses_nothing(Backend::Postgres, "tiering.after_upload").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_tiering_killed_after_slimming_before_commit_loses_nothing() {
    a_killed_tiering_run_loses_nothing(Backend::Postgres, "tiering.after_slim").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_tiering_killed_after_upload_before_slimming_loses_nothing() {
    a_killed_tiering_run_loses_nothing(Backend::Sqlite, "tiering.after_upload").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_tiering_killed_after_slimming_before_commit_loses_nothing() {
    a_killed_tiering_run_loses_nothing(Backend::Sqlite, "tiering.after_slim").await
}
