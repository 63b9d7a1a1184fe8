//! Webhook tests' support: a real HTTP receiver on a local port that keeps
//! every request it gets and verifies nothing itself (the tests verify the
//! signature with the endpoint's secret, as a tenant's receiver would), and
//! `TestApp` methods for `/v1/operation-classes/{operation}/webhooks`.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;

use crate::app::Answer;
use crate::TestApp;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// The path it was sent to (tests give each endpoint its own).
    pub path: String,
    pub id: String,
    pub timestamp: i64,
    pub signature: String,
    pub body: Vec<u8>,
    /// What the receiver answered.
    pub status: u16,
    /// When it arrived.
    pub at: std::time::Instant,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// Whether the `webhook-signature` header holds a `v1` signature of
    /// this request under `secret` (`whsec_<base64>`), computed here as the
    /// Standard Webhooks specification says, independently of the server.
    pub fn signed_by(&self, secret: &str) -> bool {
        let key = STANDARD
            .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
            .expect("base64");
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
        mac.update(format!("{}.{}.", self.id, self.timestamp).as_bytes());
        mac.update(&self.body);
        let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
        self.signature.split(' ').any(|s| s == expected)
    }
}

#[derive(Default)]
struct Log {
    received: Vec<Received>,
    /// Statuses to answer, in order, before answering `then` forever.
    script: VecDeque<u16>,
    then: u16,
    /// How long each answer is held back.
    delay: Duration,
    /// Requests answered so far.
    answered: usize,
}

/// A local webhook receiver.
#[derive(Clone)]
pub struct Receiver {
    /// Its base URL, `http://127.0.0.1:<port>`.
    pub url: String,
    log: Arc<Mutex<Log>>,
}

impl Receiver {
    /// A receiver that answers 200 to everything.
    pub fn start() -> Self {
        Self::scripted(&[], 200)
    }

    /// A receiver that answers `first` in order, then `then` forever.
    pub fn scripted(first: &[u16], then: u16) -> Self {
        Self::serve(Log {
            script: first.iter().copied().collect(),
            then,
            ..Log::default()
        })
    }

    /// A receiver that holds every request for `delay` before answering
    /// 200: a slow endpoint.
    pub fn slow(delay: Duration) -> Self {
        Self::serve(Log {
            then: 200,
            delay,
            ..Log::default()
        })
    }

    /// Requests answered so far (a slow receiver may hold some).
    pub fn answered(&self) -> usize {
        self.log.lock().expect("log").answered
    }

    fn serve(log: Log) -> Self {
        let log = Arc::new(Mutex::new(log));
        let shared = web::Data::from(log.clone());
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let server = HttpServer::new(move || {
            App::new()
                .app_data(shared.clone())
                .default_service(web::to(receive))
        })
        .workers(1)
        .listen(listener)
        .expect("listen")
        .run();
        tokio::spawn(server);
        Self { url, log }
    }

    /// Everything received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.log.lock().expect("log").received.clone()
    }

    /// Waits (up to 20 s, failing loudly) until `done` holds of what was
    /// received, and returns it.
    pub async fn until(&self, what: &str, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let got = self.received();
            if done(&got) {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}; received {got:#?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

async fn receive(
    log: web::Data<Mutex<Log>>,
    request: HttpRequest,
    body: web::Bytes,
) -> HttpResponse {
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (status, delay) = {
        let mut log = log.lock().expect("log");
        let status = log.script.pop_front().unwrap_or(log.then);
        (status, log.delay)
    };
    let received = Received {
        path: request.path().to_owned(),
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp").parse().unwrap_or(-1),
        signature: header("webhook-signature"),
        body: body.to_vec(),
        status,
        at: std::time::Instant::now(),
    };
    log.lock().expect("log").received.push(received);
    tokio::time::sleep(delay).await;
    log.lock().expect("log").answered += 1;
    HttpResponse::build(actix_web::http::StatusCode::from_u16(status).expect("a status")).finish()
}

/// A server whose background workers (the webhook worker among them) wake
/// every 100 ms, retrying deliveries after 100 ms (doubling) at most
/// `attempts` times.
pub async fn webhook_app(backend: crate::db::Backend, attempts: u32) -> TestApp {
    TestApp::spawn_on_with(backend, |vars| {
        vars.insert("IDEMKEY_WORKERS".into(), "on".into());
        vars.insert("IDEMKEY_WORKER_INTERVAL".into(), "100ms".into());
        vars.insert("IDEMKEY_WEBHOOK_BACKOFF".into(), "100ms".into());
        vars.insert("IDEMKEY_WEBHOOK_ATTEMPTS".into(), attempts.to_string());
    })
    .await
}

impl TestApp {
    pub fn webhooks_url(&self, operation: &str) -> String {
        format!("{}/webhooks", self.class_url(operation))
    }

    /// Any call on a class's webhooks (`tail` after `/webhooks`) with any
    /// token and body.
    pub async fn webhook_call(
        &self,
        token: &str,
        method: Method,
        operation: &str,
        tail: &str,
        body: Option<Value>,
    ) -> Answer {
        let mut request = self
            .client
            .request(method, format!("{}{tail}", self.webhooks_url(operation)))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        Answer::from(request.send().await.expect("request")).await
    }

    /// Adds an endpoint as this tenant's admin; answers the created
    /// endpoint (with its secret), after checking it was created.
    pub async fn create_webhook(&self, operation: &str, body: Value) -> Value {
        let answer = self
            .webhook_call(&self.admin_token(), Method::POST, operation, "", Some(body))
            .await;
        assert_eq!(answer.status, 201, "{}", answer.text);
        answer.json()
    }

    /// An endpoint's deliveries, newest first, as this tenant's admin.
    pub async fn webhook_deliveries(&self, operation: &str, id: &str) -> Vec<Value> {
        let answer = self
            .webhook_call(
                &self.admin_token(),
                Method::GET,
                operation,
                &format!("/{id}/deliveries"),
                None,
            )
            .await;
        assert_eq!(answer.status, 200, "{}", answer.text);
        answer.json()["deliveries"]
            .as_array()
            .expect("deliveries")
            .clone()
    }

    /// Waits until the webhook worker has finished `passes` more passes.
    pub async fn webhook_passes(&self, passes: f64) {
        let series = r#"idemkey_worker_passes_total{worker="webhooks",result="ok"}"#;
        let start = self.metrics().await.get(series);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.metrics().await.get(series) < start + passes {
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {passes} webhook worker passes"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// A quarantined key: claimed, then quarantined by its owner with `reason`.
pub async fn quarantined(app: &TestApp, operation: &str, key: &str, reason: &str) {
    let owner = app
        .claim(operation, key, json!({"n": 1}))
        .await
        .owner_token();
    app.call(
        operation,
        key,
        "quarantine",
        json!({"owner_token": owner, "reason": reason}),
    )
    .await
    .assert(200, "quarantined");
}
