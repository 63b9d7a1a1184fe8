//! The dashboard in a real headless Chromium (WebDriver through chromedriver,
//! driven by fantoccini), with JavaScript irrelevant: sign in by pasting a
//! token, watch the charts follow claims made through the API, open a stuck
//! key and resolve it as an admin, change a class's policy, see a rejected key reuse, add a
//! webhook endpoint. Screenshots of every page land in
//! `target/screenshots/` for a person to look at.

use fantoccini::Locator;
use idemkey_api::auth::Role;
use idemkey_tests::browser::{screenshot_dir, Browser};
use idemkey_tests::db::Backend;
use idemkey_tests::TestApp;
use serde_json::json;

const OP: &str = "charges.create";

async fn source(b: &Browser) -> String {
    b.client.source().await.expect("page source")
}

async fn path(b: &Browser) -> String {
    let url = b.client.current_url().await.expect("url");
    match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_owned(),
    }
}

/// Clicks what `target` finds, then waits for the next page to show `css`
/// (a click returns before the navigation it starts has finished).
async fn click_then(b: &Browser, target: Locator<'_>, css: &str) {
    b.client
        .find(target)
        .await
        .expect("element to click")
        .click()
        .await
        .expect("click");
    // Poll rather than `wait().for_element`: a look made while the browser
    // is still navigating fails ("aborted by navigation") instead of waiting.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match b.client.find(Locator::Css(css)).await {
            Ok(_) => return,
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("{css} after the click: {e}")
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
}

