//! Operation-class policies applied to claims, over real HTTP on both
//! backends: leases, waits, outcome limits, fingerprint rules, replay
//! windows and quarantine on lease expiry (SPEC section 6).

use std::time::{Duration, Instant};

use chrono::DateTime;
use idemkey_api::auth::Role;
use idemkey_api::engine::POLICY_TTL;
use idemkey_tests::app::Answer;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "charges.create";
/// A class nobody sets a policy for in these tests.
const PLAIN: &str = "plain.create";

async fn set(app: &TestApp, operation: &str, policy: Value) {
    let answer = app.put_class(operation, policy).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
}

fn millis_between(record: &Value, from: &str, to: &str) -> i64 {
    let at = |field: &str| {
        DateTime::parse_from_rfc3339(record[field].as_str().expect(field)).expect("RFC 3339")
    };
    (at(to) - at(from)).num_milliseconds()
}

/// Claims and completes `key` with `request`.
async fn completed(app: &TestApp, operation: &str, key: &str, request: Value) {
    let token = app.claim(operation, key, request).await.owner_token();
    app.complete(operation, key, &token, json!({"status_code": 201}))
        .await
        .assert(200, "completed");
}

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

async fn excluded_fields_do_not_change_the_fingerprint(app: TestApp) {
    set(
        &app,
        OP,
        json!({"fingerprint": {"exclude": ["/request_id"]}}),
    )
    .await;
    completed(&app, OP, "k1", json!({"amount": 25, "request_id": "r-1"})).await;
    completed(
        &app,
        PLAIN,
        "k1",
        json!({"amount": 25, "request_id": "r-1"}),
    )
    .await;

    let retry = app
        .claim(OP, "k1", json!({"amount": 25, "request_id": "r-2"}))
        .await;
    let changed = app
        .claim(OP, "k1", json!({"amount": 26, "request_id": "r-1"}))
        .await;
    let plain = app
        .claim(PLAIN, "k1", json!({"amount": 25, "request_id": "r-2"}))
        .await;

    retry.assert(200, "completed");
    assert_eq!(retry.json()["replayed"], true);
    changed.assert(422, "key_reused");
    plain.assert(422, "key_reused");
}

async fn decimal_fields_make_25_00_and_25_0_the_same_amount(app: TestApp) {
    set(
        &app,
        OP,
        json!({"fingerprint": {"decimal_fields": ["/amount"]}}),
    )
    .await;
    completed(
        &app,
        OP,
        "k1",
        json!({"amount": "25.00", "currency": "EUR"}),
    )
    .await;
    completed(
        &app,
        PLAIN,
        "k1",
        json!({"amount": "25.00", "currency": "EUR"}),
    )
    .await;

    let same = app
        .claim(OP, "k1", json!({"amount": "25.0", "currency": "EUR"}))
        .await;
    let other = app
        .claim(OP, "k1", json!({"amount": "25.01", "currency": "EUR"}))
        .await;
    let plain = app
        .claim(PLAIN, "k1", json!({"amount": "25.0", "currency": "EUR"}))
        .await;

    same.assert(200, "completed");
    other.assert(422, "key_reused");
    plain.assert(422, "key_reused");
}

