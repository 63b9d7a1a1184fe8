//! The dashboard's class policy editor changing policies, over real HTTP
//! as a browser with JavaScript off: an admin saves a policy and the API
//! answers it (and claims use it), resets a class to the defaults, adds a
//! class not used yet, and a tenant never sees or changes another's
//! policies. Refusals and validation are in `dashboard_classes.rs`.

use chrono::DateTime;
use idemkey_api::auth::Role;
use idemkey_tests::dashboard::fixtures::admin;
use idemkey_tests::dashboard::policy_editor::{admin_on_edit_page, api_policy, form, EDIT};
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::json;

const OP: &str = "charges.create";

// ---- saving and resetting ----

async fn an_admin_saves_a_policy_and_the_api_answers_it(app: TestApp) {
    app.claim(OP, "k", json!({})).await.assert(201, "claimed");
    let (visitor, csrf) = admin_on_edit_page(&app).await;
    let classes = visitor.get("/dashboard/classes").await;
    classes
        .assert_contains(&format!(r#"href="{EDIT}""#))
        .assert_contains("defaults");

    let answer = visitor
        .post(
            EDIT,
            &form(
                &csrf,
                &[
                    ("replay_window", "7d"),
                    ("hot_retention", ""), // empty: the default, as in a PUT
                    ("lease", "45s"),
                    ("max_wait", "5s"),
                    ("max_outcome_bytes", "2048"),
                    ("on_lease_expiry", "quarantine"),
                    ("include", "/amount\r\n\r\n  /currency  \r\n"),
                    ("decimal_fields", "/amount"),
                ],
            ),
        )
        .await;

    assert_eq!(
        (answer.status, answer.location()),
        (
            303,
            Some("/dashboard/classes?done=saved&operation=charges.create")
        ),
        "{}",
        answer.text
    );
    assert_eq!(
        api_policy(&app, OP).await,
        json!({
            "replay_window": "7d", "hot_retention": "1h", "lease": "45s", "max_lease": "1h",
            "max_wait": "5s", "max_outcome_bytes": 2048, "on_lease_expiry": "quarantine",
            "fingerprint": {"include": ["/amount", "/currency"], "exclude": [],
                            "decimal_fields": ["/amount"]},
            "default": false,
        })
    );
    let page = visitor.get(answer.location().unwrap()).await;
    page.assert_contains("Saved the policy of charges.create")
        .assert_contains("own policy")
        .assert_contains("<td>7d</td>")
        .assert_contains("<td>45s</td>")
        .assert_contains("<td>quarantine</td>")
        .assert_contains("include /amount /currency");
    // The editor shows the stored policy.
    let edit = visitor.get(EDIT).await;
    edit.assert_contains(r#"value="7d""#)
        .assert_contains("/amount\n/currency</textarea>")
        .assert_contains(r#"<option value="quarantine" selected>"#)
        .assert_contains("Reset to defaults");
    // And this node's claims use it at once (its cache was evicted).
    app.claim(OP, "new-key", json!({"amount": 1}))
        .await
        .assert(201, "claimed");
    let record = app.lookup(OP, "new-key").await.json();
    let at = |field: &str| {
        DateTime::parse_from_rfc3339(record[field].as_str().expect(field)).expect("RFC 3339")
    };
    assert_eq!(
        (at("lease_expires_at") - at("claimed_at")).num_milliseconds(),
        45_000
    );
}

async fn reset_returns_the_class_to_the_defaults(app: TestApp) {
    app.claim(OP, "k", json!({})).await.assert(201, "claimed");
    app.put_class(OP, json!({"replay_window": "2h", "lease": "5s"}))
        .await;
    let defaults = api_policy(&app, "never.set").await;
    let (visitor, csrf) = admin_on_edit_page(&app).await;

    let answer = visitor
        .post(EDIT, &[("csrf", &csrf), ("action", "reset")])
        .await;

    assert_eq!(
        (answer.status, answer.location()),
        (
            303,
            Some("/dashboard/classes?done=reset&operation=charges.create")
        )
    );
    assert_eq!(api_policy(&app, OP).await, defaults);
    let page = visitor.get(answer.location().unwrap()).await;
    page.assert_contains("charges.create uses the default policy again")
        .assert_contains("<td>1d</td>");
    let edit = visitor.get(EDIT).await;
    assert!(
        !edit.text.contains("Reset to defaults"),
        "nothing to reset on a class using the defaults"
    );
}

async fn an_admin_adds_a_policy_for_a_class_not_used_yet(app: TestApp) {
    let visitor = Visitor::signed_in(&app, &admin(&app)).await;
    let classes = visitor.get("/dashboard/classes").await;
    classes
        .assert_contains("No operation classes yet")
        .assert_contains(r#"href="/dashboard/classes/_new""#);
    let csrf = visitor.get("/dashboard/classes/_new").await.csrf();

    let answer = visitor
        .post(
            "/dashboard/classes",
            &form(
                &csrf,
                &[("operation", " refunds.create "), ("replay_window", "30d")],
            ),
        )
        .await;

    assert_eq!(
        answer.location(),
        Some("/dashboard/classes?done=saved&operation=refunds.create"),
        "{}",
        answer.text
    );
    assert_eq!(
        api_policy(&app, "refunds.create").await["replay_window"],
        "30d"
    );
    let page = visitor.get("/dashboard/classes").await;
    page.assert_contains("refunds.create</a>")
        .assert_contains("own policy")
        .assert_contains("<td>30d</td>");
}

// ---- tenancy ----

async fn a_tenant_never_sees_or_changes_another_tenants_policies(app: TestApp) {
    app.put_class(OP, json!({"replay_window": "2h"})).await;
    app.put_class("secret.class", json!({"lease": "5s"})).await;
    let ours = api_policy(&app, OP).await;
    let stranger_tenant = fresh_tenant();
    let stranger = Visitor::signed_in(&app, &token(&stranger_tenant, &[Role::Admin])).await;

    let classes = stranger.get("/dashboard/classes").await;
    classes.assert_contains("No operation classes yet");
    assert!(!classes.text.contains("secret.class"));
    let edit = stranger.get(EDIT).await;
    assert_eq!(edit.status, 200);
    edit.assert_contains(r#"value="1d""#); // the defaults, not our 2h
    assert!(!edit.text.contains("Reset to defaults"));
    let csrf = edit.csrf();

    // The stranger's save and reset act on the stranger's class only.
    let saved = stranger
        .post(EDIT, &form(&csrf, &[("replay_window", "9h")]))
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text);
    let reset = stranger
        .post(
            "/dashboard/classes/secret.class",
            &[("csrf", &csrf), ("action", "reset")],
        )
        .await;
    assert_eq!(reset.status, 303);

    assert_eq!(api_policy(&app, OP).await, ours);
    assert_eq!(api_policy(&app, "secret.class").await["lease"], "5s");
    let theirs = stranger.get("/dashboard/classes").await;
    theirs.assert_contains("<td>9h</td>");
    let our_page = Visitor::signed_in(&app, &admin(&app))
        .await
        .get("/dashboard/classes")
        .await;
    assert!(!our_page.text.contains("<td>9h</td>"), "{}", our_page.text);
    our_page.assert_contains("<td>2h</td>");
}

on_every_backend!(
    an_admin_saves_a_policy_and_the_api_answers_it,
    reset_returns_the_class_to_the_defaults,
    an_admin_adds_a_policy_for_a_class_not_used_yet,
    a_tenant_never_sees_or_changes_another_tenants_policies,
);
