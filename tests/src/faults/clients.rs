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
//! - `key_reused`: the key now belongs to another request; done;
//! - `in_progress`, `unavailable`, `rate_limited` or no answer at all: the
//!   same key again after a backoff, on any server.
//!
//! Some callers die between the effect and the completion (they forget
//! their owner token) and come back later as a new client of the same key,
//! which then waits out the lease and recovers. Others stall past their
//! lease, before the effect or between effect and completion, and carry on
//! with their old token. Some meet a transient failure before the effect
//! and release the key (no effect happened), then claim it again. An owner
//! starts the effect only while its lease has a safety margin left, as a
//! careful client must: a lease ending during the effect would let a
//! recovering attempt look at the provider too early.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};
use tokio::time::Instant;

use super::calls::{time, Backoff, Completion, Grant};
use super::fleet::Addresses;
use super::journal::{Call, Entry, Journal};
use super::window::{sleep_until, Windowed};

/// What every caller of a round shares.
pub struct Workload {
    pub http: reqwest::Client,
    pub addresses: Addresses,
    pub token: String,
    pub provider: String,
    pub operation: String,
    /// The lease each claim asks for (unless its plan says otherwise).
    pub lease_ms: u64,
    /// How much lease must be left to start the effect.
    pub margin: Duration,
    /// Chance, in thousandths, that an owner dies after its effect.
    pub die_per_mille: u32,
    /// Chance, in thousandths, that an owner stalls past its lease.
    pub stall_per_mille: u32,
    /// Chance, in thousandths, that an owner meets a transient failure
    /// before its effect and releases the key.
    pub release_per_mille: u32,
    /// Skip the provider lookup on `recovering` (breaks the recipe on
    /// purpose, to test the checker).
    pub careless: bool,
    /// A class with a short replay window: long effects and timed
    /// comebacks (see `window`).
    pub window: Option<Windowed>,
    pub journal: Arc<Journal>,
    /// Callers stop retrying after this.
    pub give_up_at: Instant,
}

/// How one caller goes about its key.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The request it sends: 0 the original, 1 a corrected one.
    pub variant: u8,
    pub lease_ms: u64,
    /// Claims go to this server; other calls to any.
    pub claim_at: Option<String>,
    /// Its first ownership pauses this long before the effect.
    pub first_pause: Option<Duration>,
}

/// The request every claim of `key` with `variant` sends.
pub fn request_of(key: &str, variant: u8) -> Value {
    let amount = if variant == 0 { "25.00" } else { "31.50" };
    json!({"order": key, "amount": amount, "currency": "EUR"})
}

/// Drives `key` to its end as caller number `caller`, the usual way.
pub async fn run_caller(w: Arc<Workload>, key: String, caller: u32) {
    let plan = Plan {
        variant: 0,
        lease_ms: w.lease_ms,
        claim_at: None,
        first_pause: None,
    };
    run_plan(w, key, caller, plan).await
}

