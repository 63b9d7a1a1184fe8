//! Leases and fencing: an expired lease is taken over, the stale owner is
//! fenced off, and the effect id never changes.

use idemkey_tests::TestApp;
use serde_json::json;

const OP: &str = "env.provision";

async fn an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced_off(app: TestApp) {
    let request = json!({"env": "staging-7"});
    // A one-second lease (the minimum).
    let first = app
        .call(
            OP,
            "p-1",
            "claim",
            json!({"request": request, "lease_ms": 1_000}),
        )
        .await;
    first.assert(201, "claimed");
    let (first, stale) = (first.json(), first.owner_token());

    // A duplicate that is willing to wait sees the lease run out and takes
    // the key over: no sleeping in the test, the server's bounded wait does it.
    let second = app
        .call(
            OP,
            "p-1",
            "claim",
            json!({"request": request, "wait_ms": 10_000}),
        )
        .await;
    second.assert(200, "recovering");
    let (second, current) = (second.json(), second.owner_token());
    assert_eq!(second["attempt"], 2);
    assert_eq!(second["previous_attempt"]["attempt"], 1);
    assert_eq!(
        second["previous_attempt"]["lease_expires_at"],
        first["lease_expires_at"]
    );

    // The stale owner is refused everything and changes nothing.
    let late = json!({"status_code": 201, "body": "from the stale owner"});
    app.complete(OP, "p-1", &stale, late)
        .await
        .assert(409, "lease_lost");
    app.heartbeat(OP, "p-1", &stale)
        .await
        .assert(409, "lease_lost");
    app.release(OP, "p-1", &stale)
        .await
        .assert(409, "lease_lost");
    let record = app.lookup(OP, "p-1").await;
    record.assert(200, "in_progress");
    assert_eq!(record.json()["attempt"], 2);

    // The current owner completes; the stale one still cannot.
    let done = json!({"status_code": 201, "body": "from attempt 2"});
    app.complete(OP, "p-1", &current, done.clone())
        .await
        .assert(200, "completed");
    app.complete(OP, "p-1", &stale, done.clone())
        .await
        .assert(409, "lease_lost");

    // One effect id throughout.
    let replay = app.claim(OP, "p-1", request).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], done);
    let effect_id = &first["effect_id"];
    assert_eq!(&second["effect_id"], effect_id);
    assert_eq!(&replay.json()["effect_id"], effect_id);
    assert_eq!(&app.lookup(OP, "p-1").await.json()["effect_id"], effect_id);
}

async fn an_owner_whose_lease_ran_out_may_still_complete_until_someone_takes_over(app: TestApp) {
    let token = app
        .claim(OP, "p-2", json!({"env": "x"}))
        .await
        .owner_token();
    app.expire_lease("p-2").await;

    let done = app
        .complete(OP, "p-2", &token, json!({"status_code": 200}))
        .await;

    done.assert(200, "completed");
    app.claim(OP, "p-2", json!({"env": "x"}))
        .await
        .assert(200, "completed");
}

async fn a_heartbeat_keeps_a_duplicate_from_taking_over(app: TestApp) {
    let token = app
        .claim(OP, "p-3", json!({"env": "x"}))
        .await
        .owner_token();
    app.expire_lease("p-3").await;

    // The owner is still alive: its heartbeat restores a live lease.
    app.heartbeat(OP, "p-3", &token)
        .await
        .assert(200, "in_progress");

    app.claim(OP, "p-3", json!({"env": "x"}))
        .await
        .assert(409, "in_progress");
}

async fn concurrent_takeovers_of_one_expired_lease_yield_one_new_owner(app: TestApp) {
    let app = std::sync::Arc::new(app);
    app.claim(OP, "p-4", json!({"env": "x"}))
        .await
        .assert(201, "claimed");
    app.expire_lease("p-4").await;

    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let app = app.clone();
        tasks.spawn(async move { app.claim(OP, "p-4", json!({"env": "x"})).await });
    }
    let answers = tasks.join_all().await;

    let recovering = answers.iter().filter(|a| a.word() == "recovering").count();
    let waiting = answers.iter().filter(|a| a.word() == "in_progress").count();
    assert_eq!((recovering, waiting), (1, 49));
    assert_eq!(app.lookup(OP, "p-4").await.json()["attempt"], 2);
}

idemkey_tests::on_every_backend!(
    an_expired_lease_is_taken_over_and_the_stale_owner_is_fenced_off,
    an_owner_whose_lease_ran_out_may_still_complete_until_someone_takes_over,
    a_heartbeat_keeps_a_duplicate_from_taking_over,
    concurrent_takeovers_of_one_expired_lease_yield_one_new_owner,
);
