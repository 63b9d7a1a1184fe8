//! `GET /openapi.json` over real HTTP, checked against the server that serves
//! it (SPEC section 9): the document's paths and methods are exactly the
//! routes the API registers (`idemkey_api::routes::routes()`, read from
//! the document `configure` generates while it registers them), its security and `x-roles` are what the
//! server enforces (the `/v1` calls and `/metrics` need a token), every
//! error is a problem document, and every call takes and answers
//! `X-Request-Id`. The schemas' members and error codes are checked in
//! openapi_members.rs.

use std::collections::BTreeSet;

use idemkey_api::auth::Role;
use idemkey_api::routes::routes;
use idemkey_tests::app::Answer;
use idemkey_tests::openapi::{document, operations, probe, resolve, METHODS};
use idemkey_tests::TestApp;

#[tokio::test]
async fn the_document_describes_exactly_the_routes_the_server_registers() {
    let app = TestApp::spawn().await;

    let doc = document(&app).await;

    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(method, path, _)| (method, path))
        .collect();
    let registered: BTreeSet<(String, String)> = routes()
        .into_iter()
        .map(|r| (r.method.to_owned(), r.path))
        .collect();
    assert_eq!(
        documented.difference(&registered).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "documented but not registered"
    );
    assert_eq!(
        registered.difference(&documented).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "registered but not documented"
    );
    // The table is what the running server routes: no entry is a `no_route`.
    for route in routes() {
        let answer = probe(&app, route.method, &route.path, Some(&app.token)).await;
        assert!(
            !is_no_route(&answer),
            "{route:?} is not routed: {}",
            answer.text
        );
    }
}

/// The other half of "exactly": on a documented path, a method the document
/// does not name is not served (the app's `no_route`, never a handler).
#[tokio::test]
async fn a_method_the_document_does_not_name_is_not_served() {
    let app = TestApp::spawn().await;
    let registered = routes();
    let paths: BTreeSet<&str> = registered.iter().map(|r| r.path.as_str()).collect();

    for path in paths {
        for method in METHODS {
            if registered
                .iter()
                .any(|r| r.path == path && r.method == method)
            {
                continue;
            }
            let answer = probe(&app, method, path, Some(&app.token)).await;
            if method == "head" {
                // A HEAD answer has no body to name its code.
                assert_eq!(answer.status, 404, "{method} {path}");
                continue;
            }
            assert!(
                is_no_route(&answer),
                "{method} {path} is served: {}",
                answer.text
            );
        }
    }
}

fn is_no_route(answer: &Answer) -> bool {
    answer.content_type.starts_with("application/problem+json")
        && answer.json()["code"] == "no_route"
}

#[tokio::test]
async fn exactly_the_v1_calls_need_a_token_as_the_document_says() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let global_security = &doc["security"];
    assert!(
        global_security.as_array().is_some_and(|s| !s.is_empty()),
        "bearer by default"
    );

    for (method, path, op) in operations(&doc) {
        let documented = op.get("security").unwrap_or(global_security);
        let needs_token = documented.as_array().is_some_and(|s| !s.is_empty());

        let answer = probe(&app, &method, &path, None).await;

        let refused = answer.status == 401;
        assert_eq!(refused, needs_token, "{method} {path}: {}", answer.text);
        let protected = path.starts_with("/v1/") || path == "/metrics";
        assert_eq!(needs_token, protected, "{method} {path}");
        if refused {
            answer.assert(401, "unauthorized");
        }
        if needs_token {
            for status in ["401", "403", "429"] {
                let documented = op["responses"].get(status).is_some();
                assert!(documented, "{method} {path} documents {status}");
            }
        }
    }
}

#[tokio::test]
async fn the_roles_in_the_document_are_the_roles_the_server_enforces() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;

    let global_security = &doc["security"];
    for (method, path, op) in operations(&doc) {
        let security = op.get("security").unwrap_or(global_security);
        if security.as_array().is_none_or(|s| s.is_empty()) {
            continue; // no token, so no roles
        }
        let roles: Vec<&str> = op["x-roles"]
            .as_array()
            .unwrap_or_else(|| panic!("{method} {path} has no x-roles"))
            .iter()
            .map(|r| r.as_str().expect("role name"))
            .collect();
        let description = op["description"].as_str().unwrap_or_default();
        for role in Role::ALL {
            let name = role.as_str();
            let answer = probe(&app, &method, &path, Some(&app.token_with(&[role]))).await;

            let allowed = roles.contains(&name);
            assert_eq!(
                answer.status != 403,
                allowed,
                "{method} {path} as {name}: {}",
                answer.text
            );
            if allowed {
                assert!(
                    description.contains(&format!("`{name}`")),
                    "{method} {path}: the description names role {name}"
                );
            }
        }
    }
}

#[tokio::test]
async fn every_documented_error_is_a_problem_document() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;

    for (method, path, op) in operations(&doc) {
        let responses = op["responses"].as_object().expect("responses");
        for (status, response) in responses {
            let response = resolve(&doc, response);
            let content = response["content"].as_object();
            if status.as_str() >= "400" {
                let types: Vec<&String> = content.expect("error content").keys().collect();
                assert_eq!(
                    types,
                    ["application/problem+json"],
                    "{method} {path} {status}"
                );
            }
        }
    }
}

#[tokio::test]
async fn every_response_documents_the_request_id_and_every_call_accepts_one() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;

    for (method, path, op) in operations(&doc) {
        let takes_id = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| resolve(&doc, p))
            .any(|p| p["in"] == "header" && p["name"] == "X-Request-Id");
        assert!(takes_id, "{method} {path} accepts X-Request-Id");
        for (status, response) in op["responses"].as_object().expect("responses") {
            let response = resolve(&doc, response);
            assert!(
                response["headers"].get("X-Request-Id").is_some(),
                "{method} {path} {status} documents X-Request-Id"
            );
        }
    }
}
