//! A claim refused as `key_reused` names the JSON pointers that differ from
//! the request the key was first claimed with — never their values — on
//! every backend, whether the refusal came from the database, the cache or
//! a completed record; under the class's fingerprint rules; cut to a bounded
//! list past its limit.

use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "orders.create";

fn order(amount: &str, sku: &str, note: &str) -> Value {
    json!({"amount": amount, "currency": "EUR", "items": [{"sku": sku, "qty": 1}], "note": note})
}

fn mismatched(answer: &idemkey_tests::app::Answer) -> Vec<String> {
    let j = answer.json();
    serde_json::from_value(j["mismatched"].clone())
        .unwrap_or_else(|_| panic!("a mismatched list in {j}"))
}

async fn the_refusal_names_nested_fields_and_not_their_values(app: TestApp) {
    app.claim(OP, "k1", order("25.00", "A-1", "first"))
        .await
        .assert(201, "claimed");

    let refused = app.claim(OP, "k1", order("26.00", "B-2", "first")).await;

    refused.assert(422, "key_reused");
    assert_eq!(mismatched(&refused), ["/amount", "/items/0/sku"]);
    let text = refused.json().to_string();
    for value in ["25.00", "26.00", "A-1", "B-2"] {
        assert!(!text.contains(value), "{value} leaked: {text}");
    }
    assert!(refused.json().get("mismatched_truncated").is_none());
}

async fn a_completed_and_cached_key_names_them_too(app: TestApp) {
    let token = app
        .claim(OP, "k1", order("25.00", "A-1", "first"))
        .await
        .owner_token();
    let outcome = json!({"status_code": 201, "body": {"id": "o_1"}});
    app.complete(OP, "k1", &token, outcome)
        .await
        .assert(200, "completed");
    // The replay fills this node's cache; the refusal then comes from it.
    app.claim(OP, "k1", order("25.00", "A-1", "first"))
        .await
        .assert(200, "completed");

    let refused = app.claim(OP, "k1", order("25.00", "A-1", "second")).await;

    refused.assert(422, "key_reused");
    assert_eq!(mismatched(&refused), ["/note"]);
}

async fn excluded_fields_never_show_and_decimals_compare_as_numbers(app: TestApp) {
    let policy = json!({"fingerprint": {"exclude": ["/note"], "decimal_fields": ["/amount"]}});
    let put = app.put_class(OP, policy).await;
    assert_eq!(put.status, 200, "{}", put.json());
    app.claim(OP, "k1", order("25.00", "A-1", "first"))
        .await
        .assert(201, "claimed");

    let refused = app.claim(OP, "k1", order("25.0", "B-2", "second")).await;

    refused.assert(422, "key_reused");
    assert_eq!(mismatched(&refused), ["/items/0/sku"]);
}

async fn a_precomputed_fingerprint_has_no_fields_to_name(app: TestApp) {
    app.claim(OP, "k1", order("25.00", "A-1", "first"))
        .await
        .assert(201, "claimed");

    let fingerprint = json!({"fingerprint": "ab".repeat(32)});
    let refused = app.call(OP, "k1", "claim", fingerprint).await;

    refused.assert(422, "key_reused");
    assert!(
        refused.json().get("mismatched").is_none(),
        "{}",
        refused.json()
    );
}

async fn a_request_with_many_differences_is_cut_and_says_so(app: TestApp) {
    let many = |v: u32| Value::Object((0..80).map(|i| (format!("f{i:02}"), json!(v))).collect());
    app.claim(OP, "k1", many(1)).await.assert(201, "claimed");

    let refused = app.claim(OP, "k1", many(2)).await;

    refused.assert(422, "key_reused");
    assert_eq!(mismatched(&refused).len(), 32);
    assert_eq!(refused.json()["mismatched_truncated"], true);
}

idemkey_tests::on_every_backend!(
    the_refusal_names_nested_fields_and_not_their_values,
    a_completed_and_cached_key_names_them_too,
    excluded_fields_never_show_and_decimals_compare_as_numbers,
    a_precomputed_fingerprint_has_no_fields_to_name,
    a_request_with_many_differences_is_cut_and_says_so,
);
