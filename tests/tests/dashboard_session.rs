//! The dashboard's session over real HTTP: sign-in and sign-out, cookies,
//! the CSRF token of the sign-in form, and the headers every page carries.

use idemkey_api::auth::Role;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::TestApp;
use serde_json::json;

const OP: &str = "charges.create";

/// Claims `key` and quarantines it (an ambiguous outcome, awaiting a
/// decision).
async fn quarantined_key(app: &TestApp, key: &str) {
    let owner = app
        .claim(OP, key, json!({"amount": 1}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.call(
        OP,
        key,
        "quarantine",
        json!({"owner_token": owner, "reason": "provider timed out"}),
    )
    .await
    .assert(200, "quarantined");
}

fn admin(app: &TestApp) -> String {
    app.token_with(&[Role::Admin])
}

fn viewer(app: &TestApp) -> String {
    app.token_with(&[Role::Viewer])
}

// ---- sign-in, sign-out, cookies, headers ----

#[tokio::test]
async fn signing_in_with_a_viewer_token_starts_a_strict_http_only_session() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::new(&app);
    let form = visitor.get("/dashboard/sign-in").await;
    assert_eq!(form.status, 200);

    let answer = visitor
        .post(
            "/dashboard/sign-in",
            &[("csrf", &form.csrf()), ("token", &viewer(&app))],
        )
        .await;

    assert_eq!(
        (answer.status, answer.location()),
        (303, Some("/dashboard"))
    );
    let cookie = answer
        .set_cookie("idemkey_session")
        .expect("a session cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age="] {
        assert!(cookie.contains(flag), "{flag} in {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP: not Secure: {cookie}"
    );
    let overview = visitor.get("/dashboard").await;
    assert_eq!(overview.status, 200);
    overview
        .assert_contains(&app.tenant)
        .assert_contains(">viewer<");
}

#[tokio::test]
async fn a_session_never_outlives_the_token_it_came_from() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let claims = idemkey_tests::tokens::claims_for(&app.tenant, &["viewer"]);
    let mut claims = claims;
    claims["exp"] = json!(idemkey_tests::tokens::unix_now() + 120);
    let short = idemkey_tests::tokens::sign_hs256(
        idemkey_tests::TEST_KID,
        idemkey_tests::TEST_SECRET.as_bytes(),
        &claims,
    );
    let answer = Visitor::new(&app).sign_in(&short).await;
    let cookie = answer.set_cookie("idemkey_session").unwrap();
    let max_age: i64 = cookie
        .split("Max-Age=")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .and_then(|s| s.parse().ok())
        .expect("Max-Age");
    assert!((100..=120).contains(&max_age), "{cookie}");
}

#[tokio::test]
async fn pages_without_a_session_send_the_browser_to_sign_in() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::new(&app);
    for path in [
        "/dashboard",
        "/dashboard/keys",
        "/dashboard/keys/charges.create/k1",
        "/dashboard/classes",
        "/dashboard/storage",
    ] {
        let page = visitor.get(path).await;
        assert_eq!(
            (page.status, page.location()),
            (303, Some("/dashboard/sign-in")),
            "{path}"
        );
    }
    // A forged cookie is no session either.
    visitor.set_cookie("idemkey_session", "eyJ0IjoiZXZpbCJ9.AAAA");
    assert_eq!(visitor.get("/dashboard").await.status, 303);
}

#[tokio::test]
async fn sign_in_explains_refused_tokens_without_starting_a_session() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let cases = [
        ("not-a-token", 401, "was not accepted"),
        (app.token.as_str(), 200, ""), // client+viewer: allowed
        ("", 422, "Paste a token"),
    ];
    let client_only = app.token_with(&[Role::Client]);
    for (token, status, message) in cases.into_iter().chain([(
        client_only.as_str(),
        403,
        "neither the viewer nor the admin role",
    )]) {
        let visitor = Visitor::new(&app);
        let page = visitor.sign_in(token).await;
        if status == 200 {
            assert_eq!(page.status, 303);
            continue;
        }
        assert_eq!(page.status, status, "{}", page.text);
        page.assert_contains(message);
        assert!(page.set_cookie("idemkey_session").is_none());
        assert!(
            !page.text.contains(token) || token.is_empty(),
            "the token is not echoed"
        );
    }
}