async fn include_protects_only_the_named_fields(app: TestApp) {
    set(
        &app,
        OP,
        json!({"fingerprint": {"include": ["/amount", "/currency"]}}),
    )
    .await;
    completed(
        &app,
        OP,
        "k1",
        json!({"amount": 25, "currency": "EUR", "note": "a"}),
    )
    .await;

    let note = app
        .claim(
            OP,
            "k1",
            json!({"amount": 25, "currency": "EUR", "note": "b"}),
        )
        .await;
    let currency = app
        .claim(
            OP,
            "k1",
            json!({"amount": 25, "currency": "USD", "note": "a"}),
        )
        .await;

    note.assert(200, "completed");
    currency.assert(422, "key_reused");
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

async fn a_policy_change_applies_to_the_next_claim_on_the_same_node(app: TestApp) {
    // The first claim reads (and caches) the defaults.
    completed(&app, OP, "k1", json!({"amount": 25, "request_id": "r-1"})).await;

    set(
        &app,
        OP,
        json!({"fingerprint": {"exclude": ["/request_id"]}}),
    )
    .await;
    completed(&app, OP, "k2", json!({"amount": 25, "request_id": "r-1"})).await;
    let excluded = app
        .claim(OP, "k2", json!({"amount": 25, "request_id": "r-2"}))
        .await;
    assert!(app.delete_class(OP).await.status == 200);
    completed(&app, OP, "k3", json!({"amount": 25, "request_id": "r-1"})).await;
    let protected = app
        .claim(OP, "k3", json!({"amount": 25, "request_id": "r-2"}))
        .await;

    excluded.assert(200, "completed");
    protected.assert(422, "key_reused");
}

async fn another_node_sees_a_policy_change_within_the_cache_lifetime(app: TestApp) {
    let other_node = app.spawn_sibling().await;
    // The other node reads (and caches) the class's defaults.
    other_node
        .claim(OP, "k0", json!({"a": 1}))
        .await
        .assert(201, "claimed");

    set(
        &app,
        OP,
        json!({"fingerprint": {"exclude": ["/request_id"]}}),
    )
    .await;
    let changed = Instant::now();
    // Written under the new rules: request_id is not part of its fingerprint.
    completed(&app, OP, "k1", json!({"amount": 25, "request_id": "r-1"})).await;
    let retry = || other_node.claim(OP, "k1", json!({"amount": 25, "request_id": "r-2"}));
    let seen = loop {
        let answer: Answer = retry().await;
        if answer.status == 200 {
            break changed.elapsed();
        }
        // Still the old rules there: request_id counts, so the retry differs.
        answer.assert(422, "key_reused");
        assert!(changed.elapsed() < POLICY_TTL * 3, "never saw the change");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    assert!(seen <= POLICY_TTL + Duration::from_millis(500), "{seen:?}");
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

/// A record keeps the fingerprint rules it was written under: a retry of
/// the original request still replays after an admin changed them, while a
/// new key follows the new rules.
async fn fingerprint_rules_are_fixed_per_record(app: TestApp) {
    // Arrange: "25.00" and "25.0" are the same amount under these rules.
    set(
        &app,
        OP,
        json!({"fingerprint": {"decimal_fields": ["/amount"], "exclude": ["/trace"]}}),
    )
    .await;
    completed(&app, OP, "done", json!({"amount": "25.00", "trace": "t-1"})).await;
    app.claim(OP, "open", json!({"amount": "25.00", "trace": "t-1"}))
        .await
        .assert(201, "claimed");

    // Act: the rules change; nothing is normalised or excluded any more.
    set(&app, OP, json!({"fingerprint": {}})).await;
    let fresh = app.spawn_sibling().await.as_tenant_of(&app); // nothing cached

    // Assert: each record judges retries by its own rules, on every node.
    for node in [&app, &fresh] {
        node.claim(OP, "done", json!({"amount": "25.0", "trace": "t-2"}))
            .await
            .assert(200, "completed");
        node.claim(OP, "done", json!({"amount": "26.00", "trace": "t-1"}))
            .await
            .assert(422, "key_reused");
        node.claim(OP, "open", json!({"amount": "25.0", "trace": "t-3"}))
            .await
            .assert(409, "in_progress");
    }
    // A key first claimed under the new rules follows them.
    completed(&app, OP, "new", json!({"amount": "25.00"})).await;
    app.claim(OP, "new", json!({"amount": "25.0"}))
        .await
        .assert(422, "key_reused");
    app.claim(OP, "new", json!({"amount": "25.00"}))
        .await
        .assert(200, "completed");
}

idemkey_tests::on_every_backend!(
    fingerprint_rules_are_fixed_per_record,
    a_claim_gets_the_lease_of_its_class,
    a_lease_ms_above_the_class_max_lease_is_invalid_lease,
    max_wait_caps_how_long_a_duplicate_waits,
    max_outcome_bytes_bounds_the_outcome_in_both_directions,
    excluded_fields_do_not_change_the_fingerprint,
    decimal_fields_make_25_00_and_25_0_the_same_amount,
    include_protects_only_the_named_fields,
    a_window_shortened_later_does_not_shorten_existing_records,
    a_class_that_quarantines_on_lease_expiry_never_takes_over,
    a_policy_change_applies_to_the_next_claim_on_the_same_node,
    another_node_sees_a_policy_change_within_the_cache_lifetime,
    another_tenants_policy_does_not_apply,
);
