//! The dashboard's own secret: sessions and CSRF tokens are signed with
//! `IDEMKEY_SESSION_SECRET` (not the effect-id key), survive a rotation,
//! and behind an HTTPS proxy travel in `__Host-` cookies with HSTS.

use idemkey_api::auth::Role;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::TestApp;

const FIRST: &str = "first-session-secret-3f9a1c0e5b7d2a4f6e8c";
const SECOND: &str = "second-session-secret-9b2e4d6f8a0c1e3b5d7f";

async fn node_with_session_secret(database_url: &str, secrets: &str) -> TestApp {
    let secrets = secrets.to_owned();
    TestApp::spawn_node(database_url, move |vars| {
        vars.insert("IDEMKEY_SESSION_SECRET".into(), secrets);
    })
    .await
}

/// A viewer's token for `app`'s tenant.
fn viewer(app: &TestApp) -> String {
    app.token_with(&[Role::Viewer])
}

#[tokio::test]
async fn sessions_are_signed_with_their_own_secret_not_the_effect_id_key() {
    // Two nodes sharing the database and IDEMKEY_SECRET, not the session key.
    let a = node_with_session_secret(&fresh_sqlite().await, FIRST).await;
    let b = node_with_session_secret(&a.database_url, SECOND).await;
    assert_eq!(a.vars["IDEMKEY_SECRET"], b.vars["IDEMKEY_SECRET"]);
    let visitor = Visitor::signed_in(&a, &viewer(&a)).await;

    let there = visitor.on(&b).get("/dashboard").await;

    assert_eq!(
        (there.status, there.location()),
        (303, Some("/dashboard/sign-in")),
        "a session signed under another session secret is no session"
    );
    assert_eq!(visitor.get("/dashboard").await.status, 200);
}

#[tokio::test]
async fn a_rotated_session_secret_keeps_sessions_and_csrf_tokens_valid() {
    // Arrange: signed in on a node with the first secret, a form on screen.
    let old = node_with_session_secret(&fresh_sqlite().await, FIRST).await;
    let visitor = Visitor::signed_in(&old, &viewer(&old)).await;
    let page = visitor.get("/dashboard").await;
    assert_eq!(page.status, 200, "{}", page.text);
    let csrf = page.csrf();

    // Act: the new secret goes in front; the old one stays to verify.
    let rotated = node_with_session_secret(&old.database_url, &format!("{SECOND},{FIRST}")).await;
    let after = visitor.on(&rotated);

    // Assert: the session and the form's token still work...
    assert_eq!(after.get("/dashboard").await.status, 200);
    let out = after.post("/dashboard/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!(
        (out.status, out.location()),
        (303, Some("/dashboard/sign-in?signed_out=1")),
        "{}",
        out.text
    );
    // ...a new session is signed with the newest secret only...
    let fresh = Visitor::signed_in(&rotated, &viewer(&rotated)).await;
    let only_old = fresh.on(&old).get("/dashboard").await;
    assert_eq!(only_old.status, 303, "the first secret did not sign it");
    // ...and once the old secret is dropped, its sessions end.
    let dropped = node_with_session_secret(&old.database_url, SECOND).await;
    let gone = visitor.on(&dropped).get("/dashboard").await;
    assert_eq!(
        (gone.status, gone.location()),
        (303, Some("/dashboard/sign-in"))
    );
    assert_eq!(fresh.on(&dropped).get("/dashboard").await.status, 200);
}

#[tokio::test]
async fn behind_https_cookies_are_host_prefixed_and_secure_and_hsts_is_sent() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::behind_https_proxy(&app);

    let form = visitor.get("/dashboard/sign-in").await;
    let signed_in = visitor
        .post(
            "/dashboard/sign-in",
            &[("csrf", &form.csrf()), ("token", &viewer(&app))],
        )
        .await;
    let overview = visitor.get("/dashboard").await;

    assert_eq!(form.status, 200, "{}", form.text);
    assert_eq!(
        (signed_in.status, signed_in.location()),
        (303, Some("/dashboard")),
        "{}",
        signed_in.text
    );
    assert_eq!(overview.status, 200, "the __Host- cookie is read back");
    for (page, name) in [
        (&form, "__Host-idemkey_signin"),
        (&signed_in, "__Host-idemkey_session"),
    ] {
        let cookie = page
            .set_cookie(name)
            .unwrap_or_else(|| panic!("{name} in {:?}", page.set_cookies()));
        for flag in ["Secure", "HttpOnly", "SameSite=Strict", "Path=/;"] {
            assert!(format!("{cookie};").contains(flag), "{flag} in {cookie}");
        }
        assert!(!cookie.contains("Domain"), "{cookie}");
    }
    assert!(
        signed_in.set_cookie("idemkey_session").is_none(),
        "no unprefixed cookie over TLS"
    );
    for page in [&form, &signed_in, &overview] {
        assert_eq!(
            page.header("strict-transport-security"),
            Some("max-age=31536000")
        );
    }
    let start = form.text.find("/static/").expect("a stylesheet link");
    let end = start + form.text[start..].find('"').expect("closing quote");
    let css = visitor.get(&form.text[start..end]).await;
    assert_eq!(css.status, 200, "{}", &form.text[start..end]);
    assert!(css.header("strict-transport-security").is_some());
}

#[tokio::test]
async fn over_plain_http_there_is_no_hsts_and_no_host_prefix() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::new(&app);

    let form = visitor.get("/dashboard/sign-in").await;
    let signed_in = visitor
        .post(
            "/dashboard/sign-in",
            &[("csrf", &form.csrf()), ("token", &viewer(&app))],
        )
        .await;

    assert_eq!(signed_in.status, 303, "{}", signed_in.text);
    assert!(signed_in.set_cookie("idemkey_session").is_some());
    assert!(signed_in.set_cookie("__Host-idemkey_session").is_none());
    assert_eq!(signed_in.header("strict-transport-security"), None);
    assert_eq!(form.header("strict-transport-security"), None);
    // An https session cookie is not read over plain HTTP.
    let https = Visitor::behind_https_proxy(&app);
    let form = https.get("/dashboard/sign-in").await;
    https
        .post(
            "/dashboard/sign-in",
            &[("csrf", &form.csrf()), ("token", &viewer(&app))],
        )
        .await;
    let cookie = https.cookie("__Host-idemkey_session").expect("signed in");
    let plain = Visitor::new(&app);
    plain.set_cookie("__Host-idemkey_session", &cookie);
    assert_eq!(plain.get("/dashboard").await.status, 303);
}

async fn fresh_sqlite() -> String {
    idemkey_tests::db::Backend::Sqlite.fresh().await
}
