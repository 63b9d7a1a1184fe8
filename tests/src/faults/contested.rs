//! Contested keys (the `release` round): a takeover read before a release
//! and carried out after the key was claimed anew.
//!
//! Owner A claims the original request with a one-second lease and pauses
//! past it before its effect. Right after A's lease ends, caller B retries
//! the same request through a server whose database link is very slow, so
//! that the claim's read of the record and its takeover reach the database
//! seconds apart. Meanwhile A wakes, meets a transient failure before the
//! effect and releases the key, corrects its request, claims again — the
//! new record starts again at attempt 1 — and pauses past that lease too.
//! A takeover that compared only the attempt number would now take A's new
//! record over for B's request: B would charge and store its outcome under
//! A's request. Compared with the owner token it saw, B's takeover misses,
//! and B's next look finds a key of another request (`key_reused`).
//!
//! The timing is steered through the slow link's [`Tap`]: A wakes when B's
//! second statement about the key (its read, after its insert) has gone
//! down the link and reached the database, and its second pause outlasts
//! the seconds B's takeover still needs to get there.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::calls::{Backoff, Grant};
use super::clients::{request_of, run_plan, Plan, Workload};
use super::journal::Call;
use super::proxy::Tap;
use super::window::sleep_until;

/// The server with the slow link, as the contested keys' retries see it.
#[derive(Clone)]
pub struct Contest {
    pub server: String,
    /// Its link's delay each way.
    pub latency: Duration,
    /// What its link carries towards the database.
    pub tap: Tap,
}

/// Runs A and B of one contested key: A is `caller`, B is `caller + 1`.
pub async fn run_contested(w: Arc<Workload>, key: String, caller: u32, contest: Contest) {
    let original = Plan {
        variant: 0,
        lease_ms: 1_000,
        claim_at: None,
        first_pause: None,
    };
    let Some(grant) = claim_granted(&w, &key, caller, &original).await else {
        return run_plan(w, key, caller, original).await;
    };
    // B: the same request, as soon as A's lease is over, through the slow
    // link, with a lease long enough to outlast that link.
    let mut statements = contest.tap.watch(Tap::parameter(&key));
    let retry = Plan {
        variant: 0,
        lease_ms: 8_000,
        claim_at: Some(contest.server.clone()),
        first_pause: None,
    };
    let b = {
        let (w, key, lease_end) = (w.clone(), key.clone(), grant.lease_end);
        tokio::spawn(async move {
            sleep_until(lease_end + chrono::TimeDelta::milliseconds(50)).await;
            run_plan(w, key, caller + 1, retry).await
        })
    };
    // A pauses until B's read has reached the database (its insert and its
    // read went down the link; the read arrives one delay later).
    let mut e = grant.entry(Call::Stalled, caller);
    e.note = "before the effect, until caller B's read reached the database".into();
    w.record(&key, e);
    let read = statements.wait_for(|n| *n >= 2);
    let _ = tokio::time::timeout(Duration::from_secs(30), read).await;
    tokio::time::sleep(contest.latency + Duration::from_millis(100)).await;
    w.release(&key, caller, &grant).await;
    // The corrected request, whose first ownership pauses until B's
    // takeover has reached the database: the read's answer back, a ping of
    // the pooled connection and a first preparation of the statement (two
    // delays each, the last two not always needed), the statement down.
    let corrected = Plan {
        variant: 1,
        lease_ms: 1_000,
        claim_at: None,
        first_pause: Some(contest.latency * 10),
    };
    run_plan(w, key, caller, corrected).await;
    b.await.expect("caller B panicked");
}

/// Claims until an answer comes; the grant if it was `claimed`.
async fn claim_granted(w: &Workload, key: &str, caller: u32, plan: &Plan) -> Option<Grant> {
    let mut backoff = Backoff::default();
    loop {
        let body = json!({"request": request_of(key, plan.variant), "lease_ms": plan.lease_ms});
        let (mut entry, answer) = w.post(None, caller, key, "claim", body).await;
        let retryable = entry.is_retryable() && Instant::now() < w.give_up_at;
        if entry.status == 201 {
            let grant = Grant::of(&answer, plan.lease_ms);
            entry.attempt = grant.attempt;
            entry.granted_at = Some(grant.granted_at);
            entry.lease_end = Some(grant.lease_end);
            entry.effect_id = Some(grant.effect_id.clone());
            w.record(key, entry);
            return Some(grant);
        }
        w.record(key, entry);
        if !retryable {
            return None;
        }
        backoff.sleep().await;
    }
}
