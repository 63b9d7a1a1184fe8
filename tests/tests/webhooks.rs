//! Lifecycle webhooks end to end: a real receiver on a local port, a server
//! whose webhook worker wakes every 100 ms, and each event kind caused the
//! way a client would cause it. Every delivery is checked against the
//! endpoint's secret as a receiver would check it; each event arrives once;
//! no endpoint hears of another tenant's keys.

use idemkey_api::auth::Role;
use idemkey_tests::db::Backend;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::webhooks::{quarantined, webhook_app, Received, Receiver};
use idemkey_tests::TestApp;
use reqwest::Method;
use serde_json::{json, Value};

/// The one delivery sent to `path`, checked against `secret`.
fn one_at<'a>(got: &'a [Received], path: &str, secret: &str) -> &'a Received {
    let at: Vec<_> = got.iter().filter(|r| r.path == path).collect();
    assert_eq!(at.len(), 1, "one delivery to {path}: {at:#?}");
    assert!(at[0].signed_by(secret), "{path} signed with its secret");
    at[0]
}

fn secret(endpoint: &Value) -> String {
    endpoint["secret"]
        .as_str()
        .expect("the secret, once")
        .to_owned()
}

async fn each_event_kind_is_delivered_once_and_signed(app: TestApp) {
    let hooks = Receiver::start();
    let url = |path: &str| format!("{}{path}", hooks.url);
    let q = app
        .create_webhook(
            "wh.quarantine",
            json!({"url": url("/q"), "events": ["quarantined"]}),
        )
        .await;
    let s = app
        .create_webhook(
            "wh.stuck",
            json!({"url": url("/s"), "events": ["stuck"], "stuck_after": "1s"}),
        )
        .await;
    let t = app
        .create_webhook(
            "wh.takeover",
            json!({"url": url("/t"), "events": ["taken_over"]}),
        )
        .await;
    let r = app
        .create_webhook(
            "wh.spike",
            json!({"url": url("/r"), "events": ["key_reused_spike"],
                   "spike_threshold": 2, "spike_window": "1d"}),
        )
        .await;

    quarantined(&app, "wh.quarantine", "q1", "the provider timed out").await;
    app.claim("wh.stuck", "s1", json!({"n": 1}))
        .await
        .assert(201, "claimed");
    app.claim("wh.takeover", "t1", json!({"n": 1}))
        .await
        .assert(201, "claimed");
    app.expire_lease("t1").await;
    app.claim("wh.takeover", "t1", json!({"n": 1}))
        .await
        .assert(200, "recovering");
    app.claim("wh.spike", "r1", json!({"n": 1}))
        .await
        .assert(201, "claimed");
    for n in [2, 3] {
        app.claim("wh.spike", "r1", json!({"n": n}))
            .await
            .assert(422, "key_reused");
    }
    app.flush_usage().await;

    let got = hooks
        .until("one delivery per endpoint", |got| {
            ["/q", "/s", "/t", "/r"]
                .iter()
                .all(|p| got.iter().any(|r| &r.path == p))
        })
        .await;
    // A few more passes find the same events again and queue nothing new.
    app.webhook_passes(3.0).await;
    let got_later = hooks.received();
    assert_eq!(
        got_later.len(),
        got.len(),
        "each event delivered once: {got_later:#?}"
    );
    assert_eq!(got.len(), 4, "{got:#?}");

    let q1 = one_at(&got, "/q", &secret(&q)).json();
    assert_eq!(q1["type"], "key.quarantined");
    assert_eq!(
        q1["data"],
        json!({"operation": "wh.quarantine", "key": "q1", "attempt": 1,
               "reason": "the provider timed out"})
    );
    let s1 = one_at(&got, "/s", &secret(&s)).json();
    assert_eq!(s1["type"], "key.stuck");
    assert_eq!(
        s1["data"],
        json!({"operation": "wh.stuck", "key": "s1", "attempt": 1, "stuck_after": "1s"})
    );
    let t1 = one_at(&got, "/t", &secret(&t)).json();
    assert_eq!(t1["type"], "key.taken_over");
    assert_eq!(
        t1["data"],
        json!({"operation": "wh.takeover", "key": "t1", "attempt": 2})
    );
    let r1 = one_at(&got, "/r", &secret(&r)).json();
    assert_eq!(r1["type"], "class.key_reused_spike");
    assert_eq!(r1["data"]["operation"], "wh.spike");
    assert_eq!(r1["data"]["threshold"], 2);
    assert!(r1["data"]["rejections"].as_i64() >= Some(2), "{r1}");
    // A secret signs its own endpoint's deliveries only.
    assert!(!one_at(&got, "/q", &secret(&q)).signed_by(&secret(&t)));

    for (class, endpoint) in [
        ("wh.quarantine", &q),
        ("wh.stuck", &s),
        ("wh.takeover", &t),
        ("wh.spike", &r),
    ] {
        let id = endpoint["id"].as_str().unwrap();
        let deliveries = app.webhook_deliveries(class, id).await;
        assert_eq!(deliveries.len(), 1, "{deliveries:#?}");
        let d = &deliveries[0];
        assert_eq!(
            (
                d["state"].as_str(),
                d["attempts"].as_i64(),
                d["last_status"].as_i64()
            ),
            (Some("delivered"), Some(1), Some(200)),
            "{d}"
        );
        let sent = got.iter().find(|r| r.id == d["event_id"].as_str().unwrap());
        assert!(
            sent.is_some(),
            "the delivery's event id is the webhook-id sent"
        );
    }
    let m = app.metrics().await;
    let delivered = m.get(r#"idemkey_webhook_deliveries_total{result="delivered"}"#);
    println!(
        "4 event kinds, {} requests received, {delivered} counted delivered",
        got.len()
    );
    assert_eq!(delivered, 4.0);
}

async fn no_delivery_crosses_tenants(app: TestApp) {
    let (mine, theirs) = (Receiver::start(), Receiver::start());
    let other = fresh_tenant();
    let other_admin = token(&other, &[Role::Admin]);
    let other_client = token(&other, &[Role::Client]);
    let body = |url: &str| json!({"url": url, "events": ["quarantined", "taken_over"]});
    let my_endpoint = app.create_webhook("payouts.send", body(&mine.url)).await;
    let answer = app
        .webhook_call(
            &other_admin,
            Method::POST,
            "payouts.send",
            "",
            Some(body(&theirs.url)),
        )
        .await;
    assert_eq!(answer.status, 201, "{}", answer.text);

    // The same class and the same key in both tenants; then one more key
    // each, so each tenant has an event the other has not.
    quarantined(&app, "payouts.send", "shared", "mine").await;
    quarantined(&app, "payouts.send", "only-mine", "mine").await;
    let mut other_app = app.clone();
    other_app.tenant = other.clone();
    other_app.token = other_client;
    quarantined(&other_app, "payouts.send", "shared", "theirs").await;
    quarantined(&other_app, "payouts.send", "only-theirs", "theirs").await;

    let enough = |got: &[Received]| got.len() >= 2;
    let (got_mine, got_theirs) = (
        mine.until("my two", enough).await,
        theirs.until("their two", enough).await,
    );
    app.webhook_passes(3.0).await;
    let keys = |got: &[Received]| {
        let mut keys: Vec<(String, String)> = got
            .iter()
            .map(|r| {
                let j = r.json();
                (
                    j["data"]["key"].as_str().unwrap().to_owned(),
                    j["data"]["reason"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(mine.received().len(), 2);
    assert_eq!(theirs.received().len(), 2);
    let pairs = |a: &str, b: &str, who: &str| {
        vec![
            (a.to_owned(), who.to_owned()),
            (b.to_owned(), who.to_owned()),
        ]
    };
    assert_eq!(keys(&got_mine), pairs("only-mine", "shared", "mine"));
    assert_eq!(keys(&got_theirs), pairs("only-theirs", "shared", "theirs"));
    assert!(got_mine.iter().all(|r| r.signed_by(&secret(&my_endpoint))));

    // The other tenant can neither read nor remove my endpoint.
    let id = my_endpoint["id"].as_str().unwrap();
    for (method, tail) in [
        (Method::GET, format!("/{id}/deliveries")),
        (Method::DELETE, format!("/{id}")),
    ] {
        let answer = app
            .webhook_call(&other_admin, method, "payouts.send", &tail, None)
            .await;
        assert_eq!(
            (answer.status, answer.word()),
            (404, "webhook_not_found".into()),
            "{}",
            answer.text
        );
    }
    let listed = app
        .webhook_call(&other_admin, Method::GET, "payouts.send", "", None)
        .await
        .json();
    assert!(!listed.to_string().contains(id), "{listed}");
    assert_eq!(app.webhook_deliveries("payouts.send", id).await.len(), 2);
    println!("2 tenants, one class and one key name: 2 deliveries each, none crossed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_event_kind_is_delivered_once_and_signed_on_postgres() {
    each_event_kind_is_delivered_once_and_signed(webhook_app(Backend::Postgres, 3).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_event_kind_is_delivered_once_and_signed_on_sqlite() {
    each_event_kind_is_delivered_once_and_signed(webhook_app(Backend::Sqlite, 3).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_delivery_crosses_tenants_on_postgres() {
    no_delivery_crosses_tenants(webhook_app(Backend::Postgres, 3).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_delivery_crosses_tenants_on_sqlite() {
    no_delivery_crosses_tenants(webhook_app(Backend::Sqlite, 3).await).await
}
