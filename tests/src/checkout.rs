//! The worked checkout example (examples/checkout) as real processes: an
//! `idemkey` server on a fresh Postgres database, the `fake-payments`
//! provider and `checkout` processes, and a shopper's page that taps "pay"
//! and retries the way the example's README tells a page to.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use idemkey_api::auth::Role;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::app::test_vars;
use crate::db::Backend;
use crate::process::{sibling_binary, ServerProcess};
use crate::tokens::{fresh_tenant, token};

/// A process of the example that announced its address; killed when dropped.
pub struct Announced {
    pub address: String,
    child: Child,
}

impl Announced {
    /// Starts the workspace binary `name` with `env` and waits for its
    /// `… listening on ADDR` line on standard output.
    pub async fn start(name: &str, env: &[(&str, String)]) -> Self {
        let mut child = Command::new(sibling_binary(name))
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let announced = async {
            loop {
                let line = lines
                    .next_line()
                    .await
                    .expect("read stdout")
                    .unwrap_or_else(|| panic!("{name} exited before listening"));
                if let Some(addr) = line.split("listening on ").nth(1) {
                    return format!("http://{}", addr.trim());
                }
            }
        };
        let address = tokio::time::timeout(Duration::from_secs(30), announced)
            .await
            .unwrap_or_else(|_| panic!("{name} did not announce its address within 30 s"));
        Self { address, child }
    }

    /// Waits for the process to end by itself (the crash hook); its status.
    pub async fn wait_for_exit(mut self) -> std::process::ExitStatus {
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the process ended within 30 s")
            .expect("wait")
    }
}

/// The three processes' world: idemkey, the provider, and a way to start
/// checkout processes against them.
pub struct Shop {
    pub idemkey: ServerProcess,
    pub payments: Announced,
    /// A `client` + `viewer` token for the shop's tenant.
    pub token: String,
    pub http: reqwest::Client,
}

impl Shop {
    /// A fresh idemkey (Postgres) and a fresh provider with an empty ledger.
    pub async fn open() -> Self {
        let vars: HashMap<String, String> = test_vars(&Backend::Postgres.fresh().await);
        let idemkey = ServerProcess::start(&vars).await;
        let payments = Announced::start(
            "fake-payments",
            &[("PAYMENTS_LISTEN", "127.0.0.1:0".into())],
        )
        .await;
        Self {
            idemkey,
            payments,
            token: token(&fresh_tenant(), &[Role::Client, Role::Viewer]),
            http: reqwest::Client::new(),
        }
    }

    /// A checkout process with this lease and, if given, the crash hook.
    pub async fn checkout(&self, lease_ms: u64, crash_at: Option<&str>) -> Announced {
        let mut env = vec![
            ("CHECKOUT_LISTEN", "127.0.0.1:0".to_owned()),
            ("IDEMKEY_SERVER", self.idemkey.address.clone()),
            ("IDEMKEY_TOKEN", self.token.clone()),
            ("PAYMENTS_URL", self.payments.address.clone()),
            ("CHECKOUT_LEASE_MS", lease_ms.to_string()),
        ];
        if let Some(point) = crash_at {
            env.push(("CHECKOUT_CRASH_AT", point.to_owned()));
        }
        Announced::start("checkout", &env).await
    }

    /// The provider's ledger.
    pub async fn ledger(&self) -> Value {
        self.http
            .get(format!("{}/ledger", self.payments.address))
            .send()
            .await
            .expect("ledger")
            .json()
            .await
            .expect("ledger JSON")
    }

    /// The provider's count of charges (or `shipments_by_order`) for an order.
    pub async fn count(&self, book: &str, order: &str) -> u64 {
        self.ledger().await[book][order].as_u64().unwrap_or(0)
    }

    /// The provider's record made with `reference`, if any.
    pub async fn by_reference(&self, what: &str, reference: &str) -> Option<String> {
        let r = self
            .http
            .get(format!(
                "{}/{what}/by-reference/{reference}",
                self.payments.address
            ))
            .send()
            .await
            .expect("lookup");
        if r.status() == 404 {
            return None;
        }
        let v: Value = r.json().await.expect("JSON");
        v["id"].as_str().map(str::to_owned)
    }

    /// The idemkey record of a checkout's key.
    pub async fn record(&self, checkout: &str) -> Value {
        self.http
            .get(format!(
                "{}/v1/keys/checkout.pay/{checkout}",
                self.idemkey.address
            ))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("lookup")
            .json()
            .await
            .expect("record JSON")
    }
}

/// What one tap of "pay" ended with.
#[derive(Debug, Clone)]
pub struct Paid {
    pub status: u16,
    /// `effect`, `replay` or `reconcile`.
    pub via: String,
    pub body: Value,
    /// How many tries it took (1 = answered at once).
    pub tries: u32,
}

/// The shopper's page: one tap of "pay" for `checkout`, retried with the
/// same checkout id on no answer, 409, 502 and 503 (after `Retry-After`),
/// up to `tries` tries. `None` if no try got an answer.
pub async fn tap(
    http: &reqwest::Client,
    checkout_address: &str,
    checkout: &str,
    amount: &str,
    tries: u32,
) -> Option<Paid> {
    let url = format!("{checkout_address}/checkouts/{checkout}/pay");
    for n in 1..=tries {
        let sent = http
            .post(&url)
            .json(&json!({"amount": amount, "currency": "EUR"}))
            .timeout(Duration::from_secs(60))
            .send()
            .await;
        let Ok(response) = sent else {
            // No answer (the process died or is not up): same id, again.
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let status = response.status().as_u16();
        let via = response
            .headers()
            .get("checkout-via")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if matches!(status, 409 | 502 | 503) && n < tries {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        return Some(Paid {
            status,
            via,
            body,
            tries: n,
        });
    }
    None
}
