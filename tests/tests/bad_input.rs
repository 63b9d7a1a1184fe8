//! Bad request bodies over real HTTP: malformed JSON, wrong shapes, unknown
//! fields, bodies and outcomes over their size limits, malformed outcomes,
//! leases out of range, bad fingerprints, numbers a double cannot carry, and
//! the same request spelled differently. Each kind gets its documented
//! error, and the record it was aimed at is unchanged afterwards. Bad keys,
//! operations, routes and methods are in `bad_input_addresses.rs`.

use idemkey_tests::app::Answer;
use idemkey_tests::bad_input::{assert_unchanged, charge, completed_key, outcome, OP};
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const MIB: usize = 1024 * 1024;

/// POSTs `body` verbatim to `call` of `OP`/`key`.
async fn raw(app: &TestApp, key: &str, call: &str, body: impl Into<reqwest::Body>) -> Answer {
    app.post_raw(&format!("{}/{call}", app.key_url(OP, key)), body)
        .await
}

#[tokio::test]
async fn a_malformed_json_body_is_invalid_json() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    for body in [
        r#"{"request": {"amount": 25"#,
        "",
        "not json",
        r#"{"request": 1} x"#,
    ] {
        let answer = raw(&app, "k1", "claim", body).await;

        answer.assert(400, "invalid_json");
    }
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn a_claim_with_both_request_and_fingerprint_or_neither_is_invalid_body() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    let both = app
        .call(
            OP,
            "k1",
            "claim",
            json!({"request": charge(25), "fingerprint": "a".repeat(64)}),
        )
        .await;
    let neither = app.call(OP, "k1", "claim", json!({})).await;
    let neither_but_wait = app.call(OP, "k1", "claim", json!({"wait_ms": 100})).await;

    both.assert(400, "invalid_body");
    neither.assert(400, "invalid_body");
    neither_but_wait.assert(400, "invalid_body");
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn an_unknown_body_field_is_refused() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    let claim = app
        .call(
            OP,
            "k1",
            "claim",
            json!({"request": charge(25), "idempotent": true}),
        )
        .await;
    let not_an_object = app.call(OP, "k1", "claim", json!([charge(25)])).await;

    claim.assert(400, "invalid_body");
    not_an_object.assert(400, "invalid_body");
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn unknown_fields_in_owner_calls_are_refused_and_change_nothing() {
    let app = TestApp::spawn().await;
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    let before = app.lookup(OP, "k1").await.text;

    let complete = app
        .call(
            OP,
            "k1",
            "complete",
            json!({"owner_token": token, "outcome": outcome(), "force": true}),
        )
        .await;
    let heartbeat = app
        .call(
            OP,
            "k1",
            "heartbeat",
            json!({"owner_token": token, "lease": 600_000}),
        )
        .await;
    let release = app
        .call(
            OP,
            "k1",
            "release",
            json!({"owner_token": token, "why": "x"}),
        )
        .await;

    complete.assert(400, "invalid_body");
    heartbeat.assert(400, "invalid_body");
    release.assert(400, "invalid_body");
    assert_eq!(app.lookup(OP, "k1").await.text, before);
}

#[tokio::test]
async fn a_claim_body_over_one_mebibyte_is_payload_too_large() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;
    let big = json!({"request": {"amount": 25, "blob": "x".repeat(MIB)}}).to_string();
    let just_fits = json!({"request": {"blob": "x".repeat(MIB - 100)}}).to_string();
    assert!(big.len() > MIB && just_fits.len() <= MIB);

    let too_large = raw(&app, "k1", "claim", big).await;
    let fits = raw(&app, "k2", "claim", just_fits).await;

    too_large.assert(413, "payload_too_large");
    fits.assert(201, "claimed");
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn an_outcome_over_the_default_limit_is_outcome_too_large_and_the_key_stays_in_progress() {
    let app = TestApp::spawn().await;
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    let big = json!({"status_code": 200, "body": "x".repeat(MIB)});

    let answer = app.complete(OP, "k1", &token, big).await;

    answer.assert(413, "outcome_too_large");
    app.lookup(OP, "k1").await.assert(200, "in_progress");
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
}

#[tokio::test]
async fn an_outcome_just_under_the_default_limit_is_stored() {
    let app = TestApp::spawn().await;
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    let envelope = json!({"status_code": 200, "body": ""}).to_string().len();
    let fits = json!({"status_code": 200, "body": "x".repeat(MIB - envelope)});
    assert_eq!(fits.to_string().len(), MIB);

    let answer = app.complete(OP, "k1", &token, fits.clone()).await;

    answer.assert(200, "completed");
    assert_eq!(
        app.claim(OP, "k1", charge(25)).await.json()["outcome"],
        fits
    );
}

