//! Every row of the claim table, and the owner's calls, over real HTTP
//! against a real Postgres.

use idemkey_tests::waiting::until_waiting;
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "charges.create";

fn charge(amount: u32) -> Value {
    json!({"amount": amount, "currency": "EUR", "customer": "cus_1"})
}

fn outcome() -> Value {
    json!({"status_code": 201, "headers": {"Location": "/charges/ch_1"}, "body": {"id": "ch_1", "amount": 25.5}, "resource_id": "ch_1"})
}

async fn a_new_key_is_claimed_with_an_owner_token_and_attempt_one(app: TestApp) {
    let answer = app.claim(OP, "k1", charge(25)).await;

    answer.assert(201, "claimed");
    let j = answer.json();
    assert_eq!(j["attempt"], 1);
    assert!(j["owner_token"].as_str().unwrap().len() >= 22, "≥128 bits");
    assert!(j["effect_id"].as_str().unwrap().starts_with("eff_"));
    for field in ["lease_expires_at", "expires_at"] {
        let t = j[field].as_str().unwrap();
        assert!(
            chrono::DateTime::parse_from_rfc3339(t).is_ok() && t.ends_with('Z'),
            "{field}: {t}"
        );
    }
}

async fn replaying_a_completed_key_returns_the_stored_outcome(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");

    let replay = app.claim(OP, "k1", charge(25)).await;

    replay.assert(200, "completed");
    let j = replay.json();
    assert_eq!(j["replayed"], true);
    assert_eq!(j["outcome"], outcome());
    assert!(j["expires_at"].is_string());
    assert!(
        j.get("owner_token").is_none(),
        "a replay hands out no ownership"
    );
}

async fn the_outcome_is_replayed_byte_for_byte_whatever_its_status(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    let raw = r#"{"status_code":500,"body":{"error":"provider timeout","amount":1.50,"n":1e2},"headers":{"x-a":"b"}}"#;
    let body = format!(r#"{{"owner_token":"{token}","outcome":{raw}}}"#);
    app.post_raw(&format!("{}/complete", app.key_url(OP, "k1")), body)
        .await
        .assert(200, "completed");

    let replay = app.claim(OP, "k1", charge(25)).await;

    replay.assert(200, "completed");
    assert!(
        replay.text.contains(&format!(r#""outcome":{raw}"#)),
        "{}",
        replay.text
    );
}

async fn a_duplicate_while_the_owner_works_gets_in_progress_with_retry_after(app: TestApp) {
    app.claim(OP, "k1", charge(25)).await.assert(201, "claimed");

    let dup = app.claim(OP, "k1", charge(25)).await;

    dup.assert(409, "in_progress");
    let after: u64 = dup
        .retry_after
        .as_deref()
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=30).contains(&after), "{after}");
    assert_eq!(dup.json()["attempt"], 1);
}

async fn a_bounded_wait_returns_the_outcome_once_the_owner_completes(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();

    let waiter = app.call(
        OP,
        "k1",
        "claim",
        json!({"request": charge(25), "wait_ms": 10_000}),
    );
    let owner = async {
        // The owner completes once the duplicate is waiting.
        until_waiting(|| app.metrics(), 1.0).await;
        app.complete(OP, "k1", &token, outcome()).await
    };
    let (waited, completed) = tokio::join!(waiter, owner);

    completed.assert(200, "completed");
    waited.assert(200, "completed");
    assert_eq!(waited.json()["outcome"], outcome());
}

async fn a_bounded_wait_gives_up_with_in_progress(app: TestApp) {
    app.claim(OP, "k1", charge(25)).await.assert(201, "claimed");

    let started = std::time::Instant::now();
    let dup = app.call(
        OP,
        "k1",
        "claim",
        json!({"request": charge(25), "wait_ms": 1_000}),
    );
    let (dup, ()) = tokio::join!(dup, until_waiting(|| app.metrics(), 1.0));

    dup.assert(409, "in_progress");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(1_000),
        "gave up after {:?}, before its wait was over",
        started.elapsed()
    );
}

async fn the_same_key_with_a_different_request_is_rejected_in_every_state(app: TestApp) {
    // in progress
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    app.claim(OP, "k1", charge(26))
        .await
        .assert(422, "key_reused");
    // completed
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
    app.claim(OP, "k1", charge(26))
        .await
        .assert(422, "key_reused");
    // lease expired (would otherwise be taken over)
    let t2 = app.claim(OP, "k2", charge(25)).await.owner_token();
    app.expire_lease("k2").await;
    app.claim(OP, "k2", charge(26))
        .await
        .assert(422, "key_reused");
    // the rejected requests changed nothing
    app.claim(OP, "k1", charge(25))
        .await
        .assert(200, "completed");
    app.heartbeat(OP, "k2", &t2)
        .await
        .assert(200, "in_progress");
}

