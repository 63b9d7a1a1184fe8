//! Editing operation-class policies on the dashboard, over real HTTP as a
//! browser with JavaScript off: who may, CSRF, validation errors beside
//! their fields (the API's own texts), and what the API answers afterwards.

use chrono::DateTime;
use idemkey_api::auth::Role;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::{json, Value};

const OP: &str = "charges.create";
const EDIT: &str = "/dashboard/classes/charges.create";

fn admin(app: &TestApp) -> String {
    app.token_with(&[Role::Admin])
}

fn viewer(app: &TestApp) -> String {
    app.token_with(&[Role::Viewer])
}

/// Text as askama escapes it inside HTML.
fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// The class's policy as `GET /v1/operation-classes/{op}` answers it.
async fn api_policy(app: &TestApp, operation: &str) -> Value {
    let answer = app.get_class(operation).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()
}

/// A complete form as the editor posts it, with `changes` applied.
fn form<'a>(csrf: &'a str, changes: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut fields = vec![
        ("csrf", csrf),
        ("action", "save"),
        ("replay_window", "1d"),
        ("hot_retention", "1h"),
        ("lease", "30s"),
        ("max_lease", "1h"),
        ("max_wait", "10s"),
        ("max_outcome_bytes", "1048576"),
        ("on_lease_expiry", "takeover"),
        ("include", ""),
        ("exclude", ""),
        ("decimal_fields", ""),
    ];
    for (name, value) in changes {
        match fields.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = value,
            None => fields.push((name, value)),
        }
    }
    fields
}

async fn admin_on_edit_page(app: &TestApp) -> (Visitor, String) {
    let visitor = Visitor::signed_in(app, &admin(app)).await;
    let page = visitor.get(EDIT).await;
    assert_eq!(page.status, 200, "{}", page.text);
    let csrf = page.csrf();
    (visitor, csrf)
}

// ---- who may ----

async fn a_viewer_is_refused_policy_changes_even_with_a_valid_form(app: TestApp) {
    app.claim(OP, "k", json!({})).await.assert(201, "claimed");
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    let classes = visitor.get("/dashboard/classes").await;
    classes
        .assert_contains(OP)
        .assert_contains("Only an admin can change");
    assert!(!classes.text.contains(EDIT), "no edit link for a viewer");
    assert!(!classes.text.contains("/dashboard/classes/_new"));
    let csrf = classes.csrf();

    for path in [EDIT, "/dashboard/classes/_new"] {
        let page = visitor.get(path).await;
        assert_eq!(page.status, 403, "GET {path}");
    }
    let posts: [(&str, Vec<(&str, &str)>); 3] = [
        (EDIT, form(&csrf, &[("replay_window", "1h")])),
        (EDIT, vec![("csrf", &csrf), ("action", "reset")]),
        (
            "/dashboard/classes",
            form(&csrf, &[("operation", "refunds.create")]),
        ),
    ];
    for (path, fields) in posts {
        let page = visitor.post(path, &fields).await;
        assert_eq!(page.status, 403, "{path}: {}", page.text);
        page.assert_contains("Only an admin");
    }
    assert_eq!(api_policy(&app, OP).await["default"], true);
    assert_eq!(api_policy(&app, "refunds.create").await["default"], true);
}

async fn policy_forms_without_the_sessions_csrf_token_are_refused(app: TestApp) {
    app.put_class(OP, json!({"replay_window": "2h"})).await;
    let before = api_policy(&app, OP).await;
    let (visitor, _) = admin_on_edit_page(&app).await;
    let other = Visitor::signed_in(&app, &admin(&app)).await;
    let others_token = other.get("/dashboard").await.csrf();

    for csrf in ["", "forged", others_token.as_str()] {
        let save = visitor
            .post(EDIT, &form(csrf, &[("replay_window", "5h")]))
            .await;
        assert_eq!(save.status, 403, "save with {csrf:?}");
        let reset = visitor
            .post(EDIT, &[("csrf", csrf), ("action", "reset")])
            .await;
        assert_eq!(reset.status, 403, "reset with {csrf:?}");
        let create = visitor
            .post(
                "/dashboard/classes",
                &form(csrf, &[("operation", "refunds.create")]),
            )
            .await;
        assert_eq!(create.status, 403, "create with {csrf:?}");
    }
    assert_eq!(api_policy(&app, OP).await, before, "nothing changed");
    assert_eq!(api_policy(&app, "refunds.create").await["default"], true);
}

// ---- validation ----

