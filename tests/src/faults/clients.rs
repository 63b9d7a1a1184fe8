//! Clients that follow the documented recipe (docs/protocol.md, "Client
//! recipe", and docs/recovery.md, "The rule") while faults happen under
//! them, and record every answer in the round's journal.
//!
//! A caller drives one logical operation (one key) until it ends:
//! - `claimed`: charge at the provider with the effect id as reference, then
//!   complete with an outcome naming the charge;
//! - `recovering`: look the effect id up at the provider first and charge
//!   only if it is not there, then complete;
//! - `completed`: the replayed outcome is the answer; done;
//! - `in_progress`, `unavailable`, `rate_limited` or no answer at all: the
//!   same key again after a backoff, on any server.
//!
//! Some callers die between the effect and the completion (they forget
//! their owner token) and come back later as a new client of the same key,
//! which then waits out the lease and recovers. Others stall past their
//! lease, before the effect or between effect and completion, and carry on
//! with their old token. An owner starts the effect
//! only while its lease has a safety margin left, as a careful client must:
//! a lease ending during the effect would let a recovering attempt look at
//! the provider too early.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::fleet::Addresses;
use super::journal::{Call, Entry, Journal};

/// What every caller of a round shares.
pub struct Workload {
    pub http: reqwest::Client,
    pub addresses: Addresses,
    pub token: String,
    pub provider: String,
    pub operation: String,
    /// The lease each claim asks for.
    pub lease_ms: u64,
    /// How much lease must be left to start the effect.
    pub margin: Duration,
    /// Chance, in thousandths, that an owner dies after its effect.
    pub die_per_mille: u32,
    /// Chance, in thousandths, that an owner stalls past its lease.
    pub stall_per_mille: u32,
    /// Skip the provider lookup on `recovering` (breaks the recipe on
    /// purpose, to test the checker).
    pub careless: bool,
    pub journal: Arc<Journal>,
    /// Callers stop retrying after this.
    pub give_up_at: Instant,
}

/// The request every claim of `key` sends (the same for every retry).
pub fn request_of(key: &str) -> Value {
    json!({"order": key, "amount": "25.00", "currency": "EUR"})
}

/// The HTTP client the callers use: short timeouts, so a request to a
/// killed server or across a cut link fails fast and is retried.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(15))
        .pool_idle_timeout(Duration::from_secs(2))
        .build()
        .expect("HTTP client")
}

/// How a completion ended.
enum Completion {
    Acknowledged,
    /// The token is no longer the key's owner (taken over): claim again.
    Lost,
}

