//! OpenTelemetry export: a real server process configured with the
//! standard `OTEL_EXPORTER_OTLP_ENDPOINT` sends its request spans to a real
//! OTLP/HTTP receiver (started here on a free port, decoding the protobuf
//! with `opentelemetry-proto`'s types), carrying the request ids its
//! answers carried, the route, the status and the tenant — never the
//! token — and flushes them on a graceful stop. With nothing configured,
//! nothing is sent: a listener on the default OTLP/HTTP port sees no
//! connection.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use idemkey_api::auth::Role;
use idemkey_tests::app::test_vars;
use idemkey_tests::db::Backend;
use idemkey_tests::process::ServerProcess;
use idemkey_tests::tokens::{fresh_tenant, token};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::json;

/// Every span the receiver was sent, and the exports' content types.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    content_types: Vec<String>,
}

/// A real OTLP/HTTP traces receiver on a free port; its base URL.
fn receiver() -> (String, Arc<Mutex<Received>>) {
    let received = Arc::new(Mutex::new(Received::default()));
    let data = web::Data::new(received.clone());
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
    let port = listener.local_addr().expect("addr").port();
    let server = HttpServer::new(move || {
        App::new().app_data(data.clone()).route(
            "/v1/traces",
            web::post().to(
                |req: actix_web::HttpRequest,
                 body: web::Bytes,
                 got: web::Data<Arc<Mutex<Received>>>| async move {
                    let export = ExportTraceServiceRequest::decode(body.as_ref())
                        .expect("an OTLP protobuf export");
                    let mut got = got.lock().expect("lock");
                    let content_type = req
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    got.content_types.push(content_type);
                    for resource in export.resource_spans {
                        for scope in resource.scope_spans {
                            got.spans.extend(scope.spans);
                        }
                    }
                    // An empty ExportTraceServiceResponse: full success.
                    HttpResponse::Ok()
                        .content_type("application/x-protobuf")
                        .body(Vec::new())
                },
            ),
        )
    })
    .workers(1)
    .listen(listener)
    .expect("listen")
    .run();
    tokio::spawn(server);
    (format!("http://127.0.0.1:{port}"), received)
}