#[tokio::test]
async fn sign_in_without_the_forms_csrf_token_is_refused() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::new(&app);
    let form = visitor.get("/dashboard/sign-in").await;
    let other = Visitor::new(&app); // another browser: another nonce cookie
    let stolen = other.get("/dashboard/sign-in").await.csrf();

    for csrf in ["", "AAAA", stolen.as_str()] {
        let page = visitor
            .post(
                "/dashboard/sign-in",
                &[("csrf", csrf), ("token", &viewer(&app))],
            )
            .await;
        assert_eq!(page.status, 403, "{csrf}");
        assert!(page.set_cookie("idemkey_session").is_none());
    }
    let ok = visitor
        .post(
            "/dashboard/sign-in",
            &[("csrf", &form.csrf()), ("token", &viewer(&app))],
        )
        .await;
    assert_eq!(ok.status, 303);
}

#[tokio::test]
async fn signing_out_deletes_the_session_and_needs_the_csrf_token() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    let page = visitor.get("/dashboard").await;

    let forged = visitor
        .post("/dashboard/sign-out", &[("csrf", "nope")])
        .await;
    assert_eq!(forged.status, 403);
    assert_eq!(
        visitor.get("/dashboard").await.status,
        200,
        "still signed in"
    );

    let out = visitor
        .post("/dashboard/sign-out", &[("csrf", &page.csrf())])
        .await;
    assert_eq!(out.status, 303);
    let removal = out.set_cookie("idemkey_session").expect("a removal cookie");
    assert!(removal.contains("Max-Age=0"), "{removal}");
    assert_eq!(visitor.get("/dashboard").await.status, 303);
    visitor
        .get(out.location().unwrap())
        .await
        .assert_contains("You are signed out");
}

#[tokio::test]
async fn every_page_carries_a_strict_security_policy_and_is_never_cached() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    quarantined_key(&app, "k1").await;
    let visitor = Visitor::signed_in(&app, &admin(&app)).await;
    for path in [
        "/dashboard/sign-in",
        "/dashboard",
        "/dashboard?range=day",
        "/dashboard?range=week",
        "/dashboard/keys",
        "/dashboard/keys/charges.create/k1",
        "/dashboard/classes",
        "/dashboard/storage",
        "/dashboard/webhooks",
        "/dashboard/keys/charges.create/missing",
    ] {
        let page = visitor.get(path).await;
        assert!(matches!(page.status, 200 | 404), "{path}: {}", page.status);
        let csp = page.header("content-security-policy").unwrap_or_default();
        for directive in [
            "default-src 'none'",
            "style-src 'self'",
            "img-src 'self' data:",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(page.header("referrer-policy"), Some("no-referrer"));
        assert_eq!(page.header("cache-control"), Some("no-store"), "{path}");
        assert!(!page.text.contains("<script"), "{path}: no scripts");
        assert!(!page.text.contains("style=\""), "{path}: no inline styles");
        // Every form posts and carries a CSRF token.
        assert_eq!(
            page.text.matches("<form").count(),
            page.text.matches(r#"name="csrf""#).count(),
            "{path}"
        );
        assert!(!page.text.contains(r#"method="get""#), "{path}");
    }
}

#[tokio::test]
async fn the_stylesheet_is_served_under_its_content_hash_for_a_year() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::new(&app);
    let page = visitor.get("/dashboard/sign-in").await;
    let start = page
        .text
        .find("/static/dashboard.")
        .expect("stylesheet link");
    let end = start + page.text[start..].find('"').unwrap();
    let href = &page.text[start..end];
    assert!(href.ends_with(".css") && href.len() > "/static/dashboard..css".len() + 8);

    let css = visitor.get(href).await;
    assert_eq!(css.status, 200);
    assert_eq!(css.header("content-type"), Some("text/css; charset=utf-8"));
    assert!(css
        .header("cache-control")
        .unwrap()
        .contains("max-age=31536000"));
    assert!(css.text.contains(".chart"));
    assert_eq!(
        visitor
            .get("/static/dashboard.0000000000000000.css")
            .await
            .status,
        404
    );
    assert_eq!(visitor.get("/static/dashboard.css").await.status, 404);
}
