//! Admin actions on the dashboard's key pages, over real HTTP as a browser
//! with JavaScript off: viewers refused, CSRF on the resolve forms,
//! validation errors kept in the form, and resolving a quarantined key or
//! releasing one whose lease ran out. The pages themselves are in
//! `dashboard.rs`.

use idemkey_tests::dashboard::fixtures::{admin, figure, quarantined_key, viewer};
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::json;

const OP: &str = "charges.create";

// ---- admin actions ----

async fn a_viewer_is_refused_admin_actions_even_with_a_valid_form(app: TestApp) {
    quarantined_key(&app, "k").await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    let csrf = visitor.get("/dashboard/keys/charges.create/k").await.csrf();

    for form in [
        vec![("csrf", csrf.as_str()), ("action", "release")],
        vec![
            ("csrf", csrf.as_str()),
            ("action", "complete"),
            ("outcome", r#"{"status_code": 200}"#),
        ],
    ] {
        let page = visitor
            .post("/dashboard/keys/charges.create/k/resolve", &form)
            .await;
        assert_eq!(page.status, 403, "{}", page.text);
        page.assert_contains("Only an admin");
    }
    app.lookup(OP, "k").await.assert(200, "quarantined");
}

async fn admin_forms_without_the_sessions_csrf_token_are_refused(app: TestApp) {
    quarantined_key(&app, "k").await;
    let visitor = Visitor::signed_in(&app, &admin(&app)).await;
    let other = Visitor::signed_in(&app, &admin(&app)).await;
    let others_token = other.get("/dashboard").await.csrf();

    for csrf in ["", "forged", others_token.as_str()] {
        let page = visitor
            .post(
                "/dashboard/keys/charges.create/k/resolve",
                &[("csrf", csrf), ("action", "release")],
            )
            .await;
        assert_eq!(page.status, 403, "{csrf}");
    }
    app.lookup(OP, "k").await.assert(200, "quarantined");
}

async fn resolve_shows_validation_errors_in_the_form(app: TestApp) {
    quarantined_key(&app, "k").await;
    let visitor = Visitor::signed_in(&app, &admin(&app)).await;
    let page = visitor.get("/dashboard/keys/charges.create/k").await;
    page.assert_contains("Store outcome")
        .assert_contains("Release key");
    let csrf = page.csrf();
    let long_reason = "r".repeat(1025);
    let cases = [
        ("complete", "", "", "Enter the outcome"),
        ("complete", "{not json", "", "not valid JSON"),
        ("complete", r#"{"body": {}}"#, "", "status_code"),
        ("complete", "[1, 2]", "", "must be a JSON object"),
        ("release", "", long_reason.as_str(), "at most 1024 bytes"),
    ];
    for (action, outcome, reason, message) in cases {
        let page = visitor
            .post(
                "/dashboard/keys/charges.create/k/resolve",
                &[
                    ("csrf", &csrf),
                    ("action", action),
                    ("outcome", outcome),
                    ("reason", reason),
                ],
            )
            .await;
        assert_eq!(page.status, 422, "{action} {outcome}: {}", page.text);
        page.assert_contains(message)
            .assert_contains(r#"aria-invalid="true""#);
        if !outcome.is_empty() {
            // What was typed is kept (escaped) for correcting.
            let escaped = outcome.replace('"', "&#34;");
            assert!(
                page.text.contains(&escaped),
                "the textarea keeps {outcome:?}"
            );
        }
    }
    app.lookup(OP, "k").await.assert(200, "quarantined");
}

async fn an_admin_resolves_a_quarantined_key_with_an_outcome(app: TestApp) {
    quarantined_key(&app, "k").await;
    let visitor = Visitor::signed_in(&app, &admin(&app)).await;
    let csrf = visitor.get("/dashboard/keys/charges.create/k").await.csrf();

    let answer = visitor
        .post(
            "/dashboard/keys/charges.create/k/resolve",
            &[
                ("csrf", &csrf),
                ("action", "complete"),
                (
                    "outcome",
                    r#"{"status_code": 201, "body": {"charge": "ch_9"}}"#,
                ),
            ],
        )
        .await;

    assert_eq!(answer.status, 303, "{}", answer.text);
    let detail = visitor.get(answer.location().unwrap()).await;
    detail
        .assert_contains("The key was resolved")
        .assert_contains("Completed")
        .assert_contains("ch_9")
        .assert_contains("admin:dashboard");
    let replay = app.claim(OP, "k", json!({"amount": 1})).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"]["body"]["charge"], "ch_9");
}

async fn an_admin_releases_a_key_whose_lease_ran_out(app: TestApp) {
    app.claim(OP, "lost", json!({}))
        .await
        .assert(201, "claimed");
    app.expire_lease("lost").await;
    let visitor = Visitor::signed_in(&app, &admin(&app)).await;
    let csrf = visitor
        .get("/dashboard/keys/charges.create/lost")
        .await
        .csrf();

    let answer = visitor
        .post(
            "/dashboard/keys/charges.create/lost/resolve",
            &[
                ("csrf", &csrf),
                ("action", "release"),
                ("reason", "no charge at the provider"),
            ],
        )
        .await;

    assert_eq!(
        (answer.status, answer.location()),
        (303, Some("/dashboard/keys?done=released"))
    );
    visitor
        .get("/dashboard/keys?done=released")
        .await
        .assert_contains("The key was released");
    app.lookup(OP, "lost").await.assert(404, "not_found");
    app.claim(OP, "lost", json!({}))
        .await
        .assert(201, "claimed");
    app.flush_usage().await;
    let page = visitor.get("/dashboard").await;
    assert_eq!(figure(&page, "Releases"), "1");
}

on_every_backend!(
    a_viewer_is_refused_admin_actions_even_with_a_valid_form,
    admin_forms_without_the_sessions_csrf_token_are_refused,
    resolve_shows_validation_errors_in_the_form,
    an_admin_resolves_a_quarantined_key_with_an_outcome,
    an_admin_releases_a_key_whose_lease_ran_out,
);
