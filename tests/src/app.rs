//! `TestApp`: one in-process server per test, with one method per endpoint.

use std::collections::HashMap;
use std::net::TcpListener;

use idemkey_api::auth::Role;
use idemkey_api::config::Config;
use idemkey_api::engine::Engine;
use idemkey_api::startup::Application;
use idemkey_api::usage::Usage;
use reqwest::Client;
use serde_json::{json, Value};

pub use crate::answer::Answer;
use crate::db::Backend;
use crate::tokens::{fresh_tenant, token, TEST_KID, TEST_SECRET};

#[derive(Clone)]
pub struct TestApp {
    pub address: String,
    pub database_url: String,
    pub client: Client,
    /// A fresh tenant and a client+viewer token for it.
    pub tenant: String,
    pub token: String,
    /// The server's usage counts, to flush them when a test needs them stored.
    pub usage: Usage,
    /// The variables the server was started with.
    pub vars: HashMap<String, String>,
    /// The private `/metrics` listener's base URL, when the server was
    /// started with `IDEMKEY_METRICS_LISTEN`.
    pub metrics_address: Option<String>,
    /// The server's engine, to run a quota pass when a test needs one.
    pub engine: Engine,
}

/// The dashboard's session key of every test server.
pub const TEST_SESSION_SECRET: &str = "session-secret-for-tests-0123456789";

/// The configuration every test server gets, on `database_url`.
pub fn test_vars(database_url: &str) -> HashMap<String, String> {
    HashMap::from([
        ("IDEMKEY_DATABASE_URL".into(), database_url.into()),
        (
            "IDEMKEY_JWT_SECRETS".into(),
            format!("{TEST_KID}={TEST_SECRET}"),
        ),
        (
            "IDEMKEY_SECRET".into(),
            "effect-secret-for-tests-0123456789".into(),
        ),
        ("IDEMKEY_SESSION_SECRET".into(), TEST_SESSION_SECRET.into()),
        ("IDEMKEY_WORKERS".into(), "off".into()),
        (
            "IDEMKEY_DATA_DIR".into(),
            std::env::temp_dir()
                .join("idemkey-tests")
                .display()
                .to_string(),
        ),
    ])
}

impl TestApp {
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// Spawns a server whose variables `adjust` may change.
    pub async fn spawn_with(adjust: impl FnOnce(&mut HashMap<String, String>)) -> Self {
        Self::spawn_on_with(Backend::Postgres, adjust).await
    }

    /// Spawns a server on a fresh database of the given backend.
    pub async fn spawn_on(backend: Backend) -> Self {
        Self::spawn_on_with(backend, |_| {}).await
    }

    pub async fn spawn_on_with(
        backend: Backend,
        adjust: impl FnOnce(&mut HashMap<String, String>),
    ) -> Self {
        Self::spawn_node(&backend.fresh().await, adjust).await
    }

    /// Another node: a server on an existing database, with a fresh tenant
    /// (use `as_tenant_of` to act as another node's tenant).
    pub async fn spawn_node(
        database_url: &str,
        adjust: impl FnOnce(&mut HashMap<String, String>),
    ) -> Self {
        let database_url = database_url.to_owned();
        let mut vars = test_vars(&database_url);
        adjust(&mut vars);
        let (address, metrics_address, usage, engine) = serve(&vars).await;
        let tenant = fresh_tenant();
        let token = token(&tenant, &[Role::Client, Role::Viewer]);
        Self {
            address,
            database_url,
            client: Client::new(),
            tenant,
            token,
            usage,
            vars,
            metrics_address,
            engine,
        }
    }

    /// Another node started with exactly this one's variables, for the same
    /// tenant and token (a node of the same deployment).
    pub async fn spawn_twin(&self) -> Self {
        let vars = self.vars.clone();
        Self {
            tenant: self.tenant.clone(),
            token: self.token.clone(),
            ..Self::spawn_node(&self.database_url, move |v| *v = vars).await
        }
    }

