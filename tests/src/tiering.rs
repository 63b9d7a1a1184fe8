//! Helpers for the tiering tests (`tests/tests/tiering*.rs`): a test
//! server whose archive is a fresh prefix of a Garage bucket and whose
//! workers wake every 200 ms, keys completed with an outcome sent verbatim,
//! and waiting for a condition with a deadline.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use serde_json::{json, Value};

use crate::app::Answer;
use crate::garage::S3Target;
use crate::TestApp;

pub const OP: &str = "charges.create";

/// An outcome with spacing and number spellings a re-serialisation would
/// lose: what replays must be exactly these bytes.
pub fn outcome_text(n: usize) -> String {
    format!(
        r#"{{"status_code": 201, "headers": {{"x-request": "r-{n}"}},
   "body": {{"amount": 25.00, "id": "ch_{n}", "note": "✓ line\nbreak"}} , "resource_id": "ch_{n}"}}"#
    )
}

/// The variables that put the archive at a fresh prefix of `target` and
/// wake the workers every 200 ms.
pub fn archive_vars(vars: &mut HashMap<String, String>, target: &S3Target) {
    let prefix = format!("tiering/{:016x}", rand::random::<u64>());
    vars.insert(
        "IDEMKEY_ARCHIVE_URL".into(),
        format!("s3://{}/{prefix}", target.bucket),
    );
    let s = &target.settings;
    for (name, value) in [
        ("AWS_ENDPOINT_URL", &s.endpoint),
        ("AWS_REGION", &s.region),
        ("AWS_ACCESS_KEY_ID", &s.access_key_id),
        ("AWS_SECRET_ACCESS_KEY", &s.secret_access_key),
    ] {
        if let Some(value) = value {
            vars.insert(name.into(), value.clone());
        }
    }
    vars.insert("IDEMKEY_WORKERS".into(), "on".into());
    vars.insert("IDEMKEY_WORKER_INTERVAL".into(), "200ms".into());
}

/// Polls `check` until it holds; panics with `what` after `timeout`.
pub async fn until<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Claims `key` and completes it with `outcome_text(n)` sent verbatim;
/// returns the owner token.
pub async fn complete_verbatim(app: &TestApp, key: &str, n: usize) -> String {
    let claimed = app.claim(OP, key, json!({ "n": n })).await;
    claimed.assert(201, "claimed");
    let owner = claimed.owner_token();
    let done = send_completion(app, key, &owner, n).await;
    assert_eq!(done.status, 200, "{}", done.text);
    owner
}

pub async fn send_completion(app: &TestApp, key: &str, owner: &str, n: usize) -> Answer {
    let body = format!(
        r#"{{"owner_token": "{owner}", "outcome": {}}}"#,
        outcome_text(n)
    );
    app.post_raw(&format!("{}/complete", app.key_url(OP, key)), body)
        .await
}

pub async fn tier_of(app: &TestApp, key: &str) -> String {
    let found = app.lookup(OP, key).await;
    assert_eq!(found.status, 200, "{}", found.text);
    found.json()["tier"].as_str().unwrap_or_default().to_owned()
}

pub async fn wait_until_archived(app: &TestApp, key: &str) {
    until(
        &format!("{key} is archived"),
        Duration::from_secs(60),
        || async { tier_of(app, key).await == "archived" },
    )
    .await;
}

/// A policy whose records tier after one second and stay an hour.
pub fn quick_tiering() -> Value {
    json!({ "replay_window": "1h", "hot_retention": "1s" })
}
