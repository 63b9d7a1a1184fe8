//! Claim: take ownership of a key, or learn what became of it.
//!
//! 1. **In-process cache.** A completed key's outcome may be in this node's
//!    cache: answer the replay (or `key_reused`) with no I/O at all. Checked
//!    again before every later look.
//! 2. **Look**, shared by every concurrent claim of the key on this node
//!    (see `flight`): Redis for a completed outcome, else the atomic
//!    `insert … on conflict do nothing`, else a read of the existing row as
//!    its own statement.
//! 3. **Decide** on what the look saw, and carry out a renewal, takeover or
//!    quarantine with its own compare-and-swap; when that matches nothing,
//!    somebody else changed the row: look again.
//! 4. **Wait** (`wait_ms`) while another attempt holds a live lease: sleep
//!    until a key event says the record changed (the owner completed,
//!    released or was quarantined, on this node or another), the lease ends,
//!    the deadline passes, or at the latest [`SAFETY_REREAD`] — the safety
//!    net for an event that was lost. Then look again. Past the deadline the
//!    answer is `in_progress` with `Retry-After`. On Postgres the node first
//!    registers as a waiter on the key (`waiters`): other nodes announce a
//!    change only to keys somebody waits on.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::look::Look;
use super::refusal::{Busy, Refusal};
use super::Engine;
use crate::cache::FinalOutcome;
use crate::domain::fingerprint::fields::FieldDigests;
use crate::domain::{
    decide, decide_completed, Decision, Fingerprint, OwnerToken, Policy, ScopedKey,
};
use crate::store::{KeyRecord, NewClaim, Store};

/// How often a contended claim re-runs its statements before giving up with
/// a retryable error. Each retry follows a row change by somebody else, so
/// running out means the key is being churned, not that we raced once.
const MAX_RACES: usize = 8;

/// A waiting claim looks at its key at least this often, in case a key
/// event was lost. Ticks fall on whole multiples of it since the process
/// started, so every claim waiting on one key ticks together and shares
/// one look.
pub const SAFETY_REREAD: Duration = Duration::from_secs(1);

/// Waiting for a lease to end wakes this much after it, so the database's
/// clock has passed it too.
const LEASE_SLACK: Duration = Duration::from_millis(5);

pub struct ClaimRequest {
    /// The request's fingerprint under the class's current rules.
    pub fingerprint: Fingerprint,
    /// Those rules' digest (`FingerprintRules::digest` of the policy the
    /// claim is made under), computed once per request.
    pub rules_digest: Option<[u8; 32]>,
    /// The `request` JSON text, when the client sent one (not a precomputed
    /// fingerprint): a record written under other fingerprint rules judges
    /// it again under its own.
    pub request_json: Option<String>,
    /// The lease asked for, already checked against the class's range
    /// (`Policy::lease_for`).
    pub lease: Duration,
    pub wait_ms: Option<u64>,
}

pub enum ClaimAnswer {
    /// A new key (or one past its window): this attempt owns it.
    Claimed {
        record: KeyRecord,
        token: OwnerToken,
    },
    /// The previous owner's lease ran out: this attempt took over.
    Recovering {
        record: KeyRecord,
        token: OwnerToken,
        previous: Box<KeyRecord>,
    },
    /// Completed earlier: replay.
    Completed { replay: Arc<FinalOutcome> },
}

