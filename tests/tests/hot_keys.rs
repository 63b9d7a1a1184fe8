//! Hot keys: a storm of concurrent claims of one key on one node shares its
//! reads, so the database sees a bounded number of statements — measured
//! through `/metrics` — and every answer is still right.

use std::collections::HashMap;
use std::sync::Arc;

use idemkey_tests::app::Answer;
use idemkey_tests::TestApp;
use serde_json::{json, Value};
use tokio::task::JoinSet;

const OP: &str = "orders.create";
const STORM: usize = 500;

fn clients(n: usize) -> Arc<Vec<reqwest::Client>> {
    Arc::new(
        (0..n)
            .map(|_| {
                reqwest::Client::builder()
                    .pool_max_idle_per_host(STORM)
                    .build()
                    .unwrap()
            })
            .collect(),
    )
}

async fn post(client: &reqwest::Client, url: String, token: &str, body: Value) -> Answer {
    let response = client
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    Answer::from(response).await
}

/// The exact text of the `outcome` member.
fn outcome_text(a: &Answer) -> String {
    let start = a.text.find("\"outcome\":").expect("an outcome") + "\"outcome\":".len();
    a.text[start..a.text.len() - 1].to_owned()
}

async fn five_hundred_concurrent_claims_of_one_new_key_cost_a_bounded_number_of_statements(
    app: TestApp,
) {
    // Arrange
    let app = Arc::new(app);
    let clients = clients(25);
    let request = json!({"cart": "c-1", "total": "10.00"});
    let before = app.metrics().await;

    // Act: 500 claims at once; the winner completes at once.
    let mut tasks = JoinSet::new();
    for i in 0..STORM {
        let (app, clients, request) = (app.clone(), clients.clone(), request.clone());
        tasks.spawn(async move {
            let client = &clients[i % clients.len()];
            let url = format!("{}/claim", app.key_url(OP, "hot"));
            let answer = post(client, url, &app.token, json!({ "request": request })).await;
            if answer.status == 201 {
                let url = format!("{}/complete", app.key_url(OP, "hot"));
                let outcome = json!({"status_code": 201, "body": {"order": i}});
                let body = json!({"owner_token": answer.owner_token(), "outcome": outcome});
                post(client, url, &app.token, body)
                    .await
                    .assert(200, "completed");
            }
            answer
        });
    }
    let answers: Vec<Answer> = tasks.join_all().await;
    let after = app.metrics().await;

    // Assert: one owner; everybody else saw the live lease or its outcome.
    let stored = outcome_text(&app.lookup(OP, "hot").await);
    let mut words: HashMap<String, usize> = HashMap::new();
    for a in &answers {
        let word = format!("{} {}", a.status, a.word());
        if a.status == 200 {
            assert_eq!(outcome_text(a), stored, "a replay of the winner's outcome");
        }
        *words.entry(word).or_default() += 1;
    }
    assert_eq!(words.get("201 claimed"), Some(&1), "{words:?}");
    let others =
        words.get("409 in_progress").unwrap_or(&0) + words.get("200 completed").unwrap_or(&0);
    assert_eq!(others, STORM - 1, "{words:?}");

    // Far fewer statements than claims: the storm shared its looks.
    let statements = after.statements() - before.statements();
    let coalesced = after.get("idemkey_coalesced_reads_total");
    println!(
        "{STORM} claims of one new key: {statements} statements, {coalesced} coalesced; {words:?}"
    );
    assert!(
        statements <= 40.0,
        "{statements} statements for {STORM} claims"
    );
}

async fn a_retry_storm_on_a_completed_key_costs_one_look(app: TestApp) {
    // Arrange: a completed key, and a second node whose caches are cold.
    let token = app.claim(OP, "done", json!({"a": 1})).await.owner_token();
    let outcome = json!({"status_code": 200, "body": {"amount": 1.50}});
    app.complete(OP, "done", &token, outcome)
        .await
        .assert(200, "completed");
    let cold = Arc::new(
        TestApp::spawn_node(&app.database_url, |_| {})
            .await
            .as_tenant_of(&app),
    );
    let clients = clients(25);
    let before = cold.metrics().await;

    // Act
    let mut tasks = JoinSet::new();
    for i in 0..STORM {
        let (cold, clients) = (cold.clone(), clients.clone());
        tasks.spawn(async move {
            let url = format!("{}/claim", cold.key_url(OP, "done"));
            post(
                &clients[i % clients.len()],
                url,
                &cold.token,
                json!({"request": {"a": 1}}),
            )
            .await
        });
    }
    let answers: Vec<Answer> = tasks.join_all().await;
    let after = cold.metrics().await;

    // Assert: every answer is the stored outcome, byte for byte…
    let stored = outcome_text(&app.lookup(OP, "done").await);
    for a in &answers {
        a.assert(200, "completed");
        assert_eq!(outcome_text(a), stored);
    }
    // …and the database saw one look (an insert and a read), give or take
    // the claims that started before the first look filled the cache.
    let statements = after.statements() - before.statements();
    let local_hits = after.hits("local") - before.hits("local");
    println!("{STORM} replays on a cold node: {statements} statements, {local_hits} local hits");
    assert!(
        statements <= 6.0,
        "{statements} statements for {STORM} replays"
    );
}

/// Waiting claims that arrive one after another (not at once, so single
/// flight alone would not join them) while the key is in progress read it
/// once per coalescing window, not once each.
async fn waiting_claims_arriving_one_by_one_share_a_recent_look(app: TestApp) {
    // Arrange: an owner holds the key.
    const WAITERS: usize = 40;
    let app = Arc::new(app);
    let owner = app.claim(OP, "hot", json!({"n": 1})).await.owner_token();
    let finds = |m: &idemkey_tests::app::Metrics| {
        m.get("idemkey_store_statements_total{statement=\"find\"}")
    };
    let before = app.metrics().await;

    // Act: forty waiting claims, each sent once the previous one waits.
    let mut tasks = JoinSet::new();
    for n in 0..WAITERS {
        let app2 = app.clone();
        tasks.spawn(async move {
            let body = json!({"request": {"n": 1}, "wait_ms": 10_000});
            app2.call(OP, "hot", "claim", body).await
        });
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while app.metrics().await.get("idemkey_claim_waiters") < (n + 1) as f64 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "waiter {n} never waited"
            );
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }
    let arrived = app.metrics().await;
    app.complete(OP, "hot", &owner, json!({"status_code": 201}))
        .await
        .assert(200, "completed");
    let answers: Vec<Answer> = tasks.join_all().await;

    // Assert: all replayed; arrivals cost a read per window, not per claim.
    assert!(answers
        .iter()
        .all(|a| a.status == 200 && a.word() == "completed"));
    let arrival_reads = finds(&arrived) - finds(&before);
    println!("{WAITERS} waiting claims arriving one by one: {arrival_reads} reads");
    assert!(
        arrival_reads <= 8.0,
        "{arrival_reads} reads for {WAITERS} arrivals"
    );
}

idemkey_tests::on_every_backend!(
    waiting_claims_arriving_one_by_one_share_a_recent_look,
    five_hundred_concurrent_claims_of_one_new_key_cost_a_bounded_number_of_statements,
    a_retry_storm_on_a_completed_key_costs_one_look,
);