async fn a_precomputed_fingerprint_works_like_a_request(app: TestApp) {
    let fp = "a".repeat(64);
    let claim = |fp: String| app.call(OP, "k1", "claim", json!({"fingerprint": fp}));

    claim(fp.clone()).await.assert(201, "claimed");
    claim(fp.clone()).await.assert(409, "in_progress");
    claim("b".repeat(64)).await.assert(422, "key_reused");
    let lookup = app.lookup(OP, "k1").await;
    assert_eq!(lookup.json()["fingerprint"], fp);
}

async fn an_expired_lease_is_taken_over_and_the_answer_says_recovering(app: TestApp) {
    let first = app.claim(OP, "k1", charge(25)).await.json();
    app.expire_lease("k1").await;

    let second = app.claim(OP, "k1", charge(25)).await;

    second.assert(200, "recovering");
    let j = second.json();
    assert_eq!(j["attempt"], 2);
    assert_eq!(j["effect_id"], first["effect_id"]);
    assert_ne!(j["owner_token"], first["owner_token"]);
    assert_eq!(j["previous_attempt"]["attempt"], 1);
    assert!(j["previous_attempt"]["claimed_at"].is_string());
    assert!(j["previous_attempt"]["lease_expires_at"].is_string());
}

async fn release_gives_the_key_back_so_it_can_be_claimed_again(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();

    let released = app.release(OP, "k1", &token).await;

    released.assert(200, "released");
    app.lookup(OP, "k1").await.assert(404, "not_found");
    let again = app.claim(OP, "k1", charge(99)).await;
    again.assert(201, "claimed");
    assert_eq!(again.json()["attempt"], 1);
}

async fn heartbeat_extends_the_lease(app: TestApp) {
    let claimed = app.claim(OP, "k1", charge(25)).await.json();
    let token = claimed["owner_token"].as_str().unwrap();

    let beat = app
        .call(
            OP,
            "k1",
            "heartbeat",
            json!({"owner_token": token, "lease_ms": 600_000}),
        )
        .await;

    beat.assert(200, "in_progress");
    let before =
        chrono::DateTime::parse_from_rfc3339(claimed["lease_expires_at"].as_str().unwrap())
            .unwrap();
    let after =
        chrono::DateTime::parse_from_rfc3339(beat.json()["lease_expires_at"].as_str().unwrap())
            .unwrap();
    assert!(
        after - before > chrono::TimeDelta::seconds(500),
        "{before} → {after}"
    );
}

async fn lookup_shows_the_record(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    let in_progress = app.lookup(OP, "k1").await;
    in_progress.assert(200, "in_progress");
    assert!(in_progress.json().get("outcome").is_none());
    app.complete(OP, "k1", &token, outcome()).await;

    let j = app.lookup(OP, "k1").await.json();

    assert_eq!(j["state"], "completed");
    assert_eq!(j["operation"], OP);
    assert_eq!(j["key"], "k1");
    assert_eq!(j["attempt"], 1);
    assert_eq!(j["tier"], "hot");
    assert_eq!(j["outcome"], outcome());
    assert_eq!(j["fingerprint"].as_str().unwrap().len(), 64);
    for field in ["created_at", "claimed_at", "completed_at", "expires_at"] {
        assert!(j[field].is_string(), "{field}");
    }
    assert!(j.get("owner_token").is_none());
}

async fn completing_twice_is_idempotent_but_a_different_outcome_is_refused(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");

    let same = app.complete(OP, "k1", &token, outcome()).await;
    let different = app
        .complete(OP, "k1", &token, json!({"status_code": 402}))
        .await;

    same.assert(200, "completed");
    different.assert(409, "already_completed");
    assert_eq!(app.lookup(OP, "k1").await.json()["outcome"], outcome());
}

async fn owner_calls_on_a_completed_key_say_so(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    app.complete(OP, "k1", &token, outcome()).await;

    app.heartbeat(OP, "k1", &token)
        .await
        .assert(409, "already_completed");
    app.release(OP, "k1", &token)
        .await
        .assert(409, "already_completed");
    app.claim(OP, "k1", charge(25))
        .await
        .assert(200, "completed");
}

