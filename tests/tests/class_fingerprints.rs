//! A class's fingerprint rules applied to claims, over real HTTP on both
//! backends: excluded fields, decimal fields, an include list, rules fixed
//! per record when they change, and when a change takes effect (at once on
//! the node that made it, within the policy cache's lifetime on another).
//! The policy's other limits are in `class_policies.rs`.

use std::time::{Duration, Instant};

use idemkey_api::engine::POLICY_TTL;
use idemkey_tests::app::Answer;
use idemkey_tests::classes::{completed, set};
use idemkey_tests::TestApp;
use serde_json::json;

const OP: &str = "charges.create";
/// A class nobody sets a policy for in these tests.
const PLAIN: &str = "plain.create";

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
    excluded_fields_do_not_change_the_fingerprint,
    decimal_fields_make_25_00_and_25_0_the_same_amount,
    include_protects_only_the_named_fields,
    a_policy_change_applies_to_the_next_claim_on_the_same_node,
    another_node_sees_a_policy_change_within_the_cache_lifetime,
);