    /// A second node on this one's database, with a fresh tenant of its own.
    pub async fn spawn_beside(&self) -> Self {
        Self::spawn_node(&self.database_url, |_| {}).await
    }

    /// A second node on this one's database, for the same tenant and token.
    pub async fn spawn_sibling(&self) -> Self {
        Self {
            tenant: self.tenant.clone(),
            token: self.token.clone(),
            ..self.spawn_beside().await
        }
    }

    /// Measures every tenant's storage and refreshes this server's quota
    /// standing now, as the quota worker does on its timer.
    pub async fn quota_pass(&self) {
        self.engine.quota_pass(true).await.expect("quota pass");
    }

    /// Adds the server's pending usage counts to the database now.
    pub async fn flush_usage(&self) {
        self.usage.flush().await.expect("usage flush");
    }

    pub fn key_url(&self, operation: &str, key: &str) -> String {
        format!("{}/v1/keys/{operation}/{}", self.address, encode(key))
    }

    /// POSTs `body` to `/v1/keys/{operation}/{key}/{call}` with this app's token.
    pub async fn call(&self, operation: &str, key: &str, call: &str, body: Value) -> Answer {
        self.call_as(&self.token, operation, key, call, body).await
    }

    pub async fn call_as(
        &self,
        token: &str,
        operation: &str,
        key: &str,
        call: &str,
        body: Value,
    ) -> Answer {
        let url = format!("{}/{call}", self.key_url(operation, key));
        let response = self
            .client
            .post(url)
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .expect("request");
        Answer::from(response).await
    }

    pub async fn claim(&self, operation: &str, key: &str, request: Value) -> Answer {
        self.call(operation, key, "claim", json!({ "request": request }))
            .await
    }

    pub async fn complete(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
        outcome: Value,
    ) -> Answer {
        let body = json!({ "owner_token": owner_token, "outcome": outcome });
        self.call(operation, key, "complete", body).await
    }

    pub async fn release(&self, operation: &str, key: &str, owner_token: &str) -> Answer {
        self.call(
            operation,
            key,
            "release",
            json!({ "owner_token": owner_token }),
        )
        .await
    }

    pub async fn heartbeat(&self, operation: &str, key: &str, owner_token: &str) -> Answer {
        self.call(
            operation,
            key,
            "heartbeat",
            json!({ "owner_token": owner_token }),
        )
        .await
    }

    pub async fn lookup(&self, operation: &str, key: &str) -> Answer {
        self.lookup_as(&self.token, operation, key).await
    }

    pub async fn lookup_as(&self, token: &str, operation: &str, key: &str) -> Answer {
        let response = self
            .client
            .get(self.key_url(operation, key))
            .bearer_auth(token)
            .send()
            .await
            .expect("request");
        Answer::from(response).await
    }

    /// Looks `key` up with `authorization` as the whole Authorization header
    /// (or none at all), for authentication tests.
    pub async fn lookup_with_authorization(
        &self,
        authorization: Option<&str>,
        operation: &str,
        key: &str,
    ) -> Answer {
        let mut request = self.client.get(self.key_url(operation, key));
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        Answer::from(request.send().await.expect("request")).await
    }

    /// Sends `method` to `path` (below the server address) with this app's
    /// token and no body, for routing tests.
    pub async fn request(&self, method: reqwest::Method, path: &str) -> Answer {
        let response = self
            .client
            .request(method, format!("{}{path}", self.address))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("request");
        Answer::from(response).await
    }

