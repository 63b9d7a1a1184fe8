//! The calls a client makes — idemkey's claim, complete, release and
//! heartbeat, the provider's lookup and charge — each recorded in the
//! round's journal with what its answer said.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio::time::Instant;

use super::clients::Workload;
use super::journal::{Call, Entry};

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

/// An RFC 3339 time from an answer.
pub fn time(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str().and_then(|t| t.parse().ok())
}

/// What a granted claim (`claimed` or `recovering`) gave its owner.
pub struct Grant {
    pub recovering: bool,
    pub attempt: Option<i64>,
    pub token: String,
    pub effect_id: String,
    pub lease_end: DateTime<Utc>,
    /// When the database granted it: the lease end less the lease asked.
    pub granted_at: DateTime<Utc>,
}

impl Grant {
    pub fn of(answer: &Value, lease_ms: u64) -> Self {
        let lease_end = time(&answer["lease_expires_at"]).expect("lease_expires_at");
        Self {
            recovering: answer["status"] == "recovering",
            attempt: answer["attempt"].as_i64(),
            token: answer["owner_token"].as_str().expect("owner_token").into(),
            effect_id: answer["effect_id"].as_str().expect("effect_id").into(),
            lease_end,
            granted_at: lease_end - chrono::TimeDelta::milliseconds(lease_ms as i64),
        }
    }

    /// A journal entry of this owner's.
    pub fn entry(&self, call: Call, caller: u32) -> Entry {
        let mut e = Entry::new(call, caller);
        e.attempt = self.attempt;
        e.owner_since = Some(self.granted_at);
        e
    }
}

/// How a completion ended.
pub enum Completion {
    Acknowledged,
    /// The token is no longer the key's owner (taken over): claim again.
    Lost,
}

impl Workload {
    /// Completes until acknowledged or fenced off; retries the same
    /// completion (same token, same outcome) when it gets no answer.
    pub async fn complete(
        &self,
        key: &str,
        caller: u32,
        grant: &Grant,
        outcome: &Value,
    ) -> Completion {
        let mut backoff = Backoff::default();
        loop {
            let body = json!({"owner_token": grant.token, "outcome": outcome});
            let (mut entry, answer) = self.post(None, caller, key, "complete", body).await;
            entry.attempt = answer["attempt"].as_i64().or(grant.attempt);
            entry.owner_since = Some(grant.granted_at);
            entry.outcome = Some(outcome.clone());
            if entry.status == 200 {
                entry.completed_at = time(&answer["completed_at"]);
            }
            let status = entry.status;
            let retryable = entry.is_retryable();
            self.record(key, entry);
            match status {
                200 => return Completion::Acknowledged,
                _ if retryable && Instant::now() < self.give_up_at => backoff.sleep().await,
                // lease_lost (taken over), or anything unexpected: claim
                // again to see where the key stands.
                _ => return Completion::Lost,
            }
        }
    }

    /// Gives the key back (no effect happened); retries the same release
    /// while no answer comes. The caller claims again whatever it got.
    pub async fn release(&self, key: &str, caller: u32, grant: &Grant) {
        let mut backoff = Backoff::default();
        loop {
            let body = json!({"owner_token": grant.token});
            let (mut entry, _) = self.post(None, caller, key, "release", body).await;
            entry.attempt = grant.attempt;
            entry.owner_since = Some(grant.granted_at);
            entry.note = "a transient failure before the effect".into();
            let again = entry.is_retryable() && Instant::now() < self.give_up_at;
            self.record(key, entry);
            if !again {
                return;
            }
            backoff.sleep().await;
        }
    }