/// Drives `key` to its end as caller number `caller`.
pub async fn run_caller(w: Arc<Workload>, key: String, caller: u32) {
    let mut backoff = Backoff::default();
    loop {
        if Instant::now() >= w.give_up_at {
            w.journal.record(&key, Entry::new(Call::GaveUp, caller));
            return;
        }
        let wait_ms = [0, 0, 500, 1500][rand::random_range(0..4)];
        let body = json!({"request": request_of(&key), "lease_ms": w.lease_ms, "wait_ms": wait_ms});
        let (mut entry, answer) = w.post(caller, &key, "claim", body).await;
        entry.attempt = answer["attempt"].as_i64();
        let word = entry.word.clone();
        match (entry.status, word.as_str()) {
            (201, "claimed") | (200, "recovering") => {
                entry.note = format!("lease until {}", answer["lease_expires_at"]);
                w.journal.record(&key, entry);
                backoff = Backoff::default();
                if w.own(&key, caller, &answer).await {
                    return;
                }
            }
            (200, "completed") => {
                entry.outcome = Some(answer["outcome"].clone());
                w.journal.record(&key, entry);
                return;
            }
            _ => {
                let retryable = entry.is_retryable();
                w.journal.record(&key, entry);
                if !retryable {
                    // Not in the recipe: the checker reports it. Looking
                    // again later is what a real client would do.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                backoff.sleep().await;
            }
        }
    }
}

impl Workload {
    /// The owner's part after `claimed` or `recovering`: the effect (unless
    /// the provider already has it), then the completion. True when the
    /// operation is over for this caller.
    async fn own(&self, key: &str, caller: u32, claim: &Value) -> bool {
        let attempt = claim["attempt"].as_i64();
        let effect_id = claim["effect_id"].as_str().expect("effect_id").to_owned();
        let lease_end: DateTime<Utc> = claim["lease_expires_at"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .expect("lease_expires_at");
        // A stalled owner (a long pause, a slow network) outlives its
        // lease: before the effect, its lease check must stop it; after
        // the effect, its late completion must be fenced off if another
        // attempt took over meanwhile.
        let stall = rand::random_range(0..1000) < self.stall_per_mille;
        let stall_first = stall && rand::random();
        if stall_first {
            self.stall(key, caller, attempt, "before the effect").await;
        }
        let mut charge_id = None;
        if claim["status"] == "recovering" && !self.careless {
            charge_id = self.find(key, caller, attempt, &effect_id).await;
        }
        let charge_id = match charge_id {
            Some(id) => id,
            None => {
                let left = (lease_end - Utc::now()).to_std().unwrap_or_default();
                if left < self.margin {
                    let mut e = Entry::new(Call::Abandoned, caller);
                    e.attempt = attempt;
                    e.note = format!("{} ms of lease left", left.as_millis());
                    self.journal.record(key, e);
                    return false;
                }
                self.charge(key, caller, attempt, &effect_id, lease_end)
                    .await
            }
        };
        if stall && !stall_first {
            self.stall(key, caller, attempt, "after the effect").await;
        } else if rand::random_range(0..1000) < self.die_per_mille {
            let mut e = Entry::new(Call::Died, caller);
            e.attempt = attempt;
            e.note = format!("after charge {charge_id}");
            self.journal.record(key, e);
            // A new client of the same key comes along a little later.
            let pause = rand::random_range(0..self.lease_ms);
            tokio::time::sleep(Duration::from_millis(pause)).await;
            return false;
        }
        let outcome = json!({
            "status_code": 201,
            "headers": {"x-attempt": attempt.unwrap_or_default().to_string()},
            "body": {"charge": charge_id, "order": key, "attempt": attempt, "caller": caller},
            "resource_id": charge_id,
        });
        let token = claim["owner_token"].as_str().expect("owner_token");
        matches!(
            self.complete(key, caller, token, &outcome).await,
            Completion::Acknowledged
        )
    }

    /// Pauses past the end of the lease.
    async fn stall(&self, key: &str, caller: u32, attempt: Option<i64>, when: &str) {
        let mut e = Entry::new(Call::Stalled, caller);
        e.attempt = attempt;
        e.note = when.into();
        self.journal.record(key, e);
        let pause = self.lease_ms + rand::random_range(200..1_200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }

    /// Completes until acknowledged or fenced off; retries the same
    /// completion (same token, same outcome) when it gets no answer.
    async fn complete(&self, key: &str, caller: u32, token: &str, outcome: &Value) -> Completion {
        let mut backoff = Backoff::default();
        loop {
            let body = json!({"owner_token": token, "outcome": outcome});
            let (mut entry, answer) = self.post(caller, key, "complete", body).await;
            entry.attempt = answer["attempt"].as_i64();
            entry.outcome = Some(outcome.clone());
            let status = entry.status;
            let retryable = entry.is_retryable();
            self.journal.record(key, entry);
            match status {
                200 => return Completion::Acknowledged,
                _ if retryable && Instant::now() < self.give_up_at => backoff.sleep().await,
                // lease_lost (taken over), or anything unexpected: claim
                // again to see where the key stands.
                _ => return Completion::Lost,
            }
        }
    }

    /// Asks the provider whether the effect already happened.
    async fn find(
        &self,
        key: &str,
        caller: u32,
        attempt: Option<i64>,
        effect_id: &str,
    ) -> Option<String> {
        let url = format!("{}/charges/{effect_id}", self.provider);
        let found = self
            .http
            .get(url)
            .send()
            .await
            .expect("the provider answers");
        let mut e = Entry::new(Call::Find, caller);
        e.attempt = attempt;
        e.status = found.status().as_u16();
        let id = if found.status().is_success() {
            let body: Value = found.json().await.expect("charge JSON");
            body["id"].as_str().map(str::to_owned)
        } else {
            None
        };
        e.word = if id.is_some() { "found" } else { "not_found" }.into();
        e.note = id.clone().unwrap_or_default();
        self.journal.record(key, e);
        id
    }

    /// The effect: a new charge at the provider, which never deduplicates.
    async fn charge(
        &self,
        key: &str,
        caller: u32,
        attempt: Option<i64>,
        effect_id: &str,
        lease_end: DateTime<Utc>,
    ) -> String {
        let charged = self
            .http
            .post(format!("{}/charges", self.provider))
            .header("reference", effect_id)
            .send()
            .await
            .expect("the provider answers");
        let mut e = Entry::new(Call::Charge, caller);
        e.attempt = attempt;
        e.status = charged.status().as_u16();
        let body: Value = charged.json().await.expect("charge JSON");
        let id = body["id"].as_str().expect("a charge id").to_owned();
        e.word = id.clone();
        let answered = Utc::now();
        e.late = answered >= lease_end;
        e.note = format!(
            "{effect_id}, answered {} lease until {}",
            answered.format("%H:%M:%S%.3f"),
            lease_end.format("%H:%M:%S%.3f")
        );
        self.journal.record(key, e);
        id
    }

    /// POSTs `body` to `/v1/keys/{operation}/{key}/{call}` on a server
    /// picked at random; the entry holds the status and word, or the
    /// transport error as the word with status 0.
    async fn post(&self, caller: u32, key: &str, call: &str, body: Value) -> (Entry, Value) {
        let (node, base) = self.addresses.pick();
        let kind = if call == "claim" {
            Call::Claim
        } else {
            Call::Complete
        };
        let mut entry = Entry::new(kind, caller);
        entry.node = Some(node);
        let url = format!("{base}/v1/keys/{}/{key}/{call}", self.operation);
        let sent = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await;
        let answer = match sent {
            Ok(r) => {
                entry.status = r.status().as_u16();
                match r.text().await {
                    Ok(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
                    Err(e) => {
                        // The answer broke off: as good as no answer.
                        entry.status = 0;
                        Value::String(e.to_string())
                    }
                }
            }
            Err(e) => Value::String(transport_error(&e)),
        };
        entry.word = match (&answer, entry.status) {
            (Value::String(text), _) => text.clone(),
            (a, s) if s >= 400 => a["code"].as_str().unwrap_or_default().to_owned(),
            (a, _) => a["status"]
                .as_str()
                .or(a["state"].as_str())
                .unwrap_or_default()
                .to_owned(),
        };
        (entry, answer)
    }
}

fn transport_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timeout".into()
    } else if e.is_connect() {
        "connect_failed".into()
    } else {
        "no_answer".into()
    }
}

/// Jittered exponential backoff: 50 ms doubling to 800 ms.
struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Self(Duration::from_millis(50))
    }
}

impl Backoff {
    async fn sleep(&mut self) {
        let jitter = rand::random_range(0..=self.0.as_millis() as u64);
        tokio::time::sleep(self.0 / 2 + Duration::from_millis(jitter / 2)).await;
        self.0 = (self.0 * 2).min(Duration::from_millis(800));
    }
}
