//! Bad input is the caller's mistake, answered 400/403 with a code before
//! anything reaches the database, and nothing stored changes.

use idemkey_api::auth::Role;
use idemkey_tests::TestApp;
use serde_json::json;

const OP: &str = "charges.create";

idemkey_tests::on_every_backend!(
    a_caller_who_may_not_resolve_is_refused_before_the_body_is_read,
    out_of_range_list_parameters_are_bad_requests,
    outcome_headers_that_could_inject_others_are_refused,
);

async fn a_caller_who_may_not_resolve_is_refused_before_the_body_is_read(app: TestApp) {
    app.claim(OP, "k1", json!({"a": 1}))
        .await
        .assert(201, "claimed");
    // Not even JSON: read first, it would be a 400.
    let body = "not json";
    let viewer = app.token_with(&[Role::Viewer]);
    let answer = app
        .client
        .post(format!("{}/resolve", app.key_url(OP, "k1")))
        .bearer_auth(viewer)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request");
    let answer = idemkey_tests::app::Answer::from(answer).await;

    answer.assert(403, "forbidden");
    app.lookup(OP, "k1").await.assert(200, "in_progress");
}

async fn out_of_range_list_parameters_are_bad_requests(app: TestApp) {
    let get = |query: &'static str| {
        let app = &app;
        async move {
            app.request(reqwest::Method::GET, &format!("/v1/keys?{query}"))
                .await
        }
    };
    get("older_than=300000000d")
        .await
        .assert(400, "invalid_query");
    // [micros far past the year 9999, "op", "k"], base64url.
    get("cursor=Wzk5OTk5OTk5OTk5OTk5OTk5OSwib3AiLCJrIl0")
        .await
        .assert(400, "invalid_query");
    get("older_than=36500d").await.assert(200, "");
}

async fn outcome_headers_that_could_inject_others_are_refused(app: TestApp) {
    let owner = app.claim(OP, "k1", json!({"a": 1})).await.owner_token();
    for headers in [
        json!({"x-a": "b\r\nset-cookie: s=1"}),
        json!({"x-a\r\nx-b": "c"}),
        json!({"x-a": "nul\u{0}"}),
    ] {
        let outcome = json!({"status_code": 201, "headers": headers});
        app.complete(OP, "k1", &owner, outcome)
            .await
            .assert(400, "invalid_outcome");
    }
    app.lookup(OP, "k1").await.assert(200, "in_progress");
    app.complete(
        OP,
        "k1",
        &owner,
        json!({"status_code": 201, "headers": {"x-a": "b"}}),
    )
    .await
    .assert(200, "completed");
}
