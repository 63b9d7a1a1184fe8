//! Hot keys on the overview: every node counts each claimed key in a
//! bounded per-minute summary and its usage flush writes the most claimed
//! to the database; the dashboard sums the nodes and the flushes count
//! nothing twice. A storm of one key among many
//! one-off keys shows that key first with its claims; a key claimed once is
//! not hot; another tenant sees none of it.

use idemkey_api::auth::Role;
use idemkey_api::domain::TenantId;
use idemkey_api::store::Store;
use idemkey_tests::dashboard::fixtures::viewer;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::json;
use tokio::task::JoinSet;

const OP: &str = "charges.create";

/// Waits, when the current minute has less than 15 s left, for the next one
/// to begin, so that a test's claims (a few seconds) fall in one minute:
/// hot keys are counted per minute. A wait on the clock, not on the server.
async fn well_inside_a_minute() {
    let second = chrono::Utc::now().timestamp() % 60;
    if second >= 45 {
        tokio::time::sleep(std::time::Duration::from_secs((60 - second) as u64)).await;
    }
}

/// `n` claims of `key` at once, from as many tasks: one owns it, the
/// others collide or replay.
async fn storm(app: &TestApp, key: &str, n: usize) {
    let mut tasks = JoinSet::new();
    for _ in 0..n {
        let (client, url, token) = (
            app.client.clone(),
            format!("{}/v1/keys/{OP}/{key}/claim", app.address),
            app.token.clone(),
        );
        tasks.spawn(async move {
            let answer = client
                .post(url)
                .bearer_auth(token)
                .json(&json!({"request": {"amount": 1}}))
                .send()
                .await
                .expect("claim");
            answer.status().as_u16()
        });
    }
    while let Some(status) = tasks.join_next().await {
        let status = status.expect("task");
        assert!([201, 409].contains(&status), "{status}");
    }
}

async fn a_storm_of_one_key_shows_first_with_its_claims(app: TestApp) {
    well_inside_a_minute().await;
    for i in 0..60 {
        app.claim(OP, &format!("once-{i}"), json!({"amount": 1}))
            .await
            .assert(201, "claimed");
    }
    storm(&app, "the-storm", 40).await;
    for _ in 0..3 {
        app.claim(OP, "warm", json!({"amount": 1})).await;
    }

    app.flush_usage().await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    let page = visitor.get("/dashboard").await;
    let tenant = TenantId::parse(&app.tenant).unwrap();
    let store = Store::connect(&app.database_url).await.unwrap();
    let since = chrono::Utc::now() - chrono::TimeDelta::hours(1);
    let hot = store.hot_keys(&tenant, since, 5).await.unwrap();

    println!("hot keys after 60 one-off claims, a storm of 40 and 3 of one key: {hot:?}");
    assert_eq!(page.status, 200);
    let keys: Vec<(&str, i64)> = hot.iter().map(|h| (h.key.as_str(), h.claims)).collect();
    assert_eq!(
        keys,
        [("the-storm", 40), ("warm", 3)],
        "one-off keys are not hot"
    );
    let storm_at = page
        .text
        .find(">the-storm</a>")
        .expect("the storm is shown");
    let warm_at = page.text.find(">warm</a>").expect("warm is shown");
    assert!(storm_at < warm_at, "most claimed first");
    page.assert_contains("/dashboard/keys/charges.create/the-storm");
    assert!(!page.text.contains("once-1<"));
}

async fn claims_from_two_nodes_add_up_and_flushes_count_nothing_twice(app: TestApp) {
    let twin = app.spawn_twin().await;
    well_inside_a_minute().await;
    for node in [&app, &twin] {
        for _ in 0..3 {
            node.claim(OP, "shared", json!({"amount": 1})).await;
        }
    }

    app.flush_usage().await;
    twin.flush_usage().await;
    app.flush_usage().await;

    let tenant = TenantId::parse(&app.tenant).unwrap();
    let store = Store::connect(&app.database_url).await.unwrap();
    let since = chrono::Utc::now() - chrono::TimeDelta::hours(1);
    let hot = store.hot_keys(&tenant, since, 5).await.unwrap();
    assert_eq!(hot.len(), 1);
    assert_eq!((hot[0].key.as_str(), hot[0].claims), ("shared", 6));
}

async fn another_tenant_sees_none_of_them(app: TestApp) {
    for _ in 0..5 {
        app.claim(OP, "secret-hot", json!({"amount": 1})).await;
    }
    app.flush_usage().await;
    let stranger = token(&fresh_tenant(), &[Role::Viewer]);
    let visitor = Visitor::signed_in(&app, &stranger).await;

    let page = visitor.get("/dashboard").await;

    assert_eq!(page.status, 200);
    assert!(!page.text.contains("secret-hot"));
}

on_every_backend!(
    a_storm_of_one_key_shows_first_with_its_claims,
    claims_from_two_nodes_add_up_and_flushes_count_nothing_twice,
    another_tenant_sees_none_of_them,
);