impl Engine {
    // A debug span: at the default level an info span here cost ~2 % of a
    // cached replay's CPU (its fields are formatted on every claim).
    #[tracing::instrument(level = "debug", skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn claim(
        &self,
        k: &ScopedKey,
        policy: &Policy,
        req: &ClaimRequest,
    ) -> Result<ClaimAnswer, Refusal> {
        let lease = req.lease;
        let rules = req.rules_digest;
        // The common replay: a completed key in this node's cache needs no
        // owner token, subscription or look.
        if let Some(hit) = self.cache.local(k) {
            let judged = self.judged(req, rules, hit.fingerprint, hit.rules_digest);
            return replay(hit.clone(), &judged.await?, req, policy);
        }
        let deadline = Instant::now() + policy.wait_for(req.wait_ms);
        // Subscribed before the first look, so no change after it is missed.
        let mut events = (deadline > Instant::now()).then(|| self.events.subscribe(k.hash()));
        // Until an event arrives, a recent look may be older than the
        // subscription: no change was heard since it started, or it would
        // have been dropped.
        let subscribed = events.as_ref().map(|e| e.since());
        let token = OwnerToken::generate();
        let claim = NewClaim {
            fingerprint: req.fingerprint,
            owner: token.hash(),
            lease,
            replay_window: policy.replay_window,
            tier_after: policy.tier_after(),
            rules_digest: rules,
            field_digests: (req.request_json.as_deref())
                .and_then(|json| FieldDigests::of(json, &policy.fingerprint).ok())
                .map(|digests| digests.to_text()),
        };
        let mut races = 0;
        let mut cache_checked = true;
        // When the look `seen` came from started (`None`: a recent
        // snapshot's, of unknown age), and since when a look must have
        // started to be used (this node's waiter registration, once made).
        let mut looked_at: Option<Instant>;
        let mut fresh_after: Option<Instant> = None;
        let mut registered = false;
        while races < MAX_RACES {
            // Before every later look: a woken waiter often finds the outcome
            // here, cached by the first of them to look.
            if !std::mem::take(&mut cache_checked) {
                if let Some(hit) = self.cache.local(k) {
                    let judged = self.judged(req, rules, hit.fingerprint, hit.rules_digest);
                    return replay(hit.clone(), &judged.await?, req, policy);
                }
            }
            let since = events
                .as_ref()
                .map(|e| fresh_after.map_or(e.since(), |f| f.max(e.since())));
            // Only a claim that asked to wait reuses a recent look: it is
            // woken by key events anyway, and the storm of retries it stands
            // for is what the coalescing window is for.
            let recent = events
                .as_ref()
                .and_then(|_| self.recent.get(k, since.filter(|s| Some(*s) != subscribed)));
            let look = match recent {
                Some(row) => {
                    self.metrics.coalesced_reads.inc();
                    looked_at = None;
                    Look::Row(row)
                }
                None => {
                    // The first look of a waiting claim may join a flight
                    // that started before it subscribed (a storm arrives all
                    // at once), unless the key changed since that flight
                    // started: then the change may have been announced
                    // before we listened, and only a newer look is safe.
                    let first = subscribed.is_some() && since == subscribed;
                    let (look, started) =
                        self.look_shared(k, since.filter(|_| !first), &claim).await;
                    if first
                        && subscribed.is_some_and(|s| started < s)
                        && self.recent.changed_since(k, started)
                    {
                        let (look, started) = self.look_shared(k, since, &claim).await;
                        looked_at = Some(started);
                        look
                    } else {
                        looked_at = Some(started);
                        look
                    }
                }
            };
            let seen = match look {
                Look::Final(outcome) => {
                    let judged = self.judged(req, rules, outcome.fingerprint, outcome.rules_digest);
                    return replay(outcome.clone(), &judged.await?, req, policy);
                }
                Look::Row(row) if row.owner_token_hash == claim.owner => {
                    return Ok(ClaimAnswer::Claimed {
                        record: Arc::unwrap_or_clone(row),
                        token,
                    })
                }
                Look::Row(row) => row,
                Look::Vanished => {
                    races += 1; // released in between: try to insert again
                    continue;
                }
                Look::Unavailable => return Err(Refusal::Unavailable),
                Look::OverQuota(exceeded) => return Err(Refusal::QuotaExceeded(exceeded)),
            };
            let read_at = Instant::now();
            let judged = self
                .judged(req, rules, seen.fingerprint, seen.rules_digest)
                .await?;
            match decide(&seen.seen(), &judged, policy.on_lease_expiry) {
                Decision::Renew => {
                    // Renewing makes a new key of one past its window.
                    if let Some(exceeded) = self.quotas.refuses(&k.tenant) {
                        return Err(Refusal::QuotaExceeded(exceeded));
                    }
                    // The old record is past its window, so no cache still
                    // holds it (entries end before the window does); evicting
                    // anyway keeps the rule "evict before rewriting" without
                    // exceptions. A Redis that cannot confirm is no reason
                    // to refuse the claim, for that same reason.
                    let _ = self.evict(k).await;
                    let renewed = self
                        .counted("renew_expired")
                        .renew_expired(k, &claim)
                        .await?;
                    if let Some(record) = renewed {
                        self.changed(k);
                        return Ok(ClaimAnswer::Claimed { record, token });
                    }
                }
                Decision::KeyReused => {
                    let theirs = seen.field_digests.as_deref();
                    return Err(key_reused(theirs, seen.rules_digest, req, policy));
                }
                Decision::Replay => match FinalOutcome::of(&seen) {
                    Some(outcome) => return replay(Arc::new(outcome), &judged, req, policy),
                    // A tiered outcome the archive could not give us.
                    None => return Err(Refusal::Unavailable),
                },
                Decision::Quarantined => return Err(Refusal::Quarantined),
                Decision::TakeOver => {
                    let taken = self
                        .counted("take_over")
                        .take_over(k, seen.version(), claim.owner, lease)
                        .await?;
                    if let Some(record) = taken {
                        return Ok(ClaimAnswer::Recovering {
                            record,
                            token,
                            previous: Box::new(Arc::unwrap_or_clone(seen)),
                        });
                    }
                }
                Decision::Quarantine => {
                    let quarantined = self
                        .counted("quarantine_expired")
                        .quarantine_expired(k, seen.version())
                        .await?;
                    if quarantined.is_some() {
                        self.changed_everywhere(k, None).await;
                        return Err(Refusal::Quarantined);
                    }
                }
                Decision::InProgress { retry_after } => {
                    let Some(events) = events.as_mut().filter(|_| Instant::now() < deadline) else {
                        return Err(in_progress(&seen, retry_after));
                    };
                    // Before the first wait on Postgres: make sure a change
                    // of the key is announced to this node, and look again
                    // if the look we hold may predate that.
                    if !std::mem::replace(&mut registered, true)
                        && matches!(self.store, Store::Postgres(_))
                    {
                        match self.register_waiter(k, deadline).await {
                            Ok(made) if looked_at.is_none_or(|t| t < made) => {
                                fresh_after = Some(made);
                                continue;
                            }
                            Ok(_) => {}
                            // The periodic re-read still ends the wait.
                            Err(e) => tracing::warn!(error = ?e, "could not register as a waiter"),
                        }
                    }
                    let lease_left = (seen.lease_expires_at - seen.observed_at)
                        .to_std()
                        .unwrap_or_default();
                    let lease_end = read_at + lease_left + LEASE_SLACK;
                    let tick = self.next_tick();
                    let _waiting = self.metrics.waiting();
                    let woken_by = tokio::select! {
                        _ = events.changed() => "event",
                        _ = tokio::time::sleep_until(deadline.min(lease_end).min(tick)) => {
                            if tick < deadline.min(lease_end) { "safety_reread" }
                            else if lease_end < deadline { "lease_end" }
                            else { "deadline" }
                        }
                    };
                    self.metrics.woken(woken_by);
                    continue; // waiting is not a race
                }
            }
            races += 1;
        }
        tracing::warn!("claim kept losing races; answering unavailable");
        Err(Refusal::Unavailable)
    }

    /// The next whole multiple of [`SAFETY_REREAD`] since this engine's
    /// clock started.
    fn next_tick(&self) -> Instant {
        let since = self.started.elapsed();
        let period = SAFETY_REREAD.as_nanos();
        let ticks = since.as_nanos() / period + 1;
        self.started + Duration::from_nanos(u64::try_from(ticks * period).unwrap_or(u64::MAX))
    }
}

