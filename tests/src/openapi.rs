//! Reading the OpenAPI document a test server serves (`GET /openapi.json`)
//! and probing the routes it names: shared by `tests/tests/openapi*.rs`.

use reqwest::Method;
use serde_json::Value;

use crate::app::Answer;
use crate::TestApp;

pub const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The document the server serves (200, JSON).
pub async fn document(app: &TestApp) -> Value {
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
pub fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
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
pub fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
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
pub fn sample_path(template: &str) -> String {
    template
        .replace("{operation}", "charges.create")
        .replace("{key}", "openapi-probe")
        .replace("{step}", "database")
}

/// Sends `method` to `path` with `token` (or none) and, for PUT and POST, an
/// empty JSON object: enough to pass routing and authorization, never enough
/// to change a key.
pub async fn probe(app: &TestApp, method: &str, path: &str, token: Option<&str>) -> Answer {
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
