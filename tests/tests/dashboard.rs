//! The dashboard's pages over real HTTP, as a browser with JavaScript off
//! uses them: usage figures after real claims, stuck keys, classes and
//! storage, and tenant isolation. Admin actions on keys are in
//! `dashboard_actions.rs`, the policy editor in `dashboard_classes.rs`,
//! sessions and headers in `dashboard_session.rs`.

use idemkey_api::auth::Role;
use idemkey_tests::dashboard::fixtures::{admin, figure, quarantined_key, viewer};
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::json;

const OP: &str = "charges.create";

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
    // The replay rate and p99 latency as lines over the same buckets.
    page.assert_contains("<figcaption>Replay rate</figcaption>")
        .assert_contains("<figcaption>p99 claim latency</figcaption>");
    assert_eq!(page.text.matches("<path class=\"series\" d=\"M").count(), 2);
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
        .assert_contains("defaults");
    // Policies are the admins', on the dashboard as in the API.
    assert!(!classes.text.contains("take over"), "{}", classes.text);
    let as_viewer = app
        .client
        .get(format!("{}/v1/operation-classes/{OP}", app.address))
        .bearer_auth(viewer(&app))
        .send()
        .await
        .expect("request");
    assert_eq!(as_viewer.status(), 403);
    let admin = Visitor::signed_in(&app, &admin(&app)).await;
    admin
        .get("/dashboard/classes")
        .await
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

// ---- tenancy ----

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

on_every_backend!(
    usage_is_counted_and_shown_after_a_flush,
    usage_from_two_nodes_adds_up,
    stuck_keys_classes_and_storage_show_the_tenants_records,
    a_viewer_never_sees_another_tenants_keys_or_usage,
);