/// A completed key: its outcome if the fingerprint matches, else key reuse.
fn replay(
    outcome: Arc<FinalOutcome>,
    fingerprint: &Fingerprint,
    req: &ClaimRequest,
    policy: &Policy,
) -> Result<ClaimAnswer, Refusal> {
    match decide_completed(&outcome.fingerprint, fingerprint) {
        Decision::Replay => Ok(ClaimAnswer::Completed { replay: outcome }),
        _ => {
            let theirs = outcome.field_digests.as_deref();
            Err(key_reused(theirs, outcome.rules_digest, req, policy))
        }
    }
}

/// Key reuse, naming the fields of `req` that differ from the request the
/// key was first claimed with (`theirs`, that record's stored field
/// digests) when both are known under the same fingerprint rules: not for
/// a precomputed fingerprint, a record older than field digests, or a
/// record written under rules the class has since changed. Computed only
/// here, off every answer but this refusal.
fn key_reused(
    theirs: Option<&str>,
    their_rules: Option<[u8; 32]>,
    req: &ClaimRequest,
    policy: &Policy,
) -> Refusal {
    let mismatch = || {
        if their_rules != req.rules_digest {
            return None;
        }
        let theirs = FieldDigests::parse(theirs?)?;
        let ours = FieldDigests::of(req.request_json.as_deref()?, &policy.fingerprint).ok()?;
        Some(theirs.mismatched(&ours))
    };
    Refusal::KeyReused(mismatch())
}

fn in_progress(seen: &KeyRecord, retry_after: Duration) -> Refusal {
    Refusal::InProgress(Busy::of(seen, retry_after))
}
