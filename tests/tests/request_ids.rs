//! Every answer carries `X-Request-Id` — the caller's when it is visible
//! ASCII of at most 128 characters, else a generated one — and the same id
//! is in every problem document (`request_id`) and in the call's log lines.

use std::collections::HashSet;
use std::time::Duration;

use idemkey_tests::app::test_vars;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::process::ServerProcess;
use idemkey_tests::TestApp;
use reqwest::{Method, Response};
use serde_json::{json, Value};

const ID: &str = "X-Request-Id";

fn id_of(response: &Response) -> String {
    response
        .headers()
        .get(ID)
        .unwrap_or_else(|| panic!("{} has no {ID}", response.url()))
        .to_str()
        .expect("ASCII")
        .to_owned()
}

fn is_generated(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

async fn send(app: &TestApp, method: Method, path: &str, caller_id: Option<&str>) -> Response {
    let mut request = app
        .client
        .request(method, format!("{}{path}", app.address))
        .bearer_auth(&app.token);
    if let Some(id) = caller_id {
        request = request.header(ID, id);
    }
    request.send().await.expect("request")
}

#[tokio::test]
async fn every_answer_carries_a_request_id_and_each_call_gets_its_own() {
    let app = TestApp::spawn_with(|vars| {
        vars.insert("IDEMKEY_METRICS_LISTEN".into(), "127.0.0.1:0".into());
    })
    .await;
    let claim = app
        .client
        .post(format!("{}/claim", app.key_url("charges.create", "k1")))
        .bearer_auth(&app.token)
        .json(&json!({"request": 1}))
        .send()
        .await
        .expect("claim");
    let mut answers = vec![claim];
    for path in [
        "/healthz",
        "/openapi.json",
        "/v1/keys",
        "/v1/keys/charges.create/k1",
        "/v1/keys/charges.create/missing",
        "/no/such/route",
        "/dashboard/sign-in",
        "/dashboard",
        "/metrics",
    ] {
        answers.push(send(&app, Method::GET, path, None).await);
    }
    let private = app.metrics_address.clone().expect("metrics listener");
    answers.push(
        reqwest::get(format!("{private}/metrics"))
            .await
            .expect("scrape"),
    );
    answers.push(
        reqwest::get(format!("{private}/elsewhere"))
            .await
            .expect("404"),
    );

    let ids: Vec<String> = answers.iter().map(id_of).collect();

    for (answer, id) in answers.iter().zip(&ids) {
        assert!(is_generated(id), "{} {id}", answer.url());
    }
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        ids.len(),
        "one id per call: {ids:?}"
    );
}

#[tokio::test]
async fn a_callers_id_is_kept_when_valid_and_replaced_when_not() {
    let app = TestApp::spawn().await;
    let longest = "r".repeat(128);
    let kept = ["req-42", "a/b:c=d~!", longest.as_str()];
    let refused = ["has space", &"r".repeat(129), "ünïcode", ""];

    for id in kept {
        let answer = send(&app, Method::GET, "/v1/keys", Some(id)).await;
        assert_eq!(id_of(&answer), id);
    }
    for id in refused {
        let answer = send(&app, Method::GET, "/v1/keys", Some(id)).await;
        let given = id_of(&answer);
        assert!(
            is_generated(&given),
            "{id:?} replaced by a generated id, got {given:?}"
        );
    }
}

#[tokio::test]
async fn every_problem_document_names_its_request_id() {
    let app = TestApp::spawn().await;
    let mut problems = Vec::new();
    // 401, 403, 404 (a key, a route), 400 (a query, a body).
    problems.push(
        app.client
            .get(format!("{}/v1/keys", app.address))
            .header(ID, "trace-401")
            .send()
            .await
            .expect("401"),
    );
    let viewer = app.token_with(&[idemkey_api::auth::Role::Viewer]);
    problems.push(
        app.client
            .post(format!("{}/claim", app.key_url("charges.create", "k1")))
            .bearer_auth(&viewer)
            .json(&json!({"request": 1}))
            .send()
            .await
            .expect("403"),
    );
    problems.push(send(&app, Method::GET, "/v1/keys/charges.create/missing", None).await);
    problems.push(send(&app, Method::GET, "/v1/nothing-here", Some("trace-404")).await);
    problems.push(send(&app, Method::GET, "/v1/keys?limit=0", None).await);
    problems.push(
        app.client
            .post(format!("{}/claim", app.key_url("charges.create", "k2")))
            .bearer_auth(&app.token)
            .body("{not json")
            .send()
            .await
            .expect("400"),
    );

    let mut statuses = Vec::new();
    for answer in problems {
        let header = id_of(&answer);
        statuses.push(answer.status().as_u16());
        let content_type = answer.headers()["content-type"]
            .to_str()
            .unwrap()
            .to_owned();
        let body: Value = answer.json().await.expect("JSON");
        assert!(
            content_type.starts_with("application/problem+json"),
            "{content_type}"
        );
        assert_eq!(body["request_id"], header.as_str(), "{body}");
        assert!(body["code"].is_string(), "still a problem: {body}");
    }
    assert_eq!(statuses, [401, 403, 404, 404, 400, 400]);
    // A success body is left exactly as it was.
    let ok = send(&app, Method::GET, "/v1/keys", None).await;
    let body: Value = ok.json().await.expect("JSON");
    assert!(body.get("request_id").is_none(), "{body}");
}

#[tokio::test]
async fn the_calls_log_lines_carry_its_request_id() {
    // A real process whose debug lines show why a token was refused.
    let mut vars = test_vars(&idemkey_tests::db::Backend::Sqlite.fresh().await);
    vars.insert("RUST_LOG".into(), "info,idemkey_api=debug".into());
    let server = ServerProcess::start(&vars).await;

    let answer = reqwest::Client::new()
        .get(format!("{}/v1/keys", server.address))
        .bearer_auth("not-a-token")
        .header(ID, "trace-me-7f3a")
        .send()
        .await
        .expect("request");

    assert_eq!(answer.status(), 401);
    assert_eq!(id_of(&answer), "trace-me-7f3a");
    let line = server
        .wait_for_log("token refused", Duration::from_secs(10))
        .await;
    assert!(line.contains("request_id=trace-me-7f3a"), "{line}");
    server.stop().await;
}

#[tokio::test]
async fn a_dashboard_page_carries_a_request_id_too() {
    let app = TestApp::spawn_on(idemkey_tests::db::Backend::Sqlite).await;
    let visitor = Visitor::new(&app);
    let page = visitor.get("/dashboard/sign-in").await;
    assert!(page.header("x-request-id").is_some_and(is_generated));
}