/// Drives `key` to its end as caller number `caller`, following `plan`.
pub async fn run_plan(w: Arc<Workload>, key: String, caller: u32, mut plan: Plan) {
    let mut backoff = Backoff::default();
    loop {
        if Instant::now() >= w.give_up_at {
            w.record(&key, Entry::new(Call::GaveUp, caller));
            return;
        }
        let wait_ms = [0, 0, 500, 1500][rand::random_range(0..4)];
        let request = request_of(&key, plan.variant);
        let body = json!({"request": request, "lease_ms": plan.lease_ms, "wait_ms": wait_ms});
        let server = plan.claim_at.clone();
        let (mut entry, answer) = w.post(server.as_deref(), caller, &key, "claim", body).await;
        entry.variant = plan.variant;
        entry.attempt = answer["attempt"].as_i64();
        entry.lease_end = time(&answer["lease_expires_at"]);
        match (entry.status, entry.word.as_str()) {
            (201, "claimed") | (200, "recovering") => {
                let grant = Grant::of(&answer, plan.lease_ms);
                entry.granted_at = Some(grant.granted_at);
                entry.effect_id = Some(grant.effect_id.clone());
                w.record(&key, entry);
                backoff = Backoff::default();
                let pause = plan.first_pause.take();
                if w.own(&key, caller, &plan, &grant, pause).await {
                    return;
                }
            }
            (200, "completed") => {
                entry.outcome = Some(answer["outcome"].clone());
                entry.completed_at = time(&answer["completed_at"]);
                w.record(&key, entry);
                return;
            }
            (422, "key_reused") => {
                w.record(&key, entry);
                return;
            }
            _ => {
                let retryable = entry.is_retryable();
                w.record(&key, entry);
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
    /// Records `entry` for `key`, learning from it in a short window.
    pub fn record(&self, key: &str, entry: Entry) {
        if let Some(window) = &self.window {
            window.learn(key, &entry);
        }
        self.journal.record(key, entry);
    }

    /// The owner's part after `claimed` or `recovering`: the effect (unless
    /// the provider already has it), then the completion. True when the
    /// operation is over for this caller.
    async fn own(
        &self,
        key: &str,
        caller: u32,
        plan: &Plan,
        grant: &Grant,
        pause: Option<Duration>,
    ) -> bool {
        // A stalled owner (a long pause, a slow network) outlives its
        // lease: before the effect, its lease check must stop it; after
        // the effect, its late completion must be fenced off if another
        // attempt took over meanwhile.
        let stall = rand::random_range(0..1000) < self.stall_per_mille;
        let stall_first = stall && rand::random();
        if let Some(pause) = pause {
            self.stall(key, caller, grant, "before the effect", pause)
                .await;
        } else if stall_first {
            let pause = plan.lease_ms + rand::random_range(200..1_200);
            self.stall(
                key,
                caller,
                grant,
                "before the effect",
                Duration::from_millis(pause),
            )
            .await;
        }
        let mut lease_end = grant.lease_end;
        if let Some(window) = self
            .window
            .as_ref()
            .filter(|w| rand::random_range(0..1000) < w.slow_per_mille)
        {
            let length = window.length + Duration::from_millis(rand::random_range(200..1_500));
            match self.work(key, caller, grant, plan.lease_ms, length).await {
                Some(end) => lease_end = end,
                None => return false,
            }
        }
        let mut charge_id = None;
        if grant.recovering && !self.careless {
            charge_id = self.find(key, caller, grant).await;
        }
        let charge_id = match charge_id {
            Some(id) => id,
            None => {
                let left = (lease_end - Utc::now()).to_std().unwrap_or_default();
                if left < self.margin {
                    let mut e = grant.entry(Call::Abandoned, caller);
                    e.note = format!("{} ms of lease left", left.as_millis());
                    self.record(key, e);
                    return false;
                }
                if rand::random_range(0..1000) < self.release_per_mille {
                    self.release(key, caller, grant).await;
                    return false;
                }
                self.charge(key, caller, grant, lease_end).await
            }
        };
        if stall && !stall_first && pause.is_none() {
            let pause = plan.lease_ms + rand::random_range(200..1_200);
            self.stall(
                key,
                caller,
                grant,
                "after the effect",
                Duration::from_millis(pause),
            )
            .await;
        } else if rand::random_range(0..1000) < self.die_per_mille {
            let mut e = grant.entry(Call::Died, caller);
            e.note = format!("after charge {charge_id}");
            self.record(key, e);
            // A new client of the same key comes along later.
            match &self.window {
                Some(window) => sleep_until(window.comeback(grant, lease_end)).await,
                None => {
                    let pause = rand::random_range(0..plan.lease_ms);
                    tokio::time::sleep(Duration::from_millis(pause)).await;
                }
            }
            return false;
        }
        let outcome = json!({
            "status_code": 201,
            "headers": {"x-attempt": grant.attempt.unwrap_or_default().to_string()},
            "body": {"charge": charge_id, "order": key, "attempt": grant.attempt,
                     "caller": caller, "variant": plan.variant},
            "resource_id": charge_id,
        });
        matches!(
            self.complete(key, caller, grant, &outcome).await,
            Completion::Acknowledged
        )
    }

    /// Pauses for `pause` (past the end of the lease).
    async fn stall(&self, key: &str, caller: u32, grant: &Grant, when: &str, pause: Duration) {
        let mut e = grant.entry(Call::Stalled, caller);
        e.note = format!("{} ms {when}", pause.as_millis());
        self.record(key, e);
        tokio::time::sleep(pause).await;
    }
}
