//! The webhook worker: on every node with `IDEMKEY_WORKERS=on`, every
//! `IDEMKEY_WORKER_INTERVAL`, one pass
//!
//! 1. queues what is new — keys quarantined, stuck past an endpoint's
//!    `stuck_after`, taken over; `key_reused` spikes — reading only what
//!    the store already records (see `store::webhooks`), never touching a
//!    claim's statements;
//! 2. takes the deliveries that are due, signs each (Standard Webhooks)
//!    and sends them at once, each bounded by [`REQUEST_TIMEOUT`];
//! 3. records each attempt: a 2xx answer delivers; anything else is retried
//!    after an exponential, jittered backoff until `IDEMKEY_WEBHOOK_ATTEMPTS`
//!    attempts were made, then the delivery is failed;
//! 4. forgets finished deliveries after [`KEEP_FINISHED`].
//!
//! A slow or dead endpoint slows this pass only: no claim waits for it.
//! Every node may run the pass at once: queueing is idempotent, and a
//! delivery is taken by one node at a time, for longer than its request
//! may last ([`LEASE`]); a node that dies mid-request leaves it due again
//! once the lease is over, and that attempt counts.

use std::collections::HashMap;
use std::time::Duration;

use futures_util::future::join_all;
use sha2::{Digest, Sha256};

use crate::domain::duration::format_duration;
use crate::domain::time::rfc3339;
use crate::domain::webhook::signature::WebhookSecret;
use crate::domain::webhook::{backoff, EventKind};
use crate::engine::Engine;
use crate::store::{AttemptResult, Delivery, StoredEndpoint};

/// How long one delivery's request may take, connecting included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a taken delivery stays out of other workers' reach.
pub const LEASE: Duration = Duration::from_secs(30);
/// Events queued per kind per pass, and deliveries sent per pass.
const BATCH: u32 = 100;
/// Finished deliveries are kept this long for the dashboard.
pub const KEEP_FINISHED: Duration = Duration::from_secs(7 * 24 * 3600);

/// How deliveries are retried, from the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Retries {
    /// Attempts before a delivery is failed.
    pub attempts: u32,
    /// The wait after the first failed attempt; it doubles after each.
    pub backoff: Duration,
}

/// The worker's HTTP client and retry settings.
#[derive(Clone)]
pub struct Sender {
    client: reqwest::Client,
    retries: Retries,
}

/// What one pass did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pass {
    pub queued: u64,
    pub delivered: u32,
    pub retried: u32,
    pub failed: u32,
}

impl Sender {
    pub fn new(retries: Retries) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent("idemkey-webhooks")
            .build()?;
        Ok(Self { client, retries })
    }
}

/// One pass: queue, send what is due, record, prune.
#[tracing::instrument(skip_all)]
pub async fn run_once(engine: &Engine, sender: &Sender) -> anyhow::Result<Pass> {
    let store = &engine.store;
    let mut pass = Pass {
        queued: store.queue_events(BATCH).await?,
        ..Pass::default()
    };
    let due = store.take_deliveries(LEASE, BATCH).await?;
    let mut endpoints: HashMap<(String, String), Option<StoredEndpoint>> = HashMap::new();
    for d in &due {
        let at = (d.tenant.as_str().to_owned(), d.endpoint_id.clone());
        if let std::collections::hash_map::Entry::Vacant(slot) = endpoints.entry(at) {
            slot.insert(store.endpoint(&d.tenant, &d.endpoint_id).await?);
        }
    }
    let sends = due.iter().filter_map(|d| {
        let endpoint = endpoints
            .get(&(d.tenant.as_str().to_owned(), d.endpoint_id.clone()))?
            .as_ref()?;
        Some(async move { (d, attempt(sender, endpoint, d).await) })
    });
    for (d, answer) in join_all(sends).await {
        let result = judge(sender.retries, d.attempts, answer);
        let word = match result.state {
            "delivered" => "delivered",
            "failed" => "failed",
            _ => "retried",
        };
        match word {
            "delivered" => pass.delivered += 1,
            "failed" => pass.failed += 1,
            _ => pass.retried += 1,
        }
        engine.metrics.webhook_delivery(word);
        if !store.finish_delivery(d, &result).await? {
            tracing::warn!(delivery = d.id, "a webhook delivery outlived its lease");
        }
    }
    store.prune_deliveries(KEEP_FINISHED, 1000).await?;
    Ok(pass)
}

