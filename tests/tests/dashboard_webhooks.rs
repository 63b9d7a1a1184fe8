//! The dashboard's webhook pages over real HTTP, as a browser with
//! JavaScript off: an admin adds an endpoint (its secret shown once), sees
//! its deliveries with their state, and removes it; a viewer, a forged
//! form and another tenant get nothing.

use idemkey_api::auth::Role;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::db::Backend;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::webhooks::{quarantined, webhook_app, Receiver};
use idemkey_tests::TestApp;
use reqwest::Method;

const OP: &str = "payouts.send";

async fn an_admin_adds_watches_and_removes_an_endpoint(app: TestApp) {
    let hooks = Receiver::start();
    let admin = Visitor::signed_in(&app, &app.admin_token()).await;
    let page = admin.get("/dashboard/webhooks").await;
    assert_eq!(page.status, 200, "{}", page.text);
    page.assert_contains("No webhook endpoints yet");
    let csrf = page.csrf();

    // A bad setting is refused with the API's words, and nothing is added.
    let refused = admin
        .post(
            "/dashboard/webhooks",
            &[
                ("csrf", csrf.as_str()),
                ("operation", OP),
                ("url", hooks.url.as_str()),
                ("stuck", "on"),
            ],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.text);
    refused.assert_contains("stuck_after: required");

    let added = admin
        .post(
            "/dashboard/webhooks",
            &[
                ("csrf", csrf.as_str()),
                ("operation", OP),
                ("url", hooks.url.as_str()),
                ("quarantined", "on"),
                ("stuck", "on"),
                ("stuck_after", "10m"),
            ],
        )
        .await;
    assert_eq!(added.status, 201, "{}", added.text);
    added
        .assert_contains("whsec_")
        .assert_contains("stuck after 10m");
    let secret_at = added.text.find("whsec_").unwrap();
    let secret: String = added.text[secret_at..]
        .chars()
        .take_while(|c| !matches!(c, '<' | '"'))
        .collect::<String>()
        .replace("&#x2f;", "/")
        .replace("&#43;", "+");
    // Shown once: the list never shows it again, nor does the API.
    let listed = admin.get("/dashboard/webhooks").await;
    assert!(
        !listed.text.contains("whsec_"),
        "the secret is not shown again"
    );

    quarantined(&app, OP, "p1", "ambiguous").await;
    let got = hooks.until("the delivery", |got| !got.is_empty()).await;
    assert!(
        got[0].signed_by(&secret),
        "the secret the page showed signs deliveries"
    );

    let endpoints = app
        .webhook_call(&app.admin_token(), Method::GET, OP, "", None)
        .await
        .json();
    let id = endpoints["webhooks"][0]["id"].as_str().unwrap().to_owned();
    let detail = admin.get(&format!("/dashboard/webhooks/{id}")).await;
    assert_eq!(detail.status, 200, "{}", detail.text);
    detail
        .assert_contains("quarantined")
        .assert_contains(r#"href="/dashboard/keys/payouts.send/p1""#)
        .assert_contains("badge-delivered")
        .assert_contains("HTTP 200");
    admin
        .get("/dashboard/webhooks")
        .await
        .assert_contains(&format!(r#"href="/dashboard/webhooks/{id}""#));

    // Another tenant's admin: the page and the removal are not found.
    let stranger = Visitor::signed_in(&app, &token(&fresh_tenant(), &[Role::Admin])).await;
    let theirs = stranger.get(&format!("/dashboard/webhooks/{id}")).await;
    assert_eq!(theirs.status, 404);
    assert!(!stranger
        .get("/dashboard/webhooks")
        .await
        .text
        .contains(&hooks.url));
    let stranger_csrf = stranger.get("/dashboard/webhooks").await.csrf();
    let removal = stranger
        .post(
            &format!("/dashboard/webhooks/{id}/delete"),
            &[("csrf", stranger_csrf.as_str())],
        )
        .await;
    assert_eq!(removal.status, 404);
    // A viewer sees nothing and changes nothing; a forged form neither.
    let viewer = Visitor::signed_in(&app, &app.token_with(&[Role::Viewer])).await;
    assert_eq!(viewer.get("/dashboard/webhooks").await.status, 403);
    let viewer_csrf = viewer.get("/dashboard/keys").await.csrf();
    let by_viewer = viewer
        .post(
            &format!("/dashboard/webhooks/{id}/delete"),
            &[("csrf", viewer_csrf.as_str())],
        )
        .await;
    assert_eq!(by_viewer.status, 403);
    let forged = admin
        .post(
            &format!("/dashboard/webhooks/{id}/delete"),
            &[("csrf", "forged")],
        )
        .await;
    assert_eq!(forged.status, 403);
    admin
        .get("/dashboard/webhooks")
        .await
        .assert_contains(&hooks.url);

    let removed = admin
        .post(
            &format!("/dashboard/webhooks/{id}/delete"),
            &[("csrf", csrf.as_str())],
        )
        .await;
    assert_eq!(
        (removed.status, removed.location()),
        (303, Some("/dashboard/webhooks?done=removed"))
    );
    let after = admin.get("/dashboard/webhooks?done=removed").await;
    after
        .assert_contains("were removed")
        .assert_contains("No webhook endpoints yet");
    println!("added, delivered to, shown and removed one endpoint; 5 refusals");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_admin_adds_watches_and_removes_an_endpoint_on_postgres() {
    an_admin_adds_watches_and_removes_an_endpoint(webhook_app(Backend::Postgres, 3).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_admin_adds_watches_and_removes_an_endpoint_on_sqlite() {
    an_admin_adds_watches_and_removes_an_endpoint(webhook_app(Backend::Sqlite, 3).await).await
}
