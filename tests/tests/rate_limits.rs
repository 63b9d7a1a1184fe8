//! Per-tenant rate limits (`IDEMKEY_TENANT_RATE_LIMIT`): a tenant over its
//! limit gets 429 `rate_limited` with `Retry-After`, changes nothing, and
//! does not slow any other tenant down.

use std::time::{Duration, Instant};

use idemkey_api::auth::Role;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use serde_json::json;

const PER_SECOND: u32 = 2;

async fn limited_app() -> TestApp {
    TestApp::spawn_with(|vars| {
        vars.insert("IDEMKEY_TENANT_RATE_LIMIT".into(), PER_SECOND.to_string());
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tenant_over_its_limit_gets_429_and_other_tenants_do_not() {
    // Arrange
    let app = limited_app().await;
    const CALLS: usize = 20;

    // Act: twenty lookups at once.
    let started = Instant::now();
    let mut calls = tokio::task::JoinSet::new();
    for n in 0..CALLS {
        let app = app.clone();
        calls.spawn(async move { app.lookup("charges.create", &format!("k{n}")).await });
    }
    let mut answers = Vec::new();
    while let Some(answer) = calls.join_next().await {
        answers.push(answer.unwrap());
    }
    let elapsed = started.elapsed().as_secs_f64();

    // Assert: a burst of one second's worth, then the rate; the rest 429.
    let admitted = answers.iter().filter(|a| a.status == 404).count();
    let limited: Vec<_> = answers.iter().filter(|a| a.status == 429).collect();
    assert_eq!(admitted + limited.len(), CALLS, "only 404s and 429s");
    let most = PER_SECOND as f64 * (1.0 + elapsed.ceil());
    assert!(
        admitted >= PER_SECOND as usize && admitted as f64 <= most,
        "{admitted} admitted in {elapsed:.2} s"
    );
    let refused = limited[0];
    refused.assert(429, "rate_limited");
    assert_eq!(refused.content_type, "application/problem+json");
    assert_eq!(refused.retry_after.as_deref(), Some("1"));

    // Another tenant is not held back by the first one's calls.
    let other = token(&fresh_tenant(), &[Role::Client, Role::Viewer]);
    app.lookup_as(&other, "charges.create", "k0")
        .await
        .assert(404, "not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_claim_changes_nothing_and_the_tenant_recovers() {
    // Arrange: use up the burst.
    let app = limited_app().await;
    let mut refused = None;
    for n in 0..50 {
        let answer = app.lookup("charges.create", &format!("warm-{n}")).await;
        if answer.status == 429 {
            refused = Some(answer);
            break;
        }
    }
    refused.expect("the limit is reached within 50 calls");

    // Act: a claim while over the limit.
    let claim = app
        .claim("charges.create", "order-1", json!({"a": 1}))
        .await;

    // Assert: refused, and once the allowance is back, the key is unknown.
    claim.assert(429, "rate_limited");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let lookup = app.lookup("charges.create", "order-1").await;
        if lookup.status != 429 {
            lookup.assert(404, "not_found");
            break;
        }
        assert!(Instant::now() < deadline, "still limited after 5 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
