//! The dashboard's class policy editor refusing what it must, over real
//! HTTP as a browser with JavaScript off: viewers and forms without the
//! session's CSRF token are refused, and validation errors are shown beside
//! their fields in the API's own words. Saving, resetting and tenant
//! isolation are in `dashboard_classes_saving.rs`.

use idemkey_tests::dashboard::fixtures::{admin, viewer};
use idemkey_tests::dashboard::policy_editor::{admin_on_edit_page, api_policy, form, EDIT};
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::{json, Value};

const OP: &str = "charges.create";

/// Text as askama escapes it inside HTML.
fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
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

on_every_backend!(
    a_viewer_is_refused_policy_changes_even_with_a_valid_form,
    policy_forms_without_the_sessions_csrf_token_are_refused,
    validation_errors_are_the_apis_and_shown_beside_their_field,
    a_new_class_needs_a_valid_name,
);