async fn validation_errors_are_the_apis_and_shown_beside_their_field(app: TestApp) {
    app.put_class(OP, json!({"replay_window": "2h"})).await;
    let before = api_policy(&app, OP).await;
    let (visitor, csrf) = admin_on_edit_page(&app).await;
    // (form field, value, the same value as API JSON, element id of the error)
    let cases = [
        (
            "replay_window",
            "1 day",
            json!({"replay_window": "1 day"}),
            "replay_window",
        ),
        (
            "replay_window",
            "500ms",
            json!({"replay_window": "500ms"}),
            "replay_window",
        ),
        (
            "hot_retention",
            "2d",
            json!({"hot_retention": "2d"}),
            "hot_retention",
        ),
        ("lease", "2h", json!({"lease": "2h"}), "lease"),
        ("max_wait", "2m", json!({"max_wait": "2m"}), "max_wait"),
        (
            "max_outcome_bytes",
            "0",
            json!({"max_outcome_bytes": 0}),
            "max_outcome_bytes",
        ),
        (
            "max_outcome_bytes",
            "-5",
            json!({"max_outcome_bytes": -5}),
            "max_outcome_bytes",
        ),
        (
            "max_outcome_bytes",
            "1MiB",
            json!({"max_outcome_bytes": "1MiB"}),
            "max_outcome_bytes",
        ),
        (
            "on_lease_expiry",
            "retry",
            json!({"on_lease_expiry": "retry"}),
            "on_lease_expiry",
        ),
        (
            "include",
            "/amount\namount",
            json!({"fingerprint": {"include": ["/amount", "amount"]}}),
            "include",
        ),
        (
            "exclude",
            "/a~x",
            json!({"fingerprint": {"exclude": ["/a~x"]}}),
            "exclude",
        ),
        (
            "decimal_fields",
            "x",
            json!({"fingerprint": {"decimal_fields": ["x"]}}),
            "decimal_fields",
        ),
    ];
    for (field, value, body, id) in cases {
        // The API's answer to the same value.
        let api = app.put_class(OP, with_defaults(body.clone())).await;
        api.assert(400, "invalid_policy");
        let detail = api.json()["detail"].as_str().unwrap().to_owned();

        let page = visitor.post(EDIT, &form(&csrf, &[(field, value)])).await;

        assert_eq!(page.status, 422, "{field}={value:?}: {}", page.text);
        page.assert_contains(&format!(r#"id="{id}-error">{}</p>"#, html(&detail)));
        page.assert_contains(&format!(r#"aria-describedby="{id}-hint {id}-error""#));
        let kept = html(value);
        assert!(page.text.contains(&kept), "{field} keeps {value:?}");
        // The other fields keep what was submitted too.
        let other = if field == "max_wait" {
            "max_lease"
        } else {
            "max_wait"
        };
        page.assert_contains(&format!(
            r#"name="{other}" type="text" value="{}""#,
            if other == "max_wait" { "10s" } else { "1h" }
        ));
    }
    assert_eq!(api_policy(&app, OP).await, before, "nothing changed");
}

/// An API body with the form's other values, so the API and the form are
/// asked about the same policy.
fn with_defaults(mut body: Value) -> Value {
    let full = json!({
        "replay_window": "1d", "hot_retention": "1h", "lease": "30s", "max_lease": "1h",
        "max_wait": "10s", "max_outcome_bytes": 1048576, "on_lease_expiry": "takeover",
        "fingerprint": {"include": [], "exclude": [], "decimal_fields": []},
    });
    let Value::Object(mut full) = full else {
        unreachable!()
    };
    let Value::Object(changes) = body.take() else {
        unreachable!()
    };
    for (k, v) in changes {
        if k == "fingerprint" {
            let fp = full["fingerprint"].as_object_mut().unwrap();
            for (k, v) in v.as_object().unwrap() {
                fp.insert(k.clone(), v.clone());
            }
        } else {
            full.insert(k, v);
        }
    }
    Value::Object(full)
}

async fn a_new_class_needs_a_valid_name(app: TestApp) {
    let visitor = Visitor::signed_in(&app, &admin(&app)).await;
    let page = visitor.get("/dashboard/classes/_new").await;
    assert_eq!(page.status, 200, "{}", page.text);
    page.assert_contains(r#"name="operation""#);
    let csrf = page.csrf();

    for name in ["", "Refunds", "refunds/create"] {
        let page = visitor
            .post(
                "/dashboard/classes",
                &form(&csrf, &[("operation", name), ("replay_window", "3h")]),
            )
            .await;
        assert_eq!(page.status, 422, "{name:?}: {}", page.text);
        page.assert_contains(r#"id="operation-error">operation must match"#)
            .assert_contains(r#"value="3h""#);
    }
    // A bad policy for a good name: the name is kept, the error is beside
    // its field.
    let page = visitor
        .post(
            "/dashboard/classes",
            &form(
                &csrf,
                &[("operation", "refunds.create"), ("lease", "forever")],
            ),
        )
        .await;
    assert_eq!(page.status, 422);
    page.assert_contains(r#"value="refunds.create""#)
        .assert_contains(r#"id="lease-error">lease must be a duration"#);
    assert_eq!(api_policy(&app, "refunds.create").await["default"], true);
}

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
    a_viewer_is_refused_policy_changes_even_with_a_valid_form,
    policy_forms_without_the_sessions_csrf_token_are_refused,
    validation_errors_are_the_apis_and_shown_beside_their_field,
    a_new_class_needs_a_valid_name,
    an_admin_saves_a_policy_and_the_api_answers_it,
    reset_returns_the_class_to_the_defaults,
    an_admin_adds_a_policy_for_a_class_not_used_yet,
    a_tenant_never_sees_or_changes_another_tenants_policies,
);