/// How one request ended: the status it was answered with, or why none.
type Answer = Result<u16, &'static str>;

async fn attempt(sender: &Sender, endpoint: &StoredEndpoint, d: &Delivery) -> Answer {
    let Some(secret) = WebhookSecret::parse(&endpoint.secret) else {
        return Err("the endpoint's secret is unreadable");
    };
    let body = payload(endpoint, d).to_string();
    let id = event_id(d);
    let timestamp = chrono::Utc::now().timestamp();
    let signature = secret.sign(&id, timestamp, body.as_bytes());
    let sent = sender
        .client
        .post(&endpoint.url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await;
    match sent {
        Ok(answer) => Ok(answer.status().as_u16()),
        Err(e) if e.is_timeout() => Err("timed out"),
        Err(e) if e.is_connect() => Err("could not connect"),
        Err(_) => Err("the request failed"),
    }
}

/// The attempt's verdict: delivered on a 2xx; otherwise again later, or
/// failed once `retries.attempts` attempts were made.
fn judge(retries: Retries, attempts: i32, answer: Answer) -> AttemptResult {
    let (status, error) = match answer {
        Ok(status) if (200..300).contains(&status) => {
            return AttemptResult {
                state: "delivered",
                retry_in: None,
                status: Some(status),
                error: None,
            }
        }
        Ok(status) => (Some(status), None),
        Err(why) => (None, Some(why.to_owned())),
    };
    let made = u32::try_from(attempts).unwrap_or(0);
    if made >= retries.attempts {
        return AttemptResult {
            state: "failed",
            retry_in: None,
            status,
            error,
        };
    }
    AttemptResult {
        state: "pending",
        retry_in: Some(backoff(made, retries.backoff, rand::random::<f64>())),
        status,
        error,
    }
}

/// The event's id, the same on every attempt (receivers deduplicate on
/// it): a digest of what the event is, never a sequence number that would
/// tell one tenant how busy the others are.
pub fn event_id(d: &Delivery) -> String {
    let mut h = Sha256::new();
    for part in [
        d.tenant.as_str(),
        &d.endpoint_id,
        d.kind.as_str(),
        &d.subject,
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    format!("msg_{}", hex::encode(&h.finalize()[..16]))
}

/// The body: `type`, `timestamp` (when the event happened) and `data`.
pub fn payload(endpoint: &StoredEndpoint, d: &Delivery) -> serde_json::Value {
    let mut data = serde_json::json!({"operation": d.operation.as_str()});
    if let Some(key) = &d.key {
        data["key"] = key.as_str().into();
    }
    if let Some(attempt) = d.attempt {
        data["attempt"] = attempt.into();
    }
    match d.kind {
        EventKind::Quarantined => data["reason"] = d.reason.clone().into(),
        EventKind::Stuck => {
            if let Some(after) = endpoint.stuck_after {
                data["stuck_after"] = format_duration(after).into();
            }
        }
        EventKind::TakenOver => {}
        EventKind::KeyReusedSpike => {
            if let Some((threshold, window)) = endpoint.spike {
                let end = d.occurred_at + chrono::Duration::from_std(window).unwrap_or_default();
                data["window_start"] = rfc3339(d.occurred_at).into();
                data["window_end"] = rfc3339(end).into();
                data["threshold"] = threshold.into();
            }
            data["rejections"] = d.rejections.into();
        }
    }
    serde_json::json!({
        "type": d.kind.event_type(),
        "timestamp": rfc3339(d.occurred_at),
        "data": data,
    })
}
