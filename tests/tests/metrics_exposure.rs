//! Who may read `/metrics`: its counts span every tenant, so on the API
//! listener it needs a token with the `metrics` role (which allows nothing
//! else), and `IDEMKEY_METRICS_LISTEN` serves it without credentials on a
//! separate, private listener.

use idemkey_api::auth::Role;
use idemkey_tests::app::Answer;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::TestApp;
use serde_json::json;

async fn get(app: &TestApp, url: String, token: Option<&str>) -> Answer {
    let mut request = app.client.get(url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    Answer::from(request.send().await.expect("request")).await
}

#[tokio::test]
async fn on_the_api_listener_metrics_need_a_token_with_the_metrics_role() {
    let app = TestApp::spawn().await;
    let url = format!("{}/metrics", app.address);

    let anonymous = get(&app, url.clone(), None).await;
    let tenant_roles = [
        app.token_with(&[Role::Client, Role::Viewer]),
        app.token_with(&[Role::Admin]),
    ];
    let scraper = app.token_with(&[Role::Metrics]);
    let scraped = get(&app, url.clone(), Some(&scraper)).await;

    anonymous.assert(401, "unauthorized");
    assert!(!anonymous.text.contains("idemkey_"), "{}", anonymous.text);
    for token in &tenant_roles {
        get(&app, url.clone(), Some(token))
            .await
            .assert(403, "forbidden");
    }
    assert_eq!(scraped.status, 200, "{}", scraped.text);
    assert!(
        scraped
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        scraped.content_type
    );
    assert!(
        scraped.text.contains("idemkey_claims_total"),
        "{}",
        scraped.text
    );
}

#[tokio::test]
async fn a_metrics_token_can_do_nothing_but_scrape() {
    let app = TestApp::spawn().await;
    let scraper = app.token_with(&[Role::Metrics]);

    let claim = app
        .call_as(
            &scraper,
            "charges.create",
            "k1",
            "claim",
            json!({"request": 1}),
        )
        .await;
    let lookup = app.lookup_as(&scraper, "charges.create", "k1").await;
    let list = get(&app, format!("{}/v1/keys", app.address), Some(&scraper)).await;
    let class = get(
        &app,
        format!("{}/v1/operation-classes/charges.create", app.address),
        Some(&scraper),
    )
    .await;
    let dashboard = Visitor::new(&app).sign_in(&scraper).await;

    for answer in [&claim, &lookup, &list, &class] {
        answer.assert(403, "forbidden");
    }
    assert_eq!(dashboard.status, 403, "{}", dashboard.text);
    app.lookup("charges.create", "k1")
        .await
        .assert(404, "not_found");
}

#[tokio::test]
async fn the_metrics_listener_serves_metrics_without_credentials_and_nothing_else() {
    let app = TestApp::spawn_with(|vars| {
        vars.insert("IDEMKEY_METRICS_LISTEN".into(), "127.0.0.1:0".into());
    })
    .await;
    let private = app
        .metrics_address
        .clone()
        .expect("a metrics listener was started");
    assert_ne!(private, app.address);

    let scraped = get(&app, format!("{private}/metrics"), None).await;
    let others = [
        "/v1/keys",
        "/v1/keys/charges.create/k1",
        "/healthz",
        "/openapi.json",
        "/dashboard",
    ];

    assert_eq!(scraped.status, 200, "{}", scraped.text);
    assert!(scraped.text.contains("idemkey_claims_total"));
    for path in others {
        get(&app, format!("{private}{path}"), Some(&app.token))
            .await
            .assert(404, "no_route");
    }
    // The API listener still wants the role.
    get(&app, format!("{}/metrics", app.address), None)
        .await
        .assert(401, "unauthorized");
}

#[tokio::test]
async fn the_binary_opens_the_metrics_listener_it_is_given() {
    let mut vars = idemkey_tests::app::test_vars(&idemkey_tests::db::Backend::Sqlite.fresh().await);
    vars.insert("IDEMKEY_METRICS_LISTEN".into(), "127.0.0.1:0".into());

    let server = idemkey_tests::process::ServerProcess::start(&vars).await;

    let private = server.metrics_address.clone().expect("announced");
    let scraped = reqwest::get(format!("{private}/metrics"))
        .await
        .expect("scrape");
    assert_eq!(scraped.status(), 200);
    let public = reqwest::get(format!("{}/metrics", server.address))
        .await
        .expect("scrape");
    assert_eq!(public.status(), 401);
    server.stop().await;
}
