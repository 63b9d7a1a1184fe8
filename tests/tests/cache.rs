//! The Redis read cache end to end: replays served from each layer agree byte
//! for byte with the database, a cached replay still checks the fingerprint,
//! and Redis being flushed, killed or restarted in the middle of concurrent
//! claims changes nothing but the speed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idemkey_tests::app::Answer;
use idemkey_tests::db::fresh_database;
use idemkey_tests::redis::{shared_redis_url, RedisServer};
use idemkey_tests::TestApp;
use serde_json::{json, Value};
use tokio::task::JoinSet;

const OP: &str = "charges.create";

/// Two nodes on one fresh Postgres database, both caching in `redis_url`,
/// acting for one tenant.
async fn two_nodes(redis_url: &str) -> (TestApp, TestApp) {
    let database_url = fresh_database().await;
    let with_redis = |vars: &mut HashMap<String, String>| {
        vars.insert("IDEMKEY_REDIS_URL".into(), redis_url.to_owned());
    };
    let a = TestApp::spawn_node(&database_url, with_redis).await;
    let b = TestApp::spawn_node(&database_url, with_redis)
        .await
        .as_tenant_of(&a);
    (a, b)
}

/// The exact text of the `outcome` member.
fn outcome_text(a: &Answer) -> String {
    let start = a.text.find("\"outcome\":").expect("an outcome") + "\"outcome\":".len();
    a.text[start..a.text.len() - 1].to_owned()
}

