//! `GET /openapi.json` over real HTTP, checked against the server that serves
//! it (SPEC section 9): the document's paths and methods are exactly the
//! routes the API registers (`idemkey_api::routes::ROUTES`, the table
//! `configure` is generated from), its security and `x-roles` are what the
//! server enforces (the `/v1` calls and `/metrics` need a token), its `ErrorCode` enum is every `code` the source can
//! emit, and live answers carry exactly the members their schemas name.

use std::collections::BTreeSet;
use std::path::Path;

use idemkey_api::auth::Role;
use idemkey_api::routes::ROUTES;
use idemkey_tests::app::Answer;
use idemkey_tests::TestApp;
use reqwest::Method;
use serde_json::Value;

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

async fn document(app: &TestApp) -> Value {
    let response = app
        .client
        .get(format!("{}/openapi.json", app.address))
        .send()
        .await
        .expect("request");
    let answer = Answer::from(response).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(
        answer.content_type.starts_with("application/json"),
        "{}",
        answer.content_type
    );
    answer.json()
}

/// Every (method, path) the document describes, with its operation object.
fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let paths = doc["paths"].as_object().expect("paths");
    let mut found = Vec::new();
    for (path, item) in paths {
        for method in METHODS {
            if let Some(op) = item.get(method) {
                found.push((method.to_owned(), path.clone(), op));
            }
        }
    }
    found
}

/// Follows a local `$ref` (`#/components/…`) to what it names.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(pointer) => {
            let target = pointer.strip_prefix('#').expect("local $ref");
            resolve(
                doc,
                doc.pointer(target).unwrap_or_else(|| panic!("{pointer}")),
            )
        }
        None => value,
    }
}

/// A concrete path for a template, with harmless sample values.
fn sample_path(template: &str) -> String {
    template
        .replace("{operation}", "charges.create")
        .replace("{key}", "openapi-probe")
        .replace("{step}", "database")
}

/// Sends `method` to `path` with `token` (or none) and, for PUT and POST, an
/// empty JSON object: enough to pass routing and authorization, never enough
/// to change a key.
async fn probe(app: &TestApp, method: &str, path: &str, token: Option<&str>) -> Answer {
    let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
    let has_body = method == Method::POST || method == Method::PUT;
    let mut request = app
        .client
        .request(method, format!("{}{}", app.address, sample_path(path)));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if has_body {
        request = request.body("{}");
    }
    Answer::from(request.send().await.expect("request")).await
}

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
    let registered: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|r| (r.method.to_owned(), r.path.to_owned()))
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
    for route in ROUTES {
        let answer = probe(&app, route.method, route.path, Some(&app.token)).await;
        assert!(
            !is_no_route(&answer),
            "{route:?} is not routed: {}",
            answer.text
        );
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
async fn answers_carry_exactly_the_members_their_schemas_document() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let request = serde_json::json!({"amount": "25.00"});
    let outcome = serde_json::json!({"status_code": 201, "body": {"charge": "ch_1"}});

    let claimed = app.claim("charges.create", "k1", request.clone()).await;
    let owner = claimed.owner_token();
    let completed = app.complete("charges.create", "k1", &owner, outcome).await;
    let replay = app.claim("charges.create", "k1", request.clone()).await;
    let lookup = app.lookup("charges.create", "k1").await;
    let reused = app
        .claim("charges.create", "k1", serde_json::json!(1))
        .await;
    app.claim("charges.create", "k2", request.clone())
        .await
        .assert(201, "claimed");
    let in_progress = app.claim("charges.create", "k2", request.clone()).await;
    app.expire_lease("k2").await;
    let recovering = app.claim("charges.create", "k2", request.clone()).await;
    let step = send(
        &app,
        Method::PUT,
        "/v1/keys/charges.create/k2/steps/database",
        serde_json::json!({"owner_token": recovering.owner_token(), "provider_ref": "db-1"}),
    )
    .await;
    let quarantined = app
        .call(
            "charges.create",
            "k2",
            "quarantine",
            serde_json::json!({"owner_token": recovering.owner_token(), "reason": "unsure"}),
        )
        .await;
    let k3 = app.claim("charges.create", "k3", request).await;
    let released = app.release("charges.create", "k3", &k3.owner_token()).await;
    let page = app.request(Method::GET, "/v1/keys").await;
    let policy = app.get_class("charges.create").await;

    for (answer, status, schema) in [
        (&claimed, 201, "Claimed"),
        (&completed, 200, "Record"),
        (&replay, 200, "Replay"),
        (&lookup, 200, "Record"),
        (&reused, 422, "Problem"),
        (&in_progress, 409, "InProgressProblem"),
        (&recovering, 200, "Recovering"),
        (&step, 200, "Record"),
        (&quarantined, 200, "Record"),
        (&released, 200, "Released"),
        (&page, 200, "KeyPage"),
        (&policy, 200, "Policy"),
    ] {
        assert_eq!(answer.status, status, "{schema}: {}", answer.text);
        assert_members(&doc, schema, &answer.json());
    }
    for item in page.json()["items"].as_array().expect("items") {
        assert_members(&doc, "KeyItem", item);
    }
    for event in lookup.json()["history"].as_array().expect("history") {
        assert_members(&doc, "HistoryEvent", event);
    }
}

