//! Real races: many tasks, many connections, several server processes, one
//! database. Exactly one owner per key, whatever the interleaving.

use std::collections::HashMap;
use std::sync::Arc;

use idemkey_api::auth::Role;
use idemkey_tests::app::{encode, test_vars, Answer};
use idemkey_tests::db::fresh_database;
use idemkey_tests::process::ServerProcess;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use serde_json::{json, Value};
use tokio::task::JoinSet;

const OP: &str = "orders.create";

/// A handful of clients so the requests travel over many connections.
fn clients(n: usize) -> Vec<reqwest::Client> {
    (0..n)
        .map(|_| {
            reqwest::Client::builder()
                .pool_max_idle_per_host(64)
                .build()
                .unwrap()
        })
        .collect()
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

async fn two_hundred_concurrent_claims_of_one_new_key_yield_exactly_one_owner(app: TestApp) {
    let app = Arc::new(app);
    let clients = Arc::new(clients(20));
    let request = json!({"cart": "c-1", "total": "10.00"});

    // Act: 200 claims at once; whoever wins completes immediately, so the
    // others see either the live lease or the outcome.
    let mut tasks = JoinSet::new();
    for i in 0..200 {
        let (app, clients, request) = (app.clone(), clients.clone(), request.clone());
        tasks.spawn(async move {
            let client = &clients[i % clients.len()];
            let url = format!("{}/claim", app.key_url(OP, "hot-1"));
            let answer = post(client, url, &app.token, json!({ "request": request })).await;
            if answer.status == 201 {
                let url = format!("{}/complete", app.key_url(OP, "hot-1"));
                let body = json!({"owner_token": answer.owner_token(), "outcome": {"status_code": 201, "body": {"order": i}}});
                post(client, url, &app.token, body).await.assert(200, "completed");
            }
            answer
        });
    }
    let answers: Vec<Answer> = tasks.join_all().await;

    // Assert
    let mut words: HashMap<String, usize> = HashMap::new();
    for a in &answers {
        *words
            .entry(format!("{} {}", a.status, a.word()))
            .or_default() += 1;
    }
    assert_eq!(words.get("201 claimed"), Some(&1), "{words:?}");
    let others: usize = words
        .iter()
        .filter(|(w, _)| *w == "409 in_progress" || *w == "200 completed")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(others, 199, "{words:?}");

    // After completion, every retry replays the very same bytes.
    let mut replays = JoinSet::new();
    for i in 0..200 {
        let (app, clients, request) = (app.clone(), clients.clone(), request.clone());
        replays.spawn(async move {
            let url = format!("{}/claim", app.key_url(OP, "hot-1"));
            post(
                &clients[i % clients.len()],
                url,
                &app.token,
                json!({ "request": request }),
            )
            .await
        });
    }
    let replays: Vec<Answer> = replays.join_all().await;
    let first = outcome_text(&replays[0]);
    for r in &replays {
        r.assert(200, "completed");
        assert_eq!(outcome_text(r), first);
    }
    let stored = outcome_text(&app.lookup(OP, "hot-1").await);
    assert_eq!(stored, first);
}

/// The exact text of the `outcome` member.
fn outcome_text(a: &Answer) -> String {
    let start = a.text.find("\"outcome\":").expect("an outcome") + "\"outcome\":".len();
    a.text[start..a.text.len() - 1].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_server_processes_on_one_database_still_grant_one_owner_per_key() {
    // Arrange: two real `idemkey` processes sharing one database and secrets.
    let database_url = fresh_database().await;
    let vars = test_vars(&database_url);
    let a = ServerProcess::start(&vars).await;
    let b = ServerProcess::start(&vars).await;
    let servers = Arc::new([a.address.clone(), b.address.clone()]);
    let tenant = fresh_tenant();
    let token = Arc::new(token(&tenant, &[Role::Client]));
    let clients = Arc::new(clients(16));
    const KEYS: usize = 40;
    const CONTENDERS: usize = 12; // per key, split across both servers

    // Act
    let mut tasks = JoinSet::new();
    for contender in 0..CONTENDERS {
        for k in 0..KEYS {
            let (servers, token, clients) = (servers.clone(), token.clone(), clients.clone());
            tasks.spawn(async move {
                let server = &servers[contender % 2];
                let client = &clients[(k + contender) % clients.len()];
                let base = format!("{server}/v1/keys/{OP}/{}", encode(&format!("key-{k}")));
                let claim = json!({"request": {"k": k}, "wait_ms": 2_000});
                let answer = post(client, format!("{base}/claim"), &token, claim).await;
                if answer.status == 201 {
                    let outcome = json!({"status_code": 201, "body": {"winner": contender, "server": contender % 2}});
                    let body = json!({"owner_token": answer.owner_token(), "outcome": outcome});
                    post(client, format!("{base}/complete"), &token, body).await.assert(200, "completed");
                }
                (k, contender, answer)
            });
        }
    }
    let results = tasks.join_all().await;

    // Assert: exactly one `claimed` per key; everybody else saw the live
    // lease or the winner's outcome.
    let mut winners: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, contender, answer) in &results {
        match (answer.status, answer.word().as_str()) {
            (201, "claimed") => winners.entry(*k).or_default().push(*contender),
            (409, "in_progress") | (200, "completed") => {}
            other => panic!("unexpected answer {other:?}: {}", answer.text),
        }
    }
    assert_eq!(winners.len(), KEYS);
    for (k, w) in &winners {
        assert_eq!(w.len(), 1, "key-{k} had owners {w:?}");
    }
    // Every replay, from either process, returns the winner's outcome.
    for (k, w) in &winners {
        for server in servers.iter() {
            let url = format!("{server}/v1/keys/{OP}/key-{k}/claim");
            let replay = post(&clients[0], url, &token, json!({"request": {"k": k}})).await;
            replay.assert(200, "completed");
            assert_eq!(replay.json()["outcome"]["body"]["winner"], w[0] as u64);
        }
    }
    a.stop().await;
    b.stop().await;
}

idemkey_tests::on_every_backend!(
    two_hundred_concurrent_claims_of_one_new_key_yield_exactly_one_owner
);