/// Waits until Redis holds an entry for `tenant` (the fill is in the
/// background).
async fn until_in_redis(redis_url: &str, tenant: &str) {
    for _ in 0..500 {
        let out = tokio::process::Command::new("redis-cli")
            .args(["-u", redis_url, "--scan", "--pattern"])
            .arg(format!("idemkey:*:outcome:{tenant}/*"))
            .output()
            .await
            .expect("redis-cli");
        if !out.stdout.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the outcome never reached Redis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replays_from_the_database_the_local_cache_and_redis_are_identical() {
    // Arrange: an outcome whose exact spelling a re-serialisation would lose.
    let (a, b) = two_nodes(&shared_redis_url()).await;
    let token = a.claim(OP, "k1", json!({"amount": 25})).await.owner_token();
    let raw = r#"{"status_code":201,"body":{"amount":1.50,"n":1e2, "note":"caf\u00e9"},"headers":{"x-a":"b"}}"#;
    let body = format!(r#"{{"owner_token":"{token}","outcome":{raw}}}"#);
    a.post_raw(&format!("{}/complete", a.key_url(OP, "k1")), body)
        .await
        .assert(200, "completed");

    // Act: the first replay reads the database (and fills both layers), the
    // second comes from A's in-process layer, B's from Redis.
    let m0 = a.metrics().await;
    let from_db = a.claim(OP, "k1", json!({"amount": 25})).await;
    let m1 = a.metrics().await;
    let from_local = a.claim(OP, "k1", json!({"amount": 25})).await;
    let m2 = a.metrics().await;
    until_in_redis(&shared_redis_url(), &a.tenant).await;
    let b0 = b.metrics().await;
    let from_redis = b.claim(OP, "k1", json!({"amount": 25})).await;
    let b1 = b.metrics().await;
    let lookup = a.lookup(OP, "k1").await;

    // Assert: where each answer came from…
    assert!(
        m1.statements() > m0.statements(),
        "the first replay read the database"
    );
    assert_eq!(m2.statements(), m1.statements(), "the second did not");
    assert_eq!(m2.hits("local") - m1.hits("local"), 1.0);
    assert_eq!(
        b1.statements(),
        b0.statements(),
        "B's replay did not touch the database"
    );
    assert_eq!(b1.hits("redis") - b0.hits("redis"), 1.0);
    // …and that all three are the same bytes, and what lookup stores.
    from_db.assert(200, "completed");
    assert_eq!(from_local.text, from_db.text);
    assert_eq!(from_redis.text, from_db.text);
    assert_eq!(outcome_text(&from_db), raw);
    assert_eq!(outcome_text(&lookup), raw);
    let (replay, record) = (from_redis.json(), lookup.json());
    for field in ["attempt", "effect_id", "completed_at", "expires_at"] {
        assert_eq!(replay[field], record[field], "{field}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_from_either_cache_layer_still_checks_the_fingerprint() {
    let (a, b) = two_nodes(&shared_redis_url()).await;
    let token = a.claim(OP, "k1", json!({"amount": 25})).await.owner_token();
    a.complete(OP, "k1", &token, json!({"status_code": 201}))
        .await
        .assert(200, "completed");
    a.claim(OP, "k1", json!({"amount": 25}))
        .await
        .assert(200, "completed"); // fills A's layer and Redis
    until_in_redis(&shared_redis_url(), &a.tenant).await;
    let (a0, b0) = (a.metrics().await, b.metrics().await);

    let on_a = a.claim(OP, "k1", json!({"amount": 26})).await;
    let on_b = b.claim(OP, "k1", json!({"amount": 26})).await;

    on_a.assert(422, "key_reused");
    on_b.assert(422, "key_reused");
    let (a1, b1) = (a.metrics().await, b.metrics().await);
    assert_eq!(
        a1.statements(),
        a0.statements(),
        "answered from A's in-process layer"
    );
    assert_eq!(b1.statements(), b0.statements(), "answered from Redis");
    assert_eq!(b1.hits("redis") - b0.hits("redis"), 1.0);
}

/// One contender: claim `key` on `node`; complete it if we won.
async fn contend(node: &TestApp, key: &str, who: usize) -> Answer {
    let body = json!({"request": {"key": key}, "wait_ms": 1_000});
    let answer = node.call(OP, key, "claim", body).await;
    if answer.status == 201 {
        let outcome = json!({"status_code": 201, "body": {"winner": who}});
        node.complete(OP, key, &answer.owner_token(), outcome)
            .await
            .assert(200, "completed");
    }
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flushing_killing_and_restarting_redis_during_claims_changes_no_answer() {
    // Arrange: a private Redis (we are going to break it) and two nodes.
    let mut redis = RedisServer::start().await;
    let (a, b) = two_nodes(&redis.url()).await;
    let nodes = Arc::new([a, b]);
    let done = Arc::new(AtomicBool::new(false));
    const KEYS: usize = 24;

    // Act: eight workers claim and replay a rotating set of keys on both
    // nodes, while Redis is flushed, killed and restarted under them.
    let mut workers = JoinSet::new();
    for w in 0..8 {
        let (nodes, done) = (nodes.clone(), done.clone());
        workers.spawn(async move {
            let mut answers = Vec::new();
            let mut round = 0;
            while !done.load(Ordering::SeqCst) && round < 2_000 {
                let key = format!("k{}", (round + w) % KEYS);
                let answer = contend(&nodes[(round + w) % 2], &key, w * 10_000 + round).await;
                answers.push((key, answer));
                round += 1;
            }
            answers
        });
    }
    let pause = |ms| tokio::time::sleep(Duration::from_millis(ms));
    pause(300).await;
    redis.flushall().await;
    pause(300).await;
    redis.stop().await;
    pause(600).await;
    redis.restart().await;
    pause(2_000).await; // long enough for both nodes to reconnect (backoff)
    redis.flushall().await;
    pause(300).await;
    done.store(true, Ordering::SeqCst);
    let answers: Vec<(String, Answer)> = workers.join_all().await.into_iter().flatten().collect();

    // Assert: one owner per key, and every replay is that owner's outcome.
    let [a, b] = &*nodes;
    let mut owners: HashMap<&str, usize> = HashMap::new();
    let mut words: HashMap<String, usize> = HashMap::new();
    for (key, answer) in &answers {
        *words
            .entry(format!("{} {}", answer.status, answer.word()))
            .or_default() += 1;
        match (answer.status, answer.word().as_str()) {
            (201, "claimed") => *owners.entry(key).or_default() += 1,
            (200, "completed") | (409, "in_progress") => {}
            other => panic!("unexpected answer {other:?} for {key}: {}", answer.text),
        }
    }
    assert_eq!(owners.len(), KEYS, "{words:?}");
    assert!(
        owners.values().all(|n| *n == 1),
        "duplicate owners: {owners:?}"
    );
    for k in 0..KEYS {
        let key = format!("k{k}");
        let stored = outcome_text(&a.lookup(OP, &key).await);
        for (_, answer) in answers.iter().filter(|(k, a)| *k == key && a.status == 200) {
            assert_eq!(outcome_text(answer), stored, "{key}");
        }
        for node in [a, b] {
            let replay = node.claim(OP, &key, json!({"key": key})).await;
            replay.assert(200, "completed");
            assert_eq!(outcome_text(&replay), stored);
        }
    }
    // Redis really failed during the run…
    let (ma, mb) = (a.metrics().await, b.metrics().await);
    let fallbacks: f64 = [&ma, &mb]
        .iter()
        .flat_map(|m| m.0.iter())
        .filter(|(series, _)| series.starts_with("idemkey_redis_fallbacks_total"))
        .map(|(_, v)| v)
        .sum();
    println!("{} answers {words:?}; fallbacks {fallbacks}", answers.len());
    assert!(fallbacks > 0.0, "Redis never failed");
    for node in [a, b] {
        let mut open = 1.0;
        for _ in 0..100 {
            open = node.metrics().await.get("idemkey_redis_circuit_open");
            if open == 0.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(open, 0.0, "both nodes reconnect to the restarted Redis");
    }
    // …and serves again after its restart: A fills it, B replays from it.
    let token = a
        .claim(OP, "after", json!({"key": "after"}))
        .await
        .owner_token();
    let outcome = json!({"status_code": 201, "body": "after the restart"});
    a.complete(OP, "after", &token, outcome.clone())
        .await
        .assert(200, "completed");
    a.claim(OP, "after", json!({"key": "after"}))
        .await
        .assert(200, "completed");
    until_in_redis(&redis.url(), &a.tenant).await;
    let before = b.metrics().await.hits("redis");
    let replay = b.claim(OP, "after", json!({"key": "after"})).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], outcome);
    assert_eq!(b.metrics().await.hits("redis") - before, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_whose_redis_is_down_from_the_start_answers_from_the_database() {
    let mut redis = RedisServer::start().await;
    redis.stop().await;
    let (a, _b) = two_nodes(&redis.url()).await;

    let token = a.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    let outcome: Value = json!({"status_code": 201, "body": "ok"});
    a.complete(OP, "k1", &token, outcome.clone())
        .await
        .assert(200, "completed");
    let replay = a.claim(OP, "k1", json!({"a": 1})).await;
    let reused = a.claim(OP, "k1", json!({"a": 2})).await;
    let fresh = a.claim(OP, "k2", json!({"a": 1})).await;

    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], outcome);
    reused.assert(422, "key_reused");
    fresh.assert(201, "claimed");
    assert_eq!(a.metrics().await.get("idemkey_redis_circuit_open"), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_window_ended_in_the_database_evicts_the_cached_replay_on_every_node() {
    // Arrange: two nodes without Redis, each holding the replay in its
    // in-process layer.
    let a = TestApp::spawn().await;
    let b = TestApp::spawn_node(&a.database_url, |_| {})
        .await
        .as_tenant_of(&a);
    let token = a.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    a.complete(OP, "k1", &token, json!({"status_code": 201}))
        .await
        .assert(200, "completed");
    for node in [&a, &b] {
        node.claim(OP, "k1", json!({"a": 1}))
            .await
            .assert(200, "completed");
        node.claim(OP, "k1", json!({"a": 1})).await;
        assert!(node.metrics().await.hits("local") >= 1.0);
    }
    let heard =
        |m: idemkey_tests::app::Metrics| m.get("idemkey_key_events_total{source=\"postgres\"}");
    let before = heard(b.metrics().await);

    // Act: the window is ended in the database, not through the engine.
    a.expire_window("k1").await;
    for _ in 0..500 {
        if heard(b.metrics().await) > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Assert: B dropped its copy when the database told it, so the key is
    // new again there (a different request is not key reuse any more).
    b.claim(OP, "k1", json!({"a": 2}))
        .await
        .assert(201, "claimed");
}