async fn send(app: &TestApp, method: Method, path: &str, body: Value) -> Answer {
    let request = app
        .client
        .request(method, format!("{}{path}", app.address))
        .bearer_auth(&app.token)
        .json(&body);
    Answer::from(request.send().await.expect("request")).await
}

/// Every member of `value` is a property of schema `name` (or of the schemas
/// it is `allOf`), and every required property is present.
#[track_caller]
fn assert_members(doc: &Value, name: &str, value: &Value) {
    let mut properties = BTreeSet::new();
    let mut required = BTreeSet::new();
    let mut pending = vec![&doc["components"]["schemas"][name]];
    while let Some(schema) = pending.pop() {
        let schema = resolve(doc, schema);
        pending.extend(schema["allOf"].as_array().into_iter().flatten());
        properties.extend(
            schema["properties"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, _)| k.clone()),
        );
        required.extend(
            schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|r| r.as_str().unwrap_or_default().to_owned()),
        );
    }
    assert!(!properties.is_empty(), "schema {name} has properties");
    let members: BTreeSet<String> = value
        .as_object()
        .expect("an object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        members.difference(&properties).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "{name}: undocumented members in {value}"
    );
    assert_eq!(
        required.difference(&members).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "{name}: required members missing in {value}"
    );
}

#[tokio::test]
async fn every_error_code_the_source_can_emit_is_in_the_document() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let error_code = &doc["components"]["schemas"]["ErrorCode"];
    let documented: BTreeSet<String> = error_code["enum"]
        .as_array()
        .expect("ErrorCode enum")
        .iter()
        .map(|c| c.as_str().expect("code").to_owned())
        .collect();

    let emitted = codes_in_source(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../api/src"));

    assert!(emitted.len() > 20, "the scan found codes: {emitted:?}");
    assert_eq!(
        emitted.difference(&documented).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "emitted but not documented"
    );
    assert_eq!(
        documented.difference(&emitted).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "documented but never emitted"
    );
    let table = error_code["description"].as_str().unwrap_or_default();
    for code in &documented {
        assert!(
            table.contains(&format!("| `{code}` |")),
            "the ErrorCode table explains {code}"
        );
    }
}

/// The string literals the API's source passes as a problem `code`: the
/// first argument of `bad_request(…)`/`BadRequest(…)`, a `code: "…"` member
/// (`TooLarge`, `Conflict`), and the `=> "…"` arms in `error.rs` and
/// `routes/` (`ApiError::code`, and body reading, which picks its code in a
/// match). A new way of building an `ApiError` with a code needs a pattern
/// here.
fn codes_in_source(dir: &Path) -> BTreeSet<String> {
    let mut codes = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("source directory") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            codes.extend(codes_in_source(&path));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source file");
        let mut markers = vec!["bad_request(", "BadRequest(", "code:"];
        let unix = path.to_string_lossy().replace('\\', "/");
        if unix.ends_with("/error.rs") && !unix.contains("/auth/") || unix.contains("/routes/") {
            markers.push("=>");
        }
        for marker in markers {
            codes.extend(literals_after(&text, marker));
        }
    }
    codes
}

/// Each `"snake_case"` literal that directly follows `marker` (whitespace
/// aside).
fn literals_after<'a>(text: &'a str, marker: &'a str) -> impl Iterator<Item = String> + 'a {
    text.match_indices(marker).filter_map(move |(at, _)| {
        let rest = text[at + marker.len()..].trim_start().strip_prefix('"')?;
        let literal = &rest[..rest.find('"')?];
        let is_code = literal.starts_with(|c: char| c.is_ascii_lowercase())
            && literal.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        is_code.then(|| literal.to_owned())
    })
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
