//! Operation-class policies applied to claims, over real HTTP on both
//! backends: leases, waits, outcome limits, replay windows, quarantine on
//! lease expiry, and one tenant's policy never applying to another's
//! claims. Fingerprint rules, and when a policy change takes effect, are in
//! `class_fingerprints.rs`.

use std::time::{Duration, Instant};

use idemkey_api::auth::Role;
use idemkey_tests::classes::{completed, millis_between, set};
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "charges.create";
/// A class nobody sets a policy for in these tests.
const PLAIN: &str = "plain.create";

async fn a_claim_gets_the_lease_of_its_class(app: TestApp) {
    set(&app, OP, json!({"lease": "5s"})).await;

    app.claim(OP, "k1", json!({"a": 1}))
        .await
        .assert(201, "claimed");
    app.claim(PLAIN, "k1", json!({"a": 1}))
        .await
        .assert(201, "claimed");

    let record = app.lookup(OP, "k1").await.json();
    assert_eq!(
        millis_between(&record, "claimed_at", "lease_expires_at"),
        5_000
    );
    let plain = app.lookup(PLAIN, "k1").await.json();
    assert_eq!(
        millis_between(&plain, "claimed_at", "lease_expires_at"),
        30_000
    );
}

async fn a_lease_ms_above_the_class_max_lease_is_invalid_lease(app: TestApp) {
    set(&app, OP, json!({"max_lease": "10s"})).await;
    let claim = |key: &'static str, lease_ms: u64| {
        app.call(
            OP,
            key,
            "claim",
            json!({"request": {"a": 1}, "lease_ms": lease_ms}),
        )
    };

    let over = claim("k1", 10_001).await;
    let at_max = claim("k2", 10_000).await;

    over.assert(400, "invalid_lease");
    assert!(over.text.contains("1000-10000"), "{}", over.text);
    at_max.assert(201, "claimed");
    // The class's default lease was capped at its maximum.
    let record = app.lookup(OP, "k2").await.json();
    assert_eq!(
        millis_between(&record, "claimed_at", "lease_expires_at"),
        10_000
    );
}

async fn max_wait_caps_how_long_a_duplicate_waits(app: TestApp) {
    set(&app, OP, json!({"max_wait": "1s"})).await;
    app.claim(OP, "k1", json!({"a": 1}))
        .await
        .assert(201, "claimed");

    let started = Instant::now();
    let dup = app
        .call(
            OP,
            "k1",
            "claim",
            json!({"request": {"a": 1}, "wait_ms": 10_000}),
        )
        .await;
    let waited = started.elapsed();

    dup.assert(409, "in_progress");
    assert!(
        (Duration::from_millis(900)..Duration::from_secs(5)).contains(&waited),
        "waited {waited:?}; the default max_wait would be 10 s"
    );
}

async fn max_outcome_bytes_bounds_the_outcome_in_both_directions(app: TestApp) {
    set(&app, OP, json!({"max_outcome_bytes": 200})).await;
    set(
        &app,
        "exports.create",
        json!({"max_outcome_bytes": 2_097_152}),
    )
    .await;
    let small = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    let big = app
        .claim("exports.create", "k1", json!({"a": 1}))
        .await
        .owner_token();

    let too_large = app
        .complete(
            OP,
            "k1",
            &small,
            json!({"status_code": 200, "body": "x".repeat(300)}),
        )
        .await;
    let large_ok = app
        .complete(
            "exports.create",
            "k1",
            &big,
            json!({"status_code": 200, "body": "x".repeat(1_500_000)}),
        )
        .await;

    too_large.assert(413, "outcome_too_large");
    assert!(too_large.text.contains("200 bytes"), "{}", too_large.text);
    app.lookup(OP, "k1").await.assert(200, "in_progress");
    app.complete(
        OP,
        "k1",
        &small,
        json!({"status_code": 200, "body": "fits"}),
    )
    .await
    .assert(200, "completed");
    large_ok.assert(200, "completed");
}

async fn a_window_shortened_later_does_not_shorten_existing_records(app: TestApp) {
    completed(&app, OP, "old", json!({"a": 1})).await;
    let promised = app.lookup(OP, "old").await.json()["expires_at"].clone();

    set(&app, OP, json!({"replay_window": "1s"})).await;
    completed(&app, OP, "new", json!({"a": 1})).await;
    let new = app.lookup(OP, "new").await.json();
    // A completion keeps a whole window from when the outcome was stored.
    assert_eq!(millis_between(&new, "completed_at", "expires_at"), 1_000);
    tokio::time::sleep(Duration::from_millis(1_200)).await;

    // The old record keeps the window it was promised and still replays...
    let replay = app.claim(OP, "old", json!({"a": 1})).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["expires_at"], promised);
    assert_eq!(app.lookup(OP, "old").await.json()["expires_at"], promised);
    // ...while the record written under the short window is gone.
    app.lookup(OP, "new").await.assert(404, "not_found");
    app.claim(OP, "new", json!({"b": 2}))
        .await
        .assert(201, "claimed");
}

async fn a_class_that_quarantines_on_lease_expiry_never_takes_over(app: TestApp) {
    set(
        &app,
        OP,
        json!({"lease": "1s", "on_lease_expiry": "quarantine"}),
    )
    .await;
    let owner = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();

    // A duplicate waits out the one-second lease, then finds it ended.
    let dup = app
        .call(
            OP,
            "k1",
            "claim",
            json!({"request": {"a": 1}, "wait_ms": 5_000}),
        )
        .await;

    dup.assert(409, "quarantined");
    let record = app.lookup(OP, "k1").await;
    record.assert(200, "quarantined");
    assert_eq!(record.json()["attempt"], 1, "nobody took over");
    assert_eq!(record.json()["quarantine_reason"], "lease expired");
    app.claim(OP, "k1", json!({"a": 1}))
        .await
        .assert(409, "quarantined");
    app.claim(OP, "k1", json!({"a": 2}))
        .await
        .assert(422, "key_reused");
    app.complete(OP, "k1", &owner, json!({"status_code": 200}))
        .await
        .assert(409, "quarantined");
}

async fn another_tenants_policy_does_not_apply(app: TestApp) {
    set(
        &app,
        OP,
        json!({"fingerprint": {"exclude": ["/request_id"]}, "lease": "5s"}),
    )
    .await;
    let b = token(&fresh_tenant(), &[Role::Client, Role::Viewer]);
    let claim_b = |request: Value| app.call_as(&b, OP, "k1", "claim", json!({"request": request}));

    let first = claim_b(json!({"amount": 25, "request_id": "r-1"})).await;
    first.assert(201, "claimed");
    let retry = claim_b(json!({"amount": 25, "request_id": "r-2"})).await;

    retry.assert(422, "key_reused");
    let record = app.lookup_as(&b, OP, "k1").await.json();
    assert_eq!(
        millis_between(&record, "claimed_at", "lease_expires_at"),
        30_000
    );
}

idemkey_tests::on_every_backend!(
    a_claim_gets_the_lease_of_its_class,
    a_lease_ms_above_the_class_max_lease_is_invalid_lease,
    max_wait_caps_how_long_a_duplicate_waits,
    max_outcome_bytes_bounds_the_outcome_in_both_directions,
    a_window_shortened_later_does_not_shorten_existing_records,
    a_class_that_quarantines_on_lease_expiry_never_takes_over,
    another_tenants_policy_does_not_apply,
);