/// Makes `n` new claims of `OP` and replays each once.
async fn claims_and_replays(app: &TestApp, prefix: &str, n: usize) {
    for i in 0..n {
        let key = format!("{prefix}-{i}");
        let request = json!({"amount": "25.00", "order": i});
        let owner = app
            .claim(OP, &key, request.clone())
            .await
            .assert(201, "claimed")
            .owner_token();
        app.complete(
            OP,
            &key,
            &owner,
            json!({"status_code": 201, "body": {"charge": format!("ch_{i}")}}),
        )
        .await
        .assert(200, "completed");
        app.claim(OP, &key, request).await.assert(200, "completed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_admin_signs_in_watches_claims_arrive_and_resolves_a_stuck_key() {
    // Arrange: traffic on two classes and one quarantined key.
    let app = TestApp::spawn_on(Backend::Sqlite).await;
    claims_and_replays(&app, "order", 3).await;
    app.claim("emails.send", "welcome-1", json!({"to": "a@example.com"}))
        .await
        .assert(201, "claimed");
    let owner = app
        .claim(OP, "order-77", json!({"amount": "99.00"}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.call(
        OP,
        "order-77",
        "quarantine",
        json!({"owner_token": owner, "reason": "provider timed out after the charge request"}),
    )
    .await
    .assert(200, "quarantined");
    app.flush_usage().await;
    let shots = screenshot_dir();
    let browser = Browser::start().await;
    let c = &browser.client;
    c.set_window_size(1280, 1400).await.unwrap();

    // Sign in: the dashboard sends a browser without a session to the form.
    c.goto(&format!("{}/dashboard", app.address)).await.unwrap();
    assert_eq!(path(&browser).await, "/dashboard/sign-in");
    browser.screenshot(&shots, "01-sign-in").await;
    let admin = app.token_with(&[Role::Admin]);
    c.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(&admin)
        .await
        .unwrap();
    click_then(
        &browser,
        Locator::Css("form.stack button[type=submit]"),
        ".class-card",
    )
    .await;
    assert_eq!(path(&browser).await, "/dashboard");
    let page = source(&browser).await;
    assert!(
        page.contains(&app.tenant) && page.contains(">admin<"),
        "{page}"
    );
    assert!(
        page.contains("charges.create: 4 new claims and 3 replays over the last hour"),
        "{page}"
    );
    browser.screenshot(&shots, "02-overview").await;

    // Claims made through the API now show up after the next flush.
    claims_and_replays(&app, "later", 2).await;
    app.flush_usage().await;
    c.refresh().await.unwrap();
    let page = source(&browser).await;
    assert!(
        page.contains("charges.create: 6 new claims and 5 replays over the last hour"),
        "{page}"
    );
    browser
        .screenshot(&shots, "03-overview-after-more-claims")
        .await;
    c.goto(&format!("{}/dashboard?range=week", app.address))
        .await
        .unwrap();
    browser.screenshot(&shots, "04-overview-week").await;

    // Stuck keys → the quarantined key → resolve it with the real outcome.
    click_then(
        &browser,
        Locator::LinkText("Stuck keys"),
        "a[href='/dashboard/keys/charges.create/order-77']",
    )
    .await;
    assert!(source(&browser).await.contains("provider timed out"));
    browser.screenshot(&shots, "05-stuck-keys").await;
    click_then(&browser, Locator::LinkText("order-77"), "#outcome").await;
    assert_eq!(
        path(&browser).await,
        "/dashboard/keys/charges.create/order-77"
    );
    browser.screenshot(&shots, "06-key-quarantined").await;
    let outcome = c.find(Locator::Css("#outcome")).await.unwrap();
    outcome
        .send_keys("{\"status_code\": 201, \"body\": ")
        .await
        .unwrap();
    // First a mistake: the form says what is wrong and keeps the text.
    click_then(
        &browser,
        Locator::XPath("//button[text()='Store outcome']"),
        "#outcome-error",
    )
    .await;
    let page = source(&browser).await;
    assert!(page.contains("not valid JSON"), "{page}");
    browser.screenshot(&shots, "07-key-validation-error").await;
    let outcome = c.find(Locator::Css("#outcome")).await.unwrap();
    outcome.clear().await.unwrap();
    outcome
        .send_keys(r#"{"status_code": 201, "body": {"charge": "ch_77"}, "resource_id": "ch_77"}"#)
        .await
        .unwrap();
    click_then(
        &browser,
        Locator::XPath("//button[text()='Store outcome']"),
        "p.notice",
    )
    .await;
    let page = source(&browser).await;
    assert!(
        page.contains("The key was resolved") && page.contains("ch_77"),
        "{page}"
    );
    browser.screenshot(&shots, "08-key-resolved").await;
    let replay = app.claim(OP, "order-77", json!({"amount": "99.00"})).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"]["resource_id"], "ch_77");

    // The other pages.
    click_then(
        &browser,
        Locator::LinkText("Operation classes"),
        "th[scope=row] a",
    )
    .await;
    assert!(source(&browser).await.contains("emails.send"));
    browser.screenshot(&shots, "09-classes").await;

    // Change a policy as admin: first a mistake, then a good one.
    click_then(
        &browser,
        Locator::Css("a[href='/dashboard/classes/charges.create']"),
        "#replay_window",
    )
    .await;
    browser.screenshot(&shots, "10-class-policy-edit").await;
    let lease = c.find(Locator::Css("#lease")).await.unwrap();
    lease.clear().await.unwrap();
    lease.send_keys("forever").await.unwrap();
    click_then(
        &browser,
        Locator::XPath("//button[text()='Save policy']"),
        "#lease-error",
    )
    .await;
    let page = source(&browser).await;
    assert!(page.contains("lease must be a duration"), "{page}");
    browser.screenshot(&shots, "11-class-policy-error").await;
    let lease = c.find(Locator::Css("#lease")).await.unwrap();
    lease.clear().await.unwrap();
    lease.send_keys("45s").await.unwrap();
    let window = c.find(Locator::Css("#replay_window")).await.unwrap();
    window.clear().await.unwrap();
    window.send_keys("7d").await.unwrap();
    c.find(Locator::Css("#on_lease_expiry option[value=quarantine]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Css("#decimal_fields"))
        .await
        .unwrap()
        .send_keys("/amount")
        .await
        .unwrap();
    click_then(
        &browser,
        Locator::XPath("//button[text()='Save policy']"),
        "p.notice",
    )
    .await;
    assert_eq!(
        path(&browser).await,
        "/dashboard/classes?done=saved&operation=charges.create"
    );
    let page = source(&browser).await;
    assert!(
        page.contains("Saved the policy of charges.create") && page.contains("own policy"),
        "{page}"
    );
    browser.screenshot(&shots, "12-classes-after-edit").await;
    let policy = app.get_class(OP).await.json();
    assert_eq!(
        (
            &policy["replay_window"],
            &policy["lease"],
            &policy["on_lease_expiry"],
            &policy["fingerprint"]["decimal_fields"],
        ),
        (
            &json!("7d"),
            &json!("45s"),
            &json!("quarantine"),
            &json!(["/amount"])
        ),
    );

    click_then(&browser, Locator::LinkText("Storage"), ".stat").await;
    assert!(source(&browser).await.contains("Archived records"));
    browser.screenshot(&shots, "13-storage").await;

    // A key reused with another amount: listed with the field, never its value.
    app.claim(OP, "order-88", json!({"amount": "10.00"}))
        .await
        .assert(201, "claimed");
    app.claim(OP, "order-88", json!({"amount": "11.00"}))
        .await
        .assert(422, "key_reused");
    app.flush_usage().await;
    click_then(
        &browser,
        Locator::LinkText("Rejected reuse"),
        "code.pointer",
    )
    .await;
    let rejections = source(&browser).await;
    assert!(rejections.contains("order-88") && rejections.contains("/amount"));
    assert!(!rejections.contains("11.00"), "values never shown");
    browser.screenshot(&shots, "13b-rejections").await;

    // Add a webhook endpoint: its secret is shown once, then it is listed.
    click_then(&browser, Locator::LinkText("Webhooks"), "#url").await;
    for (field, text) in [
        ("#operation", OP),
        ("#url", "https://hooks.example.com/idemkey"),
    ] {
        c.find(Locator::Css(field))
            .await
            .unwrap()
            .send_keys(text)
            .await
            .unwrap();
    }
    c.find(Locator::Css("input[name=quarantined]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    click_then(
        &browser,
        Locator::XPath("//button[text()='Add endpoint']"),
        "#webhook-secret",
    )
    .await;
    let added = source(&browser).await;
    assert!(
        added.contains("whsec_") && added.contains("hooks.example.com"),
        "{added}"
    );
    browser.screenshot(&shots, "13c-webhooks").await;

    // A phone-sized window.
    c.set_window_size(390, 1600).await.unwrap();
    c.goto(&format!("{}/dashboard", app.address)).await.unwrap();
    browser.screenshot(&shots, "14-overview-phone").await;
    c.goto(&format!(
        "{}/dashboard/keys/charges.create/order-77",
        app.address
    ))
    .await
    .unwrap();
    browser.screenshot(&shots, "15-key-phone").await;
    c.goto(&format!("{}/dashboard/classes/charges.create", app.address))
        .await
        .unwrap();
    browser.screenshot(&shots, "16-class-policy-phone").await;

    // Sign out.
    click_then(
        &browser,
        Locator::XPath("//button[text()='Sign out']"),
        "#token",
    )
    .await;
    assert_eq!(path(&browser).await, "/dashboard/sign-in?signed_out=1");
    browser.close().await;
}
