//! `GET/PUT/DELETE /v1/operation-classes/{operation}` over real HTTP: the
//! canonical form, defaults, roles, validation and tenant isolation (SPEC
//! section 6). What a policy does to claims is in `class_policies.rs` and
//! `class_fingerprints.rs`.

use idemkey_api::auth::Role;
use idemkey_tests::app::Answer;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use reqwest::Method;
use serde_json::{json, Value};

const OP: &str = "charges.create";

fn defaults() -> Value {
    json!({
        "replay_window": "1d", "hot_retention": "1h", "lease": "30s", "max_lease": "1h",
        "max_wait": "10s", "max_outcome_bytes": 1_048_576, "on_lease_expiry": "takeover",
        "fingerprint": {"include": [], "exclude": [], "decimal_fields": []},
        "default": true
    })
}

#[track_caller]
fn ok(answer: &Answer) -> Value {
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(answer.content_type.starts_with("application/json"));
    answer.json()
}

async fn a_class_never_set_answers_the_defaults(app: TestApp) {
    let answer = app.get_class(OP).await;

    assert_eq!(ok(&answer), defaults());
}

async fn put_sets_the_whole_policy_and_answers_it_in_canonical_form(app: TestApp) {
    let policy = json!({
        "replay_window": "48h", "lease": "90s", "on_lease_expiry": "quarantine",
        "fingerprint": {"exclude": ["/request_id"], "decimal_fields": ["/amount"]}
    });

    let put = app.put_class(OP, policy).await;

    let expected = json!({
        "replay_window": "2d", "hot_retention": "1h", "lease": "90s", "max_lease": "1h",
        "max_wait": "10s", "max_outcome_bytes": 1_048_576, "on_lease_expiry": "quarantine",
        "fingerprint": {"include": [], "exclude": ["/request_id"], "decimal_fields": ["/amount"]},
        "default": false
    });
    assert_eq!(ok(&put), expected);
    assert_eq!(ok(&app.get_class(OP).await), expected);

    // A second PUT replaces the whole policy: what it leaves out is the default
    // again, not what the first PUT said.
    let again = app.put_class(OP, json!({"max_wait": "5s"})).await;
    let mut expected = defaults();
    expected["max_wait"] = json!("5s");
    expected["default"] = json!(false);
    assert_eq!(ok(&again), expected);
    assert_eq!(ok(&app.get_class(OP).await), expected);
}

async fn a_missing_hot_retention_is_one_hour_capped_at_the_window(app: TestApp) {
    let short = app.put_class(OP, json!({"replay_window": "10m"})).await;
    let long = app
        .put_class("refunds.create", json!({"replay_window": "7d"}))
        .await;

    assert_eq!(ok(&short)["hot_retention"], "10m");
    assert_eq!(ok(&long)["hot_retention"], "1h");
}

async fn delete_returns_the_class_to_the_defaults(app: TestApp) {
    ok(&app.put_class(OP, json!({"replay_window": "1h"})).await);

    let deleted = app.delete_class(OP).await;

    assert_eq!(ok(&deleted), defaults());
    assert_eq!(ok(&app.get_class(OP).await), defaults());
    // Deleting a class that has no policy is fine too.
    assert_eq!(ok(&app.delete_class(OP).await), defaults());
}

async fn a_policy_read_with_get_can_be_sent_back_unchanged(app: TestApp) {
    let read = ok(&app.get_class(OP).await);

    let put = app.put_class(OP, read.clone()).await;

    let mut expected = read;
    expected["default"] = json!(false);
    assert_eq!(ok(&put), expected);
}

async fn only_a_tenant_admin_may_read_set_or_reset_a_class(app: TestApp) {
    let policy = json!({"replay_window": "1h"}).to_string();
    for roles in [
        &[Role::Client][..],
        &[Role::Viewer],
        &[Role::Client, Role::Viewer],
        &[],
    ] {
        let token = app.token_with(roles);
        for method in [Method::GET, Method::PUT, Method::DELETE] {
            let answer = app
                .class_call(&token, method.clone(), OP, Some(policy.clone()))
                .await;
            answer.assert(403, "forbidden");
        }
    }
    let anonymous = app
        .client
        .get(app.class_url(OP))
        .send()
        .await
        .expect("request");
    Answer::from(anonymous).await.assert(401, "unauthorized");

    assert_eq!(ok(&app.get_class(OP).await), defaults(), "nothing changed");
}