/// A span attribute's value as text (strings as they are, numbers printed).
fn attribute(span: &Span, key: &str) -> Option<String> {
    let kv = span.attributes.iter().find(|kv| kv.key == key)?;
    match kv.value.as_ref()?.value.as_ref()? {
        AnyValue::StringValue(s) => Some(s.clone()),
        AnyValue::IntValue(n) => Some(n.to_string()),
        other => Some(format!("{other:?}")),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_spans_reach_a_configured_collector_with_their_request_ids() {
    // Arrange: a receiver, and a server exporting to it. The batch delay is
    // long, so the spans can only arrive through the flush on stop.
    let (endpoint, received) = receiver();
    let mut vars: HashMap<String, String> = test_vars(&Backend::Postgres.fresh().await);
    vars.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.clone());
    vars.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "60000".into());
    let server = ServerProcess::start(&vars).await;
    let tenant = fresh_tenant();
    let bearer = token(&tenant, &[Role::Client]);
    let client = reqwest::Client::new();
    let claim_url = format!("{}/v1/keys/orders.create/k-1/claim", server.address);

    // Act: a claim with the caller's request id, a replay-less duplicate
    // with a generated one, and a call with a bad token.
    let first = client
        .post(&claim_url)
        .bearer_auth(&bearer)
        .header("x-request-id", "otlp-test-claim-1")
        .json(&json!({"request": {"n": 1}}))
        .send()
        .await
        .expect("claim");
    assert_eq!(first.status(), 201);
    let second = client
        .post(&claim_url)
        .bearer_auth(&bearer)
        .json(&json!({"request": {"n": 1}}))
        .send()
        .await
        .expect("claim again");
    assert_eq!(second.status(), 409);
    let generated = second.headers()["x-request-id"]
        .to_str()
        .expect("ascii")
        .to_owned();
    let refused = client
        .get(format!("{}/v1/keys/orders.create/k-1", server.address))
        .bearer_auth("not-a-token")
        .header("x-request-id", "otlp-test-unauthorized")
        .send()
        .await
        .expect("lookup");
    assert_eq!(refused.status(), 401);
    // A graceful stop flushes what the batch still holds.
    assert!(
        server.terminate(Duration::from_secs(30)).await,
        "clean exit"
    );

    // Assert
    let got = received.lock().expect("lock");
    let by_id = |id: &str| {
        got.spans
            .iter()
            .find(|s| attribute(s, "request_id").as_deref() == Some(id))
            .unwrap_or_else(|| {
                panic!(
                    "no span with request_id {id}; got {} spans",
                    got.spans.len()
                )
            })
    };
    let claimed = by_id("otlp-test-claim-1");
    println!("claim span: {:?}", claimed.name);
    assert_eq!(claimed.name, "POST /v1/keys/{operation}/{key}/claim");
    assert_eq!(
        attribute(claimed, "http.route").as_deref(),
        Some("/v1/keys/{operation}/{key}/claim")
    );
    assert_eq!(
        attribute(claimed, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        attribute(claimed, "http.response.status_code").as_deref(),
        Some("201")
    );
    assert_eq!(
        attribute(claimed, "tenant").as_deref(),
        Some(tenant.as_str())
    );
    let busy = by_id(&generated);
    assert_eq!(
        attribute(busy, "http.response.status_code").as_deref(),
        Some("409")
    );
    let unauthorized = by_id("otlp-test-unauthorized");
    assert_eq!(
        attribute(unauthorized, "http.response.status_code").as_deref(),
        Some("401")
    );
    assert_eq!(
        attribute(unauthorized, "tenant"),
        None,
        "no verified tenant"
    );
    // Neither the token nor the key (the caller's data) is in any span.
    let everything = format!("{:?}", got.spans);
    assert!(!everything.contains(&bearer), "a token was exported");
    assert!(!everything.contains("k-1"), "a concrete key was exported");
    assert!(got
        .content_types
        .iter()
        .all(|c| c == "application/x-protobuf"));
    println!(
        "exported {} spans in {} export(s) on shutdown; request ids otlp-test-claim-1, {generated}, otlp-test-unauthorized found with route, status and tenant",
        got.spans.len(),
        got.content_types.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nothing_is_exported_when_no_endpoint_is_configured() {
    // Arrange: a listener on the default OTLP/HTTP port (where an exporter
    // with no endpoint would send), counting connections.
    let listener = TcpListener::bind("127.0.0.1:4318")
        .expect("port 4318 (the default OTLP/HTTP port) must be free for this test");
    listener.set_nonblocking(true).expect("nonblocking");
    let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
    let connections = Arc::new(Mutex::new(0u32));
    let counted = connections.clone();
    tokio::spawn(async move {
        while listener.accept().await.is_ok() {
            *counted.lock().expect("lock") += 1;
        }
    });
    let mut vars = test_vars(&Backend::Postgres.fresh().await);
    vars.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "10".into());
    vars.insert("OTEL_SERVICE_NAME".into(), "idemkey-test".into());
    let server = ServerProcess::start(&vars).await;
    let bearer = token(&fresh_tenant(), &[Role::Client]);

    // Act: calls, then a graceful stop (which would flush an exporter).
    let client = reqwest::Client::new();
    for n in 0..5 {
        let answer = client
            .post(format!(
                "{}/v1/keys/orders.create/k-{n}/claim",
                server.address
            ))
            .bearer_auth(&bearer)
            .json(&json!({"request": {"n": n}}))
            .send()
            .await
            .expect("claim");
        assert_eq!(answer.status(), 201);
    }
    assert!(
        server.terminate(Duration::from_secs(30)).await,
        "clean exit"
    );

    // Assert
    assert_eq!(
        *connections.lock().expect("lock"),
        0,
        "no connection attempt"
    );
    println!("no OTLP endpoint: 5 calls and a graceful stop, 0 connections to 127.0.0.1:4318");
}