    /// Sends raw bytes as a body, for malformed-input tests.
    pub async fn post_raw(&self, url: &str, body: impl Into<reqwest::Body>) -> Answer {
        let response = self
            .client
            .post(url)
            .bearer_auth(&self.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("request");
        Answer::from(response).await
    }

    /// Runs one statement against this app's database and checks it touched
    /// exactly one row (test arrangement, such as ending a lease early).
    pub async fn sql(&self, statement: &str) {
        let rows = crate::db::execute(&self.database_url, statement).await;
        assert_eq!(rows, 1, "{statement}");
    }

    /// Ends the current lease of `key` (any operation of this database) now.
    pub async fn expire_lease(&self, key: &str) {
        let ago = Backend::of(&self.database_url).one_second_ago();
        self.sql(&format!(
            "update idempotency_key set lease_expires_at = {ago} where key = '{key}'"
        ))
        .await;
    }

    /// Ends the replay window of `key` now, as if its retention had passed:
    /// its window ended a second ago and, were it never completed, its last
    /// lease ended a whole window before that.
    pub async fn expire_window(&self, key: &str) {
        let backend = Backend::of(&self.database_url);
        let ago = backend.one_second_ago();
        let lease_end = match backend {
            Backend::Postgres => format!("{ago} - window_ms * interval '1 millisecond'"),
            Backend::Sqlite => format!("{ago} - window_ms"),
        };
        self.sql(&format!(
            "update idempotency_key set expires_at = {ago}, \
               lease_expires_at = {lease_end} where key = '{key}'"
        ))
        .await;
    }

    /// This server, acting for `other`'s tenant with `other`'s token.
    pub fn as_tenant_of(mut self, other: &TestApp) -> Self {
        self.tenant = other.tenant.clone();
        self.token = other.token.clone();
        self
    }

    /// The server's metrics as they are now, scraped from the API listener
    /// with a `metrics` token (the counts span every tenant, so no tenant
    /// role may read them).
    pub async fn metrics(&self) -> Metrics {
        let response = self
            .client
            .get(format!("{}/metrics", self.address))
            .bearer_auth(token(&self.tenant, &[Role::Metrics]))
            .send()
            .await
            .expect("metrics");
        assert_eq!(response.status(), 200, "a metrics token may scrape");
        Metrics::parse(&response.text().await.expect("metrics text"))
    }

    /// A token for another role set of this app's tenant.
    pub fn token_with(&self, roles: &[Role]) -> String {
        token(&self.tenant, roles)
    }
}

/// Starts a server in this process with `vars`; returns its base URL and
/// that of its metrics listener, if it has one.
async fn serve(vars: &HashMap<String, String>) -> (String, Option<String>, Usage, Engine) {
    let config = Config::from_vars(|name| vars.get(name).cloned()).expect("test config");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let app = Application::build(&config, listener, idemkey_web::mount)
        .await
        .expect("server builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    let metrics_address = app
        .metrics_port()
        .map(|port| format!("http://127.0.0.1:{port}"));
    let usage = app.usage();
    let engine = app.engine();
    tokio::spawn(app.run_until_stopped());
    (address, metrics_address, usage, engine)
}

/// A snapshot of `/metrics`: each series (`name{labels}`) and its value.
#[derive(Debug, Clone, Default)]
pub struct Metrics(pub HashMap<String, f64>);

impl Metrics {
    pub fn parse(text: &str) -> Self {
        Self(
            text.lines()
                .filter(|line| !line.starts_with('#') && !line.is_empty())
                .filter_map(|line| {
                    let (series, value) = line.rsplit_once(' ')?;
                    Some((series.to_owned(), value.parse().ok()?))
                })
                .collect(),
        )
    }

    /// One series, written as exposed (`idemkey_claim_waiters`,
    /// `idemkey_cache_lookups_total{layer="local",result="hit"}`); 0 if absent.
    pub fn get(&self, series: &str) -> f64 {
        self.0.get(series).copied().unwrap_or(0.0)
    }

    /// Every statement sent to the database.
    pub fn statements(&self) -> f64 {
        self.0
            .iter()
            .filter(|(series, _)| series.starts_with("idemkey_store_statements_total"))
            .map(|(_, v)| v)
            .sum()
    }

    /// Cache hits of one layer (`local` or `redis`).
    pub fn hits(&self, layer: &str) -> f64 {
        self.get(&format!(
            "idemkey_cache_lookups_total{{layer=\"{layer}\",result=\"hit\"}}"
        ))
    }
}

/// Percent-encodes a key for a path segment.
pub fn encode(key: &str) -> String {
    key.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