#[tokio::test]
async fn a_malformed_outcome_is_invalid_outcome_and_the_key_stays_in_progress() {
    let app = TestApp::spawn().await;
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    let before = app.lookup(OP, "k1").await.text;

    for bad in [
        json!({"status_code": 700}),
        json!({"status_code": 99}),
        json!({"body": {"id": "ch_1"}}),
        json!({"status_code": "201"}),
        json!({"status_code": 201, "headers": {"Location": 1}}),
        json!({"status_code": 201, "extra": true}),
        json!([201]),
        json!("201"),
    ] {
        let answer = app.complete(OP, "k1", &token, bad.clone()).await;

        assert_eq!(answer.word(), "invalid_outcome", "{bad}: {}", answer.text);
        answer.assert(400, "invalid_outcome");
    }
    assert_eq!(app.lookup(OP, "k1").await.text, before);
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
}

#[tokio::test]
async fn a_lease_outside_one_second_to_one_hour_is_invalid_lease() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    for lease_ms in [0, 500, 999, 3_600_001] {
        let on_completed = app
            .call(
                OP,
                "k1",
                "claim",
                json!({"request": charge(25), "lease_ms": lease_ms}),
            )
            .await;
        let on_new = app
            .call(
                OP,
                "k2",
                "claim",
                json!({"request": charge(25), "lease_ms": lease_ms}),
            )
            .await;

        on_completed.assert(400, "invalid_lease");
        on_new.assert(400, "invalid_lease");
    }
    app.lookup(OP, "k2").await.assert(404, "not_found");
    for (key, lease_ms) in [("k3", 1_000), ("k4", 3_600_000)] {
        app.call(
            OP,
            key,
            "claim",
            json!({"request": charge(25), "lease_ms": lease_ms}),
        )
        .await
        .assert(201, "claimed");
    }
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn a_heartbeat_with_a_lease_out_of_range_is_invalid_lease_and_keeps_the_lease() {
    let app = TestApp::spawn().await;
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    let before = app.lookup(OP, "k1").await.text;

    for lease_ms in [500, 3_600_001] {
        let answer = app
            .call(
                OP,
                "k1",
                "heartbeat",
                json!({"owner_token": token, "lease_ms": lease_ms}),
            )
            .await;

        answer.assert(400, "invalid_lease");
    }
    assert_eq!(app.lookup(OP, "k1").await.text, before);
}

#[tokio::test]
async fn a_fingerprint_that_is_not_64_lowercase_hex_is_invalid_fingerprint() {
    let app = TestApp::spawn().await;
    let fp = "ab".repeat(32);
    app.call(OP, "k1", "claim", json!({"fingerprint": fp}))
        .await
        .assert(201, "claimed");
    let before = app.lookup(OP, "k1").await.text;

    for bad in [
        fp.to_uppercase(),
        "a".repeat(63),
        "a".repeat(65),
        "g".repeat(64),
        String::new(),
    ] {
        let answer = app
            .call(OP, "k1", "claim", json!({"fingerprint": bad}))
            .await;

        answer.assert(400, "invalid_fingerprint");
    }
    assert_eq!(app.lookup(OP, "k1").await.text, before);
}

#[tokio::test]
async fn an_integer_beyond_two_to_the_53_is_number_out_of_range() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;
    let body =
        r#"{"request": {"amount": 9007199254740993, "currency": "EUR", "customer": "cus_1"}}"#;

    let on_completed = raw(&app, "k1", "claim", body).await;
    let on_new = raw(&app, "k2", "claim", body).await;
    // 2^53 itself survives the round trip.
    let exact = raw(
        &app,
        "k3",
        "claim",
        r#"{"request": {"amount": 9007199254740992}}"#,
    )
    .await;

    on_completed.assert(400, "number_out_of_range");
    on_new.assert(400, "number_out_of_range");
    exact.assert(201, "claimed");
    app.lookup(OP, "k2").await.assert(404, "not_found");
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn the_same_request_spelled_differently_replays() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;
    let respelled = "{ \"request\" : {\n  \"customer\": \"cus_1\",\n  \"currency\" : \"EUR\",\n  \"amount\": 25.0\n} }";
    let exponent = r#"{"request":{"currency":"EUR","amount":2.5e1,"customer":"cus_1"}}"#;

    let replay = raw(&app, "k1", "claim", respelled).await;
    let replay_exponent = raw(&app, "k1", "claim", exponent).await;
    // The same spelling on a fresh key shows the fingerprint it computes.
    raw(&app, "k2", "claim", respelled)
        .await
        .assert(201, "claimed");

    replay.assert(200, "completed");
    replay_exponent.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], outcome());
    let fingerprint =
        |lookup: &str| serde_json::from_str::<Value>(lookup).unwrap()["fingerprint"].clone();
    assert_eq!(
        fingerprint(&app.lookup(OP, "k2").await.text),
        fingerprint(&before)
    );
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn a_changed_amount_is_key_reused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    let changed = app.claim(OP, "k1", charge(26)).await;
    let fractional = raw(
        &app,
        "k1",
        "claim",
        r#"{"request": {"amount": 25.01, "currency": "EUR", "customer": "cus_1"}}"#,
    )
    .await;
    let as_string = raw(
        &app,
        "k1",
        "claim",
        r#"{"request": {"amount": "25", "currency": "EUR", "customer": "cus_1"}}"#,
    )
    .await;

    changed.assert(422, "key_reused");
    fractional.assert(422, "key_reused");
    as_string.assert(422, "key_reused");
    assert_unchanged(&app, &before).await;
}
