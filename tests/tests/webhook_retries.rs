//! Webhook deliveries that fail: retried with a growing, jittered backoff
//! until the receiver answers 2xx, given up after the configured number of
//! attempts, never sent twice at once by two nodes sharing a database, and
//! never in a claim's way.

use std::time::Duration;

use idemkey_tests::db::Backend;
use idemkey_tests::webhooks::{quarantined, webhook_app, Receiver};
use idemkey_tests::TestApp;
use serde_json::json;

async fn a_failing_receiver_is_retried_until_it_answers(app: TestApp) {
    let hooks = Receiver::scripted(&[500, 503, 500], 200);
    let endpoint = app
        .create_webhook(
            "payouts.send",
            json!({"url": hooks.url, "events": ["quarantined"]}),
        )
        .await;
    let id = endpoint["id"].as_str().unwrap();

    quarantined(&app, "payouts.send", "p1", "ambiguous").await;
    let got = hooks.until("four attempts", |got| got.len() >= 4).await;

    let statuses: Vec<u16> = got.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [500, 503, 500, 200]);
    assert!(
        got.iter().all(|r| r.id == got[0].id),
        "one webhook-id for every attempt"
    );
    assert!(got
        .iter()
        .all(|r| r.signed_by(endpoint["secret"].as_str().unwrap())));
    assert!(
        got.iter().all(|r| r.body == got[0].body),
        "the same body every attempt"
    );
    let gaps: Vec<u128> = got
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_millis())
        .collect();
    println!(
        "attempts answered {statuses:?}; ms between attempts {gaps:?} \
         (backoff 100 ms doubling, ±25 %; passes every 100 ms)"
    );
    assert!(
        got.windows(2).all(|w| w[1].timestamp >= w[0].timestamp),
        "each attempt carries its own timestamp"
    );
    let d = app.webhook_deliveries("payouts.send", id).await;
    assert_eq!(
        (
            d[0]["state"].as_str(),
            d[0]["attempts"].as_i64(),
            d[0]["last_status"].as_i64()
        ),
        (Some("delivered"), Some(4), Some(200)),
        "{d:#?}"
    );
    app.webhook_passes(3.0).await;
    assert_eq!(hooks.received().len(), 4, "nothing sent after the delivery");
    let m = app.metrics().await;
    assert_eq!(
        m.get(r#"idemkey_webhook_deliveries_total{result="retried"}"#),
        3.0
    );
    assert_eq!(
        m.get(r#"idemkey_webhook_deliveries_total{result="delivered"}"#),
        1.0
    );
}

async fn a_delivery_is_given_up_after_its_attempts(app: TestApp) {
    let hooks = Receiver::scripted(&[], 500);
    // Nobody listens here: the connection is refused.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/gone", listener.local_addr().unwrap())
    };
    let failing = app
        .create_webhook(
            "payouts.send",
            json!({"url": hooks.url, "events": ["quarantined"]}),
        )
        .await;
    let unreachable = app
        .create_webhook(
            "payouts.send",
            json!({"url": dead, "events": ["quarantined"]}),
        )
        .await;

    quarantined(&app, "payouts.send", "p1", "ambiguous").await;
    for (endpoint, last_status, last_error) in [
        (&failing, Some(500), None),
        (&unreachable, None, Some("could not connect")),
    ] {
        let id = endpoint["id"].as_str().unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let d = loop {
            let d = app.webhook_deliveries("payouts.send", id).await;
            if d.first().is_some_and(|d| d["state"] == "failed") {
                break d[0].clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never failed: {d:#?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(d["attempts"], 3, "{d}");
        assert_eq!(d["last_status"].as_i64(), last_status, "{d}");
        assert_eq!(d["last_error"].as_str(), last_error, "{d}");
        assert!(d["next_attempt_at"].is_null(), "{d}");
    }
    app.webhook_passes(3.0).await;
    assert_eq!(hooks.received().len(), 3, "no attempt past the bound");
    let m = app.metrics().await;
    println!(
        "given up after 3 attempts: {} retried, {} failed",
        m.get(r#"idemkey_webhook_deliveries_total{result="retried"}"#),
        m.get(r#"idemkey_webhook_deliveries_total{result="failed"}"#)
    );
    assert_eq!(
        m.get(r#"idemkey_webhook_deliveries_total{result="failed"}"#),
        2.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_receiver_is_retried_until_it_answers_on_postgres() {
    a_failing_receiver_is_retried_until_it_answers(webhook_app(Backend::Postgres, 5).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_receiver_is_retried_until_it_answers_on_sqlite() {
    a_failing_receiver_is_retried_until_it_answers(webhook_app(Backend::Sqlite, 5).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_is_given_up_after_its_attempts_on_postgres() {
    a_delivery_is_given_up_after_its_attempts(webhook_app(Backend::Postgres, 3).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_is_given_up_after_its_attempts_on_sqlite() {
    a_delivery_is_given_up_after_its_attempts(webhook_app(Backend::Sqlite, 3).await).await
}

/// A slow endpoint holds the webhook worker's request open (until the
/// worker's 10 s timeout); claims and completions go on meanwhile, none of
/// them waiting for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_slow_endpoint_does_not_hold_up_claims() {
    let app = webhook_app(Backend::Postgres, 3).await;
    let hooks = Receiver::slow(Duration::from_secs(30));
    app.create_webhook(
        "payouts.send",
        json!({"url": hooks.url, "events": ["quarantined"]}),
    )
    .await;
    quarantined(&app, "payouts.send", "p1", "ambiguous").await;
    hooks
        .until("the delivery in flight", |got| got.len() == 1)
        .await;

    let started = std::time::Instant::now();
    let mut slowest = Duration::ZERO;
    for n in 0..20 {
        let key = format!("c{n}");
        let at = std::time::Instant::now();
        let owner = app
            .claim("payouts.send", &key, json!({"n": n}))
            .await
            .assert(201, "claimed")
            .owner_token();
        app.complete("payouts.send", &key, &owner, json!({"status_code": 201}))
            .await
            .assert(200, "completed");
        slowest = slowest.max(at.elapsed());
    }
    let took = started.elapsed();
    assert_eq!(
        hooks.answered(),
        0,
        "all 20 claims and completions were answered while the delivery was held"
    );
    println!(
        "20 claims and completions in {} ms (slowest pair {} ms) while the endpoint held its request",
        took.as_millis(),
        slowest.as_millis()
    );
}

/// Three nodes on one Postgres database, each running the webhook worker
/// every 100 ms: forty events, each delivered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_sharing_a_database_deliver_each_event_once() {
    let app = webhook_app(Backend::Postgres, 3).await;
    let (b, c) = (app.spawn_twin().await, app.spawn_twin().await);
    let hooks = Receiver::start();
    app.create_webhook(
        "payouts.send",
        json!({"url": hooks.url, "events": ["quarantined"]}),
    )
    .await;

    for n in 0..40 {
        let node = [&app, &b, &c][n % 3];
        quarantined(node, "payouts.send", &format!("k{n}"), "ambiguous").await;
    }
    hooks.until("forty deliveries", |got| got.len() >= 40).await;
    for node in [&app, &b, &c] {
        node.webhook_passes(3.0).await;
    }

    let got = hooks.received();
    let mut ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    ids.sort();
    ids.dedup();
    let mut per_node = Vec::new();
    for node in [&app, &b, &c] {
        per_node.push(
            node.metrics()
                .await
                .get(r#"idemkey_webhook_deliveries_total{result="delivered"}"#),
        );
    }
    println!(
        "40 events over 3 nodes: {} requests, {} distinct ids; delivered per node {per_node:?}",
        got.len(),
        ids.len()
    );
    assert_eq!((got.len(), ids.len()), (40, 40));
    assert_eq!(per_node.iter().sum::<f64>(), 40.0);
}
