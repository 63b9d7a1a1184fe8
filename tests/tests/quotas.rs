//! Per-tenant quotas on stored keys and outcome bytes: a tenant that
//! reached its quota is refused new keys (507 `quota_exceeded`) while its
//! replays, takeovers and completions of keys it already holds, and every
//! other tenant, go on; the measured figure counts keys and bytes exactly;
//! the dashboard shows usage against the quota; the operator sets quotas
//! with `idemkey quota` (the real binary) or by default variables.

use std::collections::HashMap;

use idemkey_api::auth::Role;
use idemkey_api::domain::quota::Stored;
use idemkey_api::domain::TenantId;
use idemkey_api::store::Store;
use idemkey_tests::dashboard::fixtures::{figure, viewer};
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::process::binary;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::{json, Value};

const OP: &str = "orders.create";

/// Runs `idemkey quota <args>` against the app's database with the app's
/// configuration, as an operator would; returns what it printed.
async fn quota_command(app: &TestApp, args: &[&str]) -> String {
    let out = tokio::process::Command::new(binary())
        .arg("quota")
        .args(args)
        .env_clear()
        .envs(&app.vars)
        .output()
        .await
        .expect("run idemkey quota");
    assert!(
        out.status.success(),
        "idemkey quota {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// What the store says `tenant` stores, as last measured.
async fn stored(app: &TestApp, tenant: &str) -> Stored {
    let store = Store::connect(&app.database_url).await.expect("store");
    let tenant = TenantId::parse(tenant).expect("tenant");
    store
        .storage_of(&tenant)
        .await
        .expect("read storage")
        .expect("measured")
        .stored
}

/// Claims `key` and completes it with `outcome`; the outcome's stored text.
async fn completed(app: &TestApp, key: &str, outcome: Value) -> String {
    let owner = app
        .claim(OP, key, json!({"key": key}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.complete(OP, key, &owner, outcome.clone())
        .await
        .assert(200, "completed");
    outcome.to_string()
}

async fn a_tenant_over_quota_is_refused_new_keys_and_nothing_else(app: TestApp) {
    // Arrange: three keys — completed, in progress, and one whose lease ran
    // out (a takeover waits) — then a quota of exactly three keys.
    completed(&app, "done", json!({"status_code": 201, "body": {"id": 1}})).await;
    let holding = app
        .claim(OP, "holding", json!({"key": "holding"}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.claim(OP, "stalled", json!({"key": "stalled"}))
        .await
        .assert(201, "claimed");
    app.expire_lease("stalled").await;
    let set = quota_command(&app, &["set", "--tenant", &app.tenant, "--max-keys", "3"]).await;
    assert!(set.contains("max_keys=3"), "{set}");
    app.quota_pass().await;

    // Act and assert: a new key is refused, and stays absent.
    let refused = app.claim(OP, "new", json!({"key": "new"})).await;
    refused.assert(507, "quota_exceeded");
    assert_eq!(
        refused.retry_after, None,
        "no Retry-After: waiting alone does not lift it"
    );
    let detail = refused.json()["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(detail.contains("3 keys"), "{detail}");
    app.lookup(OP, "new").await.assert(404, "not_found");
    // The keys it holds go on: replay, key reuse, in progress, completion,
    // takeover.
    app.claim(OP, "done", json!({"key": "done"}))
        .await
        .assert(200, "completed");
    app.claim(OP, "done", json!({"key": "other"}))
        .await
        .assert(422, "key_reused");
    app.claim(OP, "holding", json!({"key": "holding"}))
        .await
        .assert(409, "in_progress");
    app.complete(OP, "holding", &holding, json!({"status_code": 200}))
        .await
        .assert(200, "completed");
    app.claim(OP, "stalled", json!({"key": "stalled"}))
        .await
        .assert(200, "recovering");
    // Another tenant on the same server is not affected.
    let other = token(&fresh_tenant(), &[Role::Client]);
    app.call_as(
        &other,
        OP,
        "new",
        "claim",
        json!({"request": {"key": "new"}}),
    )
    .await
    .assert(201, "claimed");

    // Raising the quota lets the tenant in again after the next pass.
    quota_command(&app, &["set", "--tenant", &app.tenant, "--max-keys", "4"]).await;
    app.quota_pass().await;
    app.claim(OP, "new", json!({"key": "new"}))
        .await
        .assert(201, "claimed");
    let measured = stored(&app, &app.tenant).await;
    println!("quota 3 keys: new key refused 507; replay, reuse, in-progress, complete, takeover, other tenant unaffected; measured {measured:?}");
}

async fn the_measured_figure_counts_live_keys_and_outcome_bytes_exactly(app: TestApp) {
    // Arrange: completed keys with outcomes of known text, one in progress
    // (no outcome bytes), one past its window (not counted), and another
    // tenant's key (counted for that tenant only).
    let outcomes = [
        json!({"status_code": 201, "body": {"id": "a"}}),
        json!({"status_code": 200, "headers": {"x-n": "2"}, "body": "x".repeat(300)}),
        json!({"status_code": 204}),
    ];
    let mut bytes = 0;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        bytes += completed(&app, &format!("k{i}"), outcome).await.len();
    }
    app.claim(OP, "open", json!({"key": "open"}))
        .await
        .assert(201, "claimed");
    completed(&app, "old", json!({"status_code": 200, "body": "gone"})).await;
    app.expire_window("old").await;
    let other = token(&fresh_tenant(), &[Role::Client]);
    app.call_as(&other, OP, "theirs", "claim", json!({"request": {"k": 1}}))
        .await
        .assert(201, "claimed");
    // A quota must exist for the worker to measure: a generous one.
    quota_command(
        &app,
        &["set", "--tenant", &app.tenant, "--max-keys", "1000"],
    )
    .await;

    // Act
    app.quota_pass().await;
    let figure = stored(&app, &app.tenant).await;

    // Assert
    assert_eq!(
        figure,
        Stored {
            keys: 4,
            outcome_bytes: bytes as u64,
            archived_bytes: 0,
        }
    );
    println!("measured {figure:?}: 4 live keys, {bytes} outcome bytes (a key past its window and another tenant's not counted)");

    // A tenant whose keys all go stops counting them at the next pass.
    for key in ["k0", "k1", "k2", "open"] {
        app.expire_window(key).await;
    }
    app.quota_pass().await;
    assert_eq!(stored(&app, &app.tenant).await, Stored::default());
}

async fn the_storage_page_shows_usage_against_the_quota(app: TestApp) {
    // Arrange: two keys, one completed; quotas of 2 keys and 1 MiB.
    let text = completed(&app, "a", json!({"status_code": 201})).await;
    app.claim(OP, "b", json!({"key": "b"}))
        .await
        .assert(201, "claimed");
    quota_command(
        &app,
        &[
            "set",
            "--tenant",
            &app.tenant,
            "--max-keys",
            "2",
            "--max-outcome-bytes",
            "1MiB",
        ],
    )
    .await;
    app.quota_pass().await;

    // Act
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    let page = visitor.get("/dashboard/storage").await;

    // Assert
    assert_eq!(page.status, 200);
    assert_eq!(figure(&page, "Keys stored"), "2 of 2");
    assert_eq!(
        figure(&page, "Outcome bytes stored"),
        format!("{} B of 1 MiB", text.len())
    );
    page.assert_contains("Over quota:");
    println!(
        "storage page: keys 2 of 2, outcome bytes {} B of 1 MiB, over quota shown",
        text.len()
    );

    // Another tenant's page shows its own (unmeasured, unlimited) figures.
    let stranger = token(&fresh_tenant(), &[Role::Viewer]);
    let theirs = Visitor::signed_in(&app, &stranger).await;
    let page = theirs.get("/dashboard/storage").await;
    assert_eq!(figure(&page, "Keys stored"), "not measured (no limit)");
    assert!(!page.text.contains("Over quota:"));
}

on_every_backend!(
    a_tenant_over_quota_is_refused_new_keys_and_nothing_else,
    the_measured_figure_counts_live_keys_and_outcome_bytes_exactly,
    the_storage_page_shows_usage_against_the_quota,
);

/// Default quotas come from the variables; `unlimited` exempts a tenant;
/// under quota, a new key costs the statements it cost without quotas.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn default_quotas_apply_to_every_tenant_and_cost_no_statement_per_claim() {
    let app = TestApp::spawn_with(|vars: &mut HashMap<String, String>| {
        vars.insert("IDEMKEY_QUOTA_MAX_KEYS".into(), "2".into());
        vars.insert("IDEMKEY_QUOTA_MAX_OUTCOME_BYTES".into(), "64KiB".into());
    })
    .await;
    // Under quota: one statement per new key (the insert), no quota read.
    app.claim(OP, "warm", json!({"key": "warm"}))
        .await
        .assert(201, "claimed");
    app.quota_pass().await;
    let before = app.metrics().await.statements();
    app.claim(OP, "second", json!({"key": "second"}))
        .await
        .assert(201, "claimed");
    let spent = app.metrics().await.statements() - before;
    assert_eq!(spent, 1.0, "a new key under quota costs its insert only");

    // Two keys reach the default of two.
    app.quota_pass().await;
    app.claim(OP, "third", json!({"key": "third"}))
        .await
        .assert(507, "quota_exceeded");

    // An `unlimited` override exempts this tenant from the default.
    let out = quota_command(
        &app,
        &["set", "--tenant", &app.tenant, "--max-keys", "unlimited"],
    )
    .await;
    assert!(out.contains("max_keys=unlimited"), "{out}");
    app.quota_pass().await;
    app.claim(OP, "third", json!({"key": "third"}))
        .await
        .assert(201, "claimed");
    let shown = quota_command(&app, &["show"]).await;
    assert!(
        shown.contains("defaults\tmax_keys=2\tmax_outcome_bytes=65536"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("{}\tmax_keys=unlimited", app.tenant)),
        "{shown}"
    );

    // Clearing the override puts the default back.
    quota_command(&app, &["clear", "--tenant", &app.tenant]).await;
    app.quota_pass().await;
    app.claim(OP, "fourth", json!({"key": "fourth"}))
        .await
        .assert(507, "quota_exceeded");
    println!("defaults 2 keys / 64 KiB: new key under quota cost {spent} statement; third refused; unlimited override admitted it; clear restored the default\n{shown}");
}
