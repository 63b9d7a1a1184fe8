//! When a replay window ends, over real HTTP on every backend: a late
//! completion keeps a whole window, and an attempt that never completed is
//! taken over (`recovering`), never claimed anew, until its last lease ended
//! a window ago. Time passes by moving the key's stored times back.

use chrono::{DateTime, Utc};
use idemkey_tests::db::Backend;
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "pay";

idemkey_tests::on_every_backend!(
    a_late_completion_replays_for_a_whole_window,
    an_abandoned_attempt_is_recovered_not_claimed_anew,
    an_unfinished_key_is_protected_a_window_past_its_lease,
);

/// Moves every stored time of `key` back by `secs` (its clock moves on).
async fn age(app: &TestApp, key: &str, secs: i64) {
    let shift = |c: &str| match Backend::of(&app.database_url) {
        Backend::Postgres => format!("{c} = {c} - interval '{secs} seconds'"),
        Backend::Sqlite => format!("{c} = {c} - {}", secs * 1000),
    };
    let set = [
        "claimed_at",
        "lease_expires_at",
        "expires_at",
        "tier_at",
        "created_at",
        "completed_at",
    ]
    .map(shift)
    .join(", ");
    app.sql(&format!(
        "update idempotency_key set {set} where key = '{key}'"
    ))
    .await;
}

fn time(j: &Value, field: &str) -> DateTime<Utc> {
    let text = j[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {j}"));
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

async fn a_late_completion_replays_for_a_whole_window(app: TestApp) {
    app.put_class(OP, json!({"replay_window": "2s", "lease": "10s"}))
        .await
        .assert(200, "");
    let owner = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    age(&app, "k1", 3).await; // three seconds of work, the lease still live

    let done = app
        .complete(
            OP,
            "k1",
            &owner,
            json!({"status_code": 201, "body": {"n": 1}}),
        )
        .await;
    done.assert(200, "completed");
    let record = done.json();
    let window = time(&record, "expires_at") - time(&record, "completed_at");
    assert!(window.num_milliseconds() >= 2_000, "{record}");

    let again = app.claim(OP, "k1", json!({"a": 1})).await;
    again.assert(200, "completed");
    assert_eq!(again.json()["outcome"]["body"]["n"], 1);
}

async fn an_abandoned_attempt_is_recovered_not_claimed_anew(app: TestApp) {
    app.put_class(OP, json!({"replay_window": "2s", "lease": "5s"}))
        .await
        .assert(200, "");
    let first = app.claim(OP, "k1", json!({"a": 1})).await;
    first.assert(201, "claimed");
    // The owner dies; its lease ends one second after the window did.
    age(&app, "k1", 6).await;

    let retry = app.claim(OP, "k1", json!({"a": 1})).await;
    retry.assert(200, "recovering");
    let j = retry.json();
    assert_eq!(j["attempt"], 2);
    assert_eq!(j["previous_attempt"]["attempt"], 1);
    assert_eq!(j["effect_id"], first.json()["effect_id"]);
    app.claim(OP, "k1", json!({"a": 2}))
        .await
        .assert(422, "key_reused");
}

async fn an_unfinished_key_is_protected_a_window_past_its_lease(app: TestApp) {
    app.put_class(OP, json!({"replay_window": "2s", "lease": "5s"}))
        .await
        .assert(200, "");
    let claimed = app.claim(OP, "k1", json!({"a": 1})).await.json();
    let promised = time(&claimed, "lease_expires_at") + chrono::TimeDelta::seconds(2);
    assert_eq!(time(&claimed, "expires_at"), promised, "{claimed}");
    let looked = app.lookup(OP, "k1").await.json();
    assert_eq!(time(&looked, "expires_at"), promised, "{looked}");
}