    /// Extends the lease by `lease_ms`: the new lease end, `Ok(None)` when
    /// no answer came (try again later), `Err` when the key is no longer
    /// this owner's.
    pub async fn heartbeat(
        &self,
        key: &str,
        caller: u32,
        grant: &Grant,
        lease_ms: u64,
    ) -> Result<Option<DateTime<Utc>>, ()> {
        let body = json!({"owner_token": grant.token, "lease_ms": lease_ms});
        let (mut entry, answer) = self.post(None, caller, key, "heartbeat", body).await;
        entry.attempt = grant.attempt;
        entry.owner_since = Some(grant.granted_at);
        let result = match entry.status {
            200 => {
                let end = time(&answer["lease_expires_at"]).expect("lease_expires_at");
                entry.lease_end = Some(end);
                entry.granted_at = Some(end - chrono::TimeDelta::milliseconds(lease_ms as i64));
                Ok(Some(end))
            }
            _ if entry.is_retryable() => Ok(None),
            _ => Err(()),
        };
        self.record(key, entry);
        result
    }

    /// Asks the provider whether the effect already happened.
    pub async fn find(&self, key: &str, caller: u32, grant: &Grant) -> Option<String> {
        let url = format!("{}/charges/{}", self.provider, grant.effect_id);
        let found = self
            .http
            .get(url)
            .send()
            .await
            .expect("the provider answers");
        let mut e = grant.entry(Call::Find, caller);
        e.status = found.status().as_u16();
        let id = if found.status().is_success() {
            let body: Value = found.json().await.expect("charge JSON");
            body["id"].as_str().map(str::to_owned)
        } else {
            None
        };
        e.word = if id.is_some() { "found" } else { "not_found" }.into();
        e.note = id.clone().unwrap_or_default();
        self.record(key, e);
        id
    }

    /// The effect: a new charge at the provider, which never deduplicates.
    pub async fn charge(
        &self,
        key: &str,
        caller: u32,
        grant: &Grant,
        lease_end: DateTime<Utc>,
    ) -> String {
        let charged = self
            .http
            .post(format!("{}/charges", self.provider))
            .header("reference", &grant.effect_id)
            .send()
            .await
            .expect("the provider answers");
        let mut e = grant.entry(Call::Charge, caller);
        e.status = charged.status().as_u16();
        let body: Value = charged.json().await.expect("charge JSON");
        let id = body["id"].as_str().expect("a charge id").to_owned();
        e.word = id.clone();
        let answered = Utc::now();
        e.late = answered >= lease_end;
        e.note = format!(
            "{}, answered {} lease until {}",
            grant.effect_id,
            answered.format("%H:%M:%S%.3f"),
            lease_end.format("%H:%M:%S%.3f")
        );
        self.record(key, e);
        id
    }

    /// POSTs `body` to `/v1/keys/{operation}/{key}/{call}` on `server`, or
    /// on a server picked at random; the entry holds the status and word,
    /// or the transport error as the word with status 0.
    pub async fn post(
        &self,
        server: Option<&str>,
        caller: u32,
        key: &str,
        call: &str,
        body: Value,
    ) -> (Entry, Value) {
        let (node, base) = match server {
            Some(base) => (None, base.to_owned()),
            None => {
                let (node, base) = self.addresses.pick();
                (Some(node), base)
            }
        };
        let kind = match call {
            "claim" => Call::Claim,
            "complete" => Call::Complete,
            "release" => Call::Release,
            _ => Call::Heartbeat,
        };
        let mut entry = Entry::new(kind, caller);
        entry.node = node;
        let url = format!("{base}/v1/keys/{}/{key}/{call}", self.operation);
        let mut request = self.http.post(url).bearer_auth(&self.token).json(&body);
        if server.is_some() {
            // A server with a slow database link: its answers take seconds.
            request = request.timeout(Duration::from_secs(60));
        }
        let sent = request.send().await;
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
pub struct Backoff(Duration);

impl Default for Backoff {
    fn default() -> Self {
        Self(Duration::from_millis(50))
    }
}

impl Backoff {
    pub async fn sleep(&mut self) {
        let jitter = rand::random_range(0..=self.0.as_millis() as u64);
        tokio::time::sleep(self.0 / 2 + Duration::from_millis(jitter / 2)).await;
        self.0 = (self.0 * 2).min(Duration::from_millis(800));
    }
}
