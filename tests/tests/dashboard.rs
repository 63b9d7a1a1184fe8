//! The dashboard's pages over real HTTP, as a browser with JavaScript off
//! uses them: usage figures after real claims, stuck keys, tenant isolation,
//! admin actions, CSRF on admin forms and validation errors. Sessions and
//! headers are in `dashboard_session.rs`.

use idemkey_api::auth::Role;
use idemkey_tests::dashboard::{Page, Visitor};
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::{on_every_backend, TestApp};
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

/// The figure under `label` on the overview (`<dt>label</dt><dd>value</dd>`).
#[track_caller]
fn figure(page: &Page, label: &str) -> String {
    let marker = format!("<dt>{label}</dt><dd>");
    let start = page
        .text
        .find(&marker)
        .unwrap_or_else(|| panic!("no figure {label:?}:\n{}", page.text))
        + marker.len();
    let end = page.text[start..].find("</dd>").expect("closing dd");
    page.text[start..start + end].to_owned()
}

// ---- usage figures ----

async fn usage_is_counted_and_shown_after_a_flush(app: TestApp) {
    // Arrange: two new claims, one completed and replayed twice, one key
    // reuse, one in-progress collision, one release.
    let a = app
        .claim(OP, "a", json!({"n": 1}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.complete(OP, "a", &a, json!({"status_code": 201}))
        .await
        .assert(200, "completed");
    app.claim(OP, "a", json!({"n": 1}))
        .await
        .assert(200, "completed");
    app.claim(OP, "a", json!({"n": 1}))
        .await
        .assert(200, "completed");
    app.claim(OP, "a", json!({"n": 2}))
        .await
        .assert(422, "key_reused");
    let b = app
        .claim(OP, "b", json!({"n": 1}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.claim(OP, "b", json!({"n": 1}))
        .await
        .assert(409, "in_progress");
    app.release(OP, "b", &b).await.assert(200, "released");

    // Act
    app.flush_usage().await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    let page = visitor.get("/dashboard").await;

    // Assert
    assert_eq!(page.status, 200);
    page.assert_contains(OP);
    assert_eq!(figure(&page, "New claims"), "2");
    assert_eq!(figure(&page, "Replays"), "2");
    assert_eq!(figure(&page, "Key reuse rejected"), "1");
    assert_eq!(figure(&page, "In-progress collisions"), "1");
    assert_eq!(figure(&page, "Releases"), "1");
    assert_eq!(figure(&page, "Replay rate"), "33.3%"); // 2 of 6 claim calls
    assert!(figure(&page, "p99 claim latency").starts_with('≤'));
    page.assert_contains("2 new claims and 2 replays over the last hour");
    page.assert_contains(r#"class="bar-claims""#);
    for range in ["day", "week"] {
        let page = visitor.get(&format!("/dashboard?range={range}")).await;
        assert_eq!(figure(&page, "New claims"), "2", "{range}");
    }
}

async fn usage_from_two_nodes_adds_up(app: TestApp) {
    let other = app.spawn_beside().await;
    let other_token = token(&app.tenant, &[Role::Client]);
    app.claim(OP, "x", json!({})).await.assert(201, "claimed");
    other
        .call_as(&other_token, OP, "y", "claim", json!({"request": {}}))
        .await
        .assert(201, "claimed");
    other
        .call_as(&other_token, OP, "x", "claim", json!({"request": {}}))
        .await
        .assert(409, "in_progress");
    app.flush_usage().await;
    other.flush_usage().await;
    // A second flush of the same minute adds to the row, never replaces it.
    app.claim(OP, "z", json!({})).await.assert(201, "claimed");
    app.flush_usage().await;

    let page = Visitor::signed_in(&other, &viewer(&app))
        .await
        .get("/dashboard")
        .await;
    assert_eq!(figure(&page, "New claims"), "3");
    assert_eq!(figure(&page, "In-progress collisions"), "1");
}

#[tokio::test]
async fn an_empty_tenant_sees_what_to_do_next() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    visitor
        .get("/dashboard")
        .await
        .assert_contains("No claims yet");
    visitor
        .get("/dashboard/keys")
        .await
        .assert_contains("Nothing is stuck");
    visitor
        .get("/dashboard/classes")
        .await
        .assert_contains("No operation classes yet");
    visitor
        .get("/dashboard/storage")
        .await
        .assert_contains("No records stored");
    assert_eq!(visitor.get("/dashboard?range=year").await.status, 400);
}

// ---- stuck keys, classes, storage ----

async fn stuck_keys_classes_and_storage_show_the_tenants_records(app: TestApp) {
    quarantined_key(&app, "q-1").await;
    app.claim(OP, "lost", json!({}))
        .await
        .assert(201, "claimed");
    app.expire_lease("lost").await;
    app.claim("emails.send", "fine", json!({}))
        .await
        .assert(201, "claimed");
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    let stuck = visitor.get("/dashboard/keys").await;
    stuck
        .assert_contains("q-1")
        .assert_contains("provider timed out")
        .assert_contains("lost")
        .assert_contains("Lease expired (1)")
        .assert_contains("Quarantined (1)");
    assert!(!stuck.text.contains(">fine<"), "a fresh claim is not stuck");
    let quarantined = visitor.get("/dashboard/keys?state=quarantined").await;
    quarantined.assert_contains("q-1");
    assert!(!quarantined.text.contains(">lost<"));
    let long = visitor
        .get("/dashboard/keys?state=in_progress&older_than=1s")
        .await;
    assert_eq!(long.status, 200);
    assert_eq!(visitor.get("/dashboard/keys?state=stuck").await.status, 400);

    let detail = visitor.get("/dashboard/keys/charges.create/q-1").await;
    detail
        .assert_contains("Quarantined")
        .assert_contains("eff_")
        .assert_contains("quarantined") // history event
        .assert_contains("Only an admin can do that");
    assert!(
        !detail.text.contains("Store outcome"),
        "no forms for viewers"
    );

    let classes = visitor.get("/dashboard/classes").await;
    classes
        .assert_contains("charges.create")
        .assert_contains("emails.send")
        .assert_contains("1d")
        .assert_contains("take over");

    let storage = visitor.get("/dashboard/storage").await;
    storage
        .assert_contains("Archived records")
        .assert_contains("none waiting · none waiting");
    assert!(
        storage.text.contains(">3<"),
        "three hot records: {}",
        storage.text
    );
}

// ---- tenancy and admin actions ----

async fn a_viewer_never_sees_another_tenants_keys_or_usage(app: TestApp) {
    quarantined_key(&app, "secret-key").await;
    app.flush_usage().await;
    let stranger = token(&fresh_tenant(), &[Role::Admin]);
    let visitor = Visitor::signed_in(&app, &stranger).await;

    let overview = visitor.get("/dashboard").await;
    overview.assert_contains("No claims yet");
    assert!(!overview.text.contains("charges.create</h2>"));
    let stuck = visitor.get("/dashboard/keys").await;
    assert!(!stuck.text.contains("secret-key"));
    let detail = visitor
        .get("/dashboard/keys/charges.create/secret-key")
        .await;
    assert_eq!(detail.status, 404, "another tenant's key is not found");
    let csrf = overview.csrf();
    let forged = visitor
        .post(
            "/dashboard/keys/charges.create/secret-key/resolve",
            &[("csrf", &csrf), ("action", "release")],
        )
        .await;
    assert_eq!(forged.status, 404);
    app.lookup(OP, "secret-key")
        .await
        .assert(200, "quarantined");
    let classes = visitor.get("/dashboard/classes").await;
    assert!(!classes.text.contains("charges.create</a>"));
    let storage = visitor.get("/dashboard/storage").await;
    assert!(!storage.text.contains("charges.create</th>"));
}

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
    usage_is_counted_and_shown_after_a_flush,
    usage_from_two_nodes_adds_up,
    stuck_keys_classes_and_storage_show_the_tenants_records,
    a_viewer_never_sees_another_tenants_keys_or_usage,
    a_viewer_is_refused_admin_actions_even_with_a_valid_form,
    admin_forms_without_the_sessions_csrf_token_are_refused,
    resolve_shows_validation_errors_in_the_form,
    an_admin_resolves_a_quarantined_key_with_an_outcome,
    an_admin_releases_a_key_whose_lease_ran_out,
);