async fn an_owner_token_that_was_never_valid_is_lease_lost_and_changes_nothing(app: TestApp) {
    app.claim(OP, "k1", charge(25)).await.assert(201, "claimed");

    app.complete(OP, "k1", "forged", outcome())
        .await
        .assert(409, "lease_lost");
    app.heartbeat(OP, "k1", "forged")
        .await
        .assert(409, "lease_lost");
    app.release(OP, "k1", "forged")
        .await
        .assert(409, "lease_lost");

    app.lookup(OP, "k1").await.assert(200, "in_progress");
}

async fn owner_calls_on_an_unknown_key_are_not_found(app: TestApp) {
    app.complete(OP, "nope", "t", outcome())
        .await
        .assert(404, "not_found");
    app.heartbeat(OP, "nope", "t")
        .await
        .assert(404, "not_found");
    app.release(OP, "nope", "t").await.assert(404, "not_found");
    app.lookup(OP, "nope").await.assert(404, "not_found");
}

async fn a_record_past_its_replay_window_is_gone_and_the_key_is_new_again(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    app.complete(OP, "k1", &token, outcome()).await;
    app.expire_window("k1").await;

    app.lookup(OP, "k1").await.assert(404, "not_found");
    let fresh = app.claim(OP, "k1", charge(99)).await;

    fresh.assert(201, "claimed");
    assert_eq!(fresh.json()["attempt"], 1);
}

async fn keys_with_reserved_characters_round_trip_through_percent_encoding(app: TestApp) {
    let key = "order/42?x=1#a%20b";

    app.claim(OP, key, charge(25)).await.assert(201, "claimed");

    let j = app.lookup(OP, key).await.json();
    assert_eq!(j["key"], key);
}

async fn an_owner_cannot_complete_or_revive_a_record_past_its_window(app: TestApp) {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    app.expire_window("k1").await;

    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(404, "not_found");
    app.heartbeat(OP, "k1", &token)
        .await
        .assert(404, "not_found");

    app.claim(OP, "k1", charge(99)).await.assert(201, "claimed");
}

async fn a_heartbeat_without_lease_ms_extends_by_the_lease_the_attempt_chose(app: TestApp) {
    let claimed = app
        .call(
            OP,
            "k1",
            "claim",
            json!({"request": charge(25), "lease_ms": 600_000}),
        )
        .await;
    let token = claimed.owner_token();

    let beat = app.heartbeat(OP, "k1", &token).await;

    beat.assert(200, "in_progress");
    let t = |a: &Value| {
        chrono::DateTime::parse_from_rfc3339(a["lease_expires_at"].as_str().unwrap()).unwrap()
    };
    assert!(
        t(&beat.json()) >= t(&claimed.json()),
        "a heartbeat never shortens the chosen lease"
    );
}

async fn a_body_that_is_json_but_not_an_object_is_invalid_body(app: TestApp) {
    let answer = app
        .post_raw(&format!("{}/claim", app.key_url(OP, "k1")), "[{\"a\": 1}]")
        .await;

    answer.assert(400, "invalid_body");
    app.lookup(OP, "k1").await.assert(404, "not_found");
}

idemkey_tests::on_every_backend!(
    a_new_key_is_claimed_with_an_owner_token_and_attempt_one,
    replaying_a_completed_key_returns_the_stored_outcome,
    the_outcome_is_replayed_byte_for_byte_whatever_its_status,
    a_duplicate_while_the_owner_works_gets_in_progress_with_retry_after,
    a_bounded_wait_returns_the_outcome_once_the_owner_completes,
    a_bounded_wait_gives_up_with_in_progress,
    the_same_key_with_a_different_request_is_rejected_in_every_state,
    a_precomputed_fingerprint_works_like_a_request,
    an_expired_lease_is_taken_over_and_the_answer_says_recovering,
    release_gives_the_key_back_so_it_can_be_claimed_again,
    heartbeat_extends_the_lease,
    lookup_shows_the_record,
    completing_twice_is_idempotent_but_a_different_outcome_is_refused,
    owner_calls_on_a_completed_key_say_so,
    an_owner_token_that_was_never_valid_is_lease_lost_and_changes_nothing,
    owner_calls_on_an_unknown_key_are_not_found,
    a_record_past_its_replay_window_is_gone_and_the_key_is_new_again,
    keys_with_reserved_characters_round_trip_through_percent_encoding,
    an_owner_cannot_complete_or_revive_a_record_past_its_window,
    a_heartbeat_without_lease_ms_extends_by_the_lease_the_attempt_chose,
    a_body_that_is_json_but_not_an_object_is_invalid_body,
);
