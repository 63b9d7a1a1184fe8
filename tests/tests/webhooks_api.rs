//! `/v1/operation-classes/{operation}/webhooks`: settings are checked before
//! anything is stored, the secret is answered once, a class holds at most
//! ten endpoints, and removing an endpoint removes it.

use idemkey_api::auth::Role;
use idemkey_tests::{on_every_backend, TestApp};
use reqwest::Method;
use serde_json::{json, Value};

async fn list(app: &TestApp, operation: &str) -> Vec<Value> {
    let answer = app
        .webhook_call(&app.admin_token(), Method::GET, operation, "", None)
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()["webhooks"].as_array().unwrap().clone()
}

async fn bad_settings_are_refused_and_nothing_is_stored(app: TestApp) {
    let ok = json!({"url": "https://hooks.example.com/x", "events": ["quarantined"]});
    let with = |member: &str, value: Value| {
        let mut body = ok.clone();
        body[member] = value;
        body
    };
    let cases = [
        (with("url", json!("ftp://hooks.example.com/")), "url"),
        (
            with("url", json!("https://user:pw@hooks.example.com/")),
            "url",
        ),
        (
            with("url", json!(format!("https://h/{}", "x".repeat(2048)))),
            "url",
        ),
        (with("events", json!([])), "events"),
        (with("events", json!(["exploded"])), "events"),
        (with("events", json!(["stuck"])), "stuck_after"),
        (with("stuck_after", json!("5m")), "stuck_after"),
        (
            with("events", json!(["key_reused_spike"])),
            "spike_threshold",
        ),
        (
            json!({"url": "https://h/", "events": ["key_reused_spike"],
                   "spike_threshold": 500, "spike_window": "1m"}),
            "spike_threshold",
        ),
        (
            json!({"url": "https://h/", "events": ["stuck"], "stuck_after": "0s"}),
            "stuck_after",
        ),
    ];
    for (body, field) in &cases {
        let answer = app
            .webhook_call(
                &app.admin_token(),
                Method::POST,
                "payouts.send",
                "",
                Some(body.clone()),
            )
            .await;
        assert_eq!(
            (answer.status, answer.word()),
            (400, "invalid_webhook".into()),
            "{body}"
        );
        let detail = answer.json()["detail"].as_str().unwrap().to_owned();
        assert!(detail.starts_with(field), "{body}: {detail}");
    }
    let unknown = with("colour", json!("red"));
    let answer = app
        .webhook_call(
            &app.admin_token(),
            Method::POST,
            "payouts.send",
            "",
            Some(unknown),
        )
        .await;
    assert_eq!((answer.status, answer.word()), (400, "invalid_body".into()));
    assert!(
        list(&app, "payouts.send").await.is_empty(),
        "nothing stored"
    );
    println!("{} bad settings refused", cases.len() + 1);
}

async fn the_secret_is_shown_once_and_endpoints_can_be_removed(app: TestApp) {
    let created = app
        .create_webhook(
            "payouts.send",
            json!({"url": "https://hooks.example.com/x", "events": ["stuck", "quarantined"],
                   "stuck_after": "300s"}),
        )
        .await;
    let secret = created["secret"].as_str().unwrap();
    assert!(
        secret.starts_with("whsec_") && secret.len() > 30,
        "{secret}"
    );
    assert_eq!(created["events"], json!(["quarantined", "stuck"]));
    assert_eq!(created["stuck_after"], "5m");

    let listed = list(&app, "payouts.send").await;
    assert_eq!(listed.len(), 1);
    assert!(listed[0].get("secret").is_none(), "{}", listed[0]);
    assert!(!listed[0].to_string().contains(secret));
    assert!(list(&app, "charges.create").await.is_empty(), "per class");
    // Only admins.
    let viewer = app.token_with(&[Role::Viewer, Role::Client]);
    let answer = app
        .webhook_call(&viewer, Method::GET, "payouts.send", "", None)
        .await;
    assert_eq!((answer.status, answer.word()), (403, "forbidden".into()));

    let id = created["id"].as_str().unwrap();
    let admin = app.admin_token();
    let wrong_class = app
        .webhook_call(
            &admin,
            Method::DELETE,
            "charges.create",
            &format!("/{id}"),
            None,
        )
        .await;
    assert_eq!(wrong_class.status, 404, "{}", wrong_class.text);
    let removed = app
        .webhook_call(
            &admin,
            Method::DELETE,
            "payouts.send",
            &format!("/{id}"),
            None,
        )
        .await;
    assert_eq!(removed.status, 204, "{}", removed.text);
    assert!(list(&app, "payouts.send").await.is_empty());
    let again = app
        .webhook_call(
            &admin,
            Method::DELETE,
            "payouts.send",
            &format!("/{id}"),
            None,
        )
        .await;
    assert_eq!(
        (again.status, again.word()),
        (404, "webhook_not_found".into())
    );
}

async fn a_class_holds_at_most_ten_endpoints(app: TestApp) {
    let body = json!({"url": "https://hooks.example.com/x", "events": ["quarantined"]});
    for _ in 0..10 {
        app.create_webhook("payouts.send", body.clone()).await;
    }
    let eleventh = app
        .webhook_call(
            &app.admin_token(),
            Method::POST,
            "payouts.send",
            "",
            Some(body.clone()),
        )
        .await;
    assert_eq!(
        (eleventh.status, eleventh.word()),
        (400, "invalid_webhook".into())
    );
    assert_eq!(list(&app, "payouts.send").await.len(), 10);
    app.create_webhook("charges.create", body).await;
}

on_every_backend!(
    bad_settings_are_refused_and_nothing_is_stored,
    the_secret_is_shown_once_and_endpoints_can_be_removed,
    a_class_holds_at_most_ten_endpoints,
);