async fn each_invalid_value_is_invalid_policy_naming_its_field_and_changes_nothing(app: TestApp) {
    let set = ok(&app.put_class(OP, json!({"replay_window": "2h"})).await);
    let cases = [
        (json!({"replay_window": "1 day"}), "replay_window"),
        (json!({"replay_window": "500ms"}), "replay_window"),
        (json!({"replay_window": 3600}), "replay_window"),
        (json!({"replay_window": "1000d"}), "replay_window"),
        (
            json!({"replay_window": "1h", "hot_retention": "2h"}),
            "hot_retention must not exceed replay_window",
        ),
        (json!({"hot_retention": "0s"}), "hot_retention"),
        (json!({"lease": "2h"}), "lease must not exceed max_lease"),
        (json!({"lease": "0s"}), "lease"),
        (json!({"max_lease": "2d"}), "max_lease"),
        (json!({"max_wait": "2m"}), "max_wait"),
        (json!({"max_outcome_bytes": 0}), "max_outcome_bytes"),
        (json!({"max_outcome_bytes": 8_388_609}), "max_outcome_bytes"),
        (json!({"max_outcome_bytes": "1MiB"}), "max_outcome_bytes"),
        (json!({"on_lease_expiry": "retry"}), "on_lease_expiry"),
        (
            json!({"fingerprint": {"include": ["amount"]}}),
            "fingerprint.include",
        ),
        (
            json!({"fingerprint": {"exclude": ["/a~x"]}}),
            "fingerprint.exclude",
        ),
        (
            json!({"fingerprint": {"decimal_fields": [7]}}),
            "fingerprint.decimal_fields",
        ),
        (json!({"fingerprint": {"salt": "x"}}), "fingerprint.salt"),
        (json!({"fingerprint": []}), "fingerprint"),
        (json!({"replay_windw": "1h"}), "replay_windw"),
        (json!({"default": "no"}), "default"),
    ];

    for (body, field) in cases {
        let answer = app.put_class(OP, body.clone()).await;
        answer.assert(400, "invalid_policy");
        let detail = answer.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(detail.starts_with(field), "{body}: {detail}");
    }
    assert_eq!(ok(&app.get_class(OP).await), set, "nothing changed");
}

async fn a_body_that_is_not_a_policy_object_is_refused(app: TestApp) {
    let admin = app.admin_token();
    let put = |body: String| app.class_call(&admin, Method::PUT, OP, Some(body));

    put("{".into()).await.assert(400, "invalid_json");
    put("".into()).await.assert(400, "invalid_json");
    put("[]".into()).await.assert(400, "invalid_body");
    put(r#"{"lease": "2s"} {}"#.into())
        .await
        .assert(400, "invalid_json");
    let huge = json!({"fingerprint": {"exclude": ["/x".repeat(40_000)]}}).to_string();
    put(huge).await.assert(413, "payload_too_large");
    app.class_call(&admin, Method::GET, "Charges", None)
        .await
        .assert(400, "invalid_operation");
    let wrong_method = app.class_call(&admin, Method::POST, OP, None).await;
    assert!(
        [404, 405].contains(&wrong_method.status)
            && wrong_method
                .content_type
                .starts_with("application/problem+json"),
        "{wrong_method:?}"
    );
    assert_eq!(ok(&app.get_class(OP).await), defaults(), "nothing changed");
}

async fn another_tenants_classes_are_invisible_and_untouchable(app: TestApp) {
    let set = ok(&app.put_class(OP, json!({"replay_window": "2h"})).await);
    let other_admin = token(&fresh_tenant(), &[Role::Admin]);

    let theirs = app.class_call(&other_admin, Method::GET, OP, None).await;
    let reset = app.class_call(&other_admin, Method::DELETE, OP, None).await;

    assert_eq!(ok(&theirs), defaults());
    assert_eq!(ok(&reset), defaults());
    assert_eq!(ok(&app.get_class(OP).await), set, "A's class is untouched");
}

idemkey_tests::on_every_backend!(
    a_class_never_set_answers_the_defaults,
    put_sets_the_whole_policy_and_answers_it_in_canonical_form,
    a_missing_hot_retention_is_one_hour_capped_at_the_window,
    delete_returns_the_class_to_the_defaults,
    a_policy_read_with_get_can_be_sent_back_unchanged,
    only_a_tenant_admin_may_read_set_or_reset_a_class,
    each_invalid_value_is_invalid_policy_naming_its_field_and_changes_nothing,
    a_body_that_is_not_a_policy_object_is_refused,
    another_tenants_classes_are_invisible_and_untouchable,
);
