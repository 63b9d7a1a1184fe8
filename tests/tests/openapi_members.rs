//! The OpenAPI document's schemas against live answers: every answer
//! carries exactly the members its schema names, and the `ErrorCode` enum is
//! every `code` the server can answer with.

use std::collections::BTreeSet;

use idemkey_api::error::ErrorCode;
use idemkey_tests::app::Answer;
use idemkey_tests::openapi::{document, resolve};
use idemkey_tests::TestApp;
use reqwest::Method;
use serde_json::Value;

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
    let admin = app.admin_token();
    let hook =
        serde_json::json!({"url": "http://127.0.0.1:9/", "events": ["stuck"], "stuck_after": "1m"});
    let webhook = app
        .webhook_call(&admin, Method::POST, "charges.create", "", Some(hook))
        .await;
    let webhooks = app
        .webhook_call(&admin, Method::GET, "charges.create", "", None)
        .await;
    let id = webhook.json()["id"].as_str().unwrap_or_default().to_owned();
    let deliveries = app
        .webhook_call(
            &admin,
            Method::GET,
            "charges.create",
            &format!("/{id}/deliveries"),
            None,
        )
        .await;

    for (answer, status, schema) in [
        (&claimed, 201, "Claimed"),
        (&completed, 200, "Record"),
        (&replay, 200, "Replay"),
        (&lookup, 200, "Record"),
        (&reused, 422, "KeyReusedProblem"),
        (&in_progress, 409, "InProgressProblem"),
        (&recovering, 200, "Recovering"),
        (&step, 200, "Record"),
        (&quarantined, 200, "Record"),
        (&released, 200, "Released"),
        (&page, 200, "KeyPage"),
        (&policy, 200, "Policy"),
        (&webhook, 201, "Webhook"),
        (&webhooks, 200, "WebhookList"),
        (&deliveries, 200, "WebhookDeliveries"),
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

/// Every code an answer can carry is an `ErrorCode` (the type allows no
/// other), and the served document lists exactly those, each with the
/// status the server answers it with.
#[tokio::test]
async fn every_error_code_is_in_the_document_with_its_status() {
    let app = TestApp::spawn().await;
    let doc = document(&app).await;
    let error_code = &doc["components"]["schemas"]["ErrorCode"];
    let documented: Vec<&str> = error_code["enum"]
        .as_array()
        .expect("ErrorCode enum")
        .iter()
        .map(|c| c.as_str().expect("code"))
        .collect();
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(documented, codes);
    assert_eq!(
        codes.iter().collect::<BTreeSet<_>>().len(),
        codes.len(),
        "codes are unique"
    );
    let table = error_code["description"].as_str().unwrap_or_default();
    for code in ErrorCode::ALL {
        let row = format!("| `{}` | {} |", code.as_str(), code.status().as_u16());
        assert!(table.contains(&row), "the ErrorCode table has {row}");
        assert!(
            (400..600).contains(&code.status().as_u16()),
            "{code:?} is an error status"
        );
    }
}
