//! The tiering worker killed with SIGKILL in the middle of a batch (SPEC
//! section 7: crash-safe tiering), on Postgres and SQLite, with a real
//! Garage archive. `IDEMKEY_TEST_FAILPOINT` parks the worker at the named
//! point; the test then kills the process there.

use std::time::Duration;

use idemkey_tests::app::test_vars;
use idemkey_tests::db::{scalar, Backend};
use idemkey_tests::garage::shared_garage;
use idemkey_tests::process::ServerProcess;
use idemkey_tests::tiering::{
    archive_vars, complete_verbatim, outcome_text, quick_tiering, until, OP,
};
use idemkey_tests::TestApp;
use serde_json::json;

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
