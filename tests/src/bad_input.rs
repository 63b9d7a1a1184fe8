//! Fixtures of the bad-input tests (`bad_input.rs`, `bad_input_addresses.rs`):
//! a completed key to aim bad input at, and the check that it is unchanged
//! afterwards.

use serde_json::{json, Value};

use crate::TestApp;

pub const OP: &str = "charges.create";

pub fn charge(amount: u32) -> Value {
    json!({"amount": amount, "currency": "EUR", "customer": "cus_1"})
}

pub fn outcome() -> Value {
    json!({"status_code": 201, "headers": {"Location": "/charges/ch_1"}, "body": {"id": "ch_1"}, "resource_id": "ch_1"})
}

/// `k1` claimed for `charge(25)` and completed with `outcome()`; answers the
/// record as lookup shows it.
pub async fn completed_key(app: &TestApp) -> String {
    let token = app.claim(OP, "k1", charge(25)).await.owner_token();
    app.complete(OP, "k1", &token, outcome())
        .await
        .assert(200, "completed");
    app.lookup(OP, "k1").await.text
}

/// `k1` is exactly as `before`, and still replays `outcome()`.
pub async fn assert_unchanged(app: &TestApp, before: &str) {
    assert_eq!(
        app.lookup(OP, "k1").await.text,
        before,
        "the record changed"
    );
    let replay = app.claim(OP, "k1", charge(25)).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], outcome());
}
