//! `once`: run an effect at most once per (operation, key), however often it
//! is called, and return the one outcome.
//!
//! - `claimed`: run the effect (heartbeats in the background), complete
//!   with its outcome.
//! - `completed`: return the stored outcome (`replayed`), run nothing.
//! - `recovering`: the previous owner's lease ran out; ask `reconcile` what
//!   happened at the provider first, and run only what is missing.
//! - `in_progress`: wait (server-side `wait_ms`, then `Retry-After` with
//!   backoff and jitter) until the deadline, then [`Error::InProgressTimeout`].
//! - `key_reused`, `quarantined`: typed errors; nothing runs.
//!
//! The effect's failure decides what happens to the key:
//! [`EffectError::NothingDone`] releases it ([`Error::NothingDone`]); any
//! other failure may have left an effect behind, so the key is kept and left
//! to the lease rules ([`Error::Ambiguous`]). A lost lease ends in
//! [`Error::LeaseLost`] without completing.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::calls::ClaimOptions;
use crate::client::{CallLimits, Client};
use crate::context::{EffectContext, EffectError, Heartbeats, LeaseState};
use crate::error::Error;
use crate::transport::{backoff, jitter};
use crate::types::{Claim, Outcome, OwnedClaim, Protected, Steps};

/// One logical operation for [`Client::once`].
#[derive(Debug, Clone, PartialEq)]
pub struct Once {
    /// The operation class, such as `charges.create`.
    pub operation: String,
    /// The idempotency key: made once per logical operation (see
    /// [`crate::new_key`]) and stored before the first attempt.
    pub key: String,
    /// What is protected: the request, or a precomputed fingerprint.
    pub request: Protected,
    /// The lease to ask for (default: the class's).
    pub lease: Option<Duration>,
    /// How long to wait for another attempt holding the key (default 30 s).
    pub deadline: Option<Duration>,
}

impl Once {
    /// An operation on `key` protecting `request`.
    pub fn new(
        operation: impl Into<String>,
        key: impl Into<String>,
        request: impl Into<Protected>,
    ) -> Self {
        Self {
            operation: operation.into(),
            key: key.into(),
            request: request.into(),
            lease: None,
            deadline: None,
        }
    }

    /// With this lease.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// With this deadline for waiting on another attempt.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }
}

/// What `reconcile` found at the provider on `recovering`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reconciliation {
    /// The effect happened: complete with this outcome, run nothing.
    Done(Outcome),
    /// Nothing happened: run the effect (with the same effect id).
    NothingDone,
    /// These steps (name → provider reference) happened: they are recorded,
    /// and the effect runs to do the rest.
    StepsDone(BTreeMap<String, String>),
}

/// A `reconcile` for effects whose provider deduplicates by the effect id:
/// it reports nothing done, so the effect simply runs again with the same id.
pub async fn rerun_effect(
    _effect_id: String,
    _steps: Steps,
) -> Result<Reconciliation, EffectError> {
    Ok(Reconciliation::NothingDone)
}

/// How `once` obtained its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// This call ran the effect.
    Effect,
    /// The outcome was stored earlier; nothing ran.
    Replay,
    /// `reconcile` found the effect done; nothing ran.
    Reconcile,
}

/// What `once` returns.
#[derive(Debug, Clone, PartialEq)]
pub struct OnceResult {
    /// The one outcome of the operation.
    pub outcome: Outcome,
    /// True when the outcome was stored earlier and this call ran nothing.
    pub replayed: bool,
    /// When the key's replay protection ends.
    pub expires_at: DateTime<Utc>,
    /// The key's effect id.
    pub effect_id: String,
    /// The attempt that completed it.
    pub attempt: u64,
    /// How this call obtained the outcome.
    pub via: Via,
}

const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

impl Client {
    /// Runs `effect` at most once for the operation's key and returns the
    /// one outcome (see the module docs for every case). `reconcile(effect_id,
    /// steps)` is asked on `recovering`; pass [`rerun_effect`] when the
    /// provider deduplicates by the effect id.
    pub async fn once<E, EFut, R, RFut>(
        &self,
        once: Once,
        effect: E,
        reconcile: R,
    ) -> Result<OnceResult, Error>
    where
        E: FnOnce(EffectContext) -> EFut,
        EFut: Future<Output = Result<Outcome, EffectError>>,
        R: FnOnce(String, Steps) -> RFut,
        RFut: Future<Output = Result<Reconciliation, EffectError>>,
    {
        let deadline = Instant::now() + once.deadline.unwrap_or(DEFAULT_DEADLINE);
        let opts = self.options();
        let mut n: u32 = 0;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let wait = opts.max_wait.min(remaining);
            let claim_options = ClaimOptions {
                wait: Some(wait),
                lease: once.lease,
            };
            let claim = self
                .claim(&once.operation, &once.key, &once.request, &claim_options)
                .await?;
            match claim {
                Claim::Completed(c) => {
                    return Ok(OnceResult {
                        outcome: c.outcome,
                        replayed: true,
                        expires_at: c.expires_at,
                        effect_id: c.effect_id,
                        attempt: c.attempt,
                        via: Via::Replay,
                    })
                }
                Claim::InProgress(p) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::InProgressTimeout {
                            attempt: p.attempt,
                            problem: p.problem,
                        });
                    }
                    // The server already waited when asked to; otherwise honour
                    // Retry-After. Back off with jitter, never past the deadline.
                    let step = backoff(opts.backoff_base, n, opts.backoff_cap);
                    let base = match p.retry_after {
                        Some(ra) if wait.is_zero() => ra,
                        Some(ra) => ra.min(step),
                        None => step,
                    };
                    tokio::time::sleep(jitter(base).min(left)).await;
                    n += 1;
                }
                Claim::Owned(owned) => return self.own(&once, owned, effect, reconcile).await,
            }
        }
    }

    async fn own<E, EFut, R, RFut>(
        &self,
        once: &Once,
        claim: OwnedClaim,
        effect: E,
        reconcile: R,
    ) -> Result<OnceResult, Error>
    where
        E: FnOnce(EffectContext) -> EFut,
        EFut: Future<Output = Result<Outcome, EffectError>>,
        R: FnOnce(String, Steps) -> RFut,
        RFut: Future<Output = Result<Reconciliation, EffectError>>,
    {
        let (operation, key) = (once.operation.as_str(), once.key.as_str());
        let token = claim.owner_token.clone();
        let lease_state = LeaseState::new();
        let interval = heartbeat_interval(&claim, once.lease, self.options().heartbeat_fraction);
        let beats = Heartbeats::spawn(
            self.clone(),
            operation,
            key,
            &claim,
            once.lease,
            interval,
            lease_state.clone(),
        );
        let ambiguous = |source| Error::Ambiguous {
            operation: operation.to_owned(),
            key: key.to_owned(),
            effect_id: claim.effect_id.clone(),
            source,
        };

        let mut steps = claim.steps.clone();
        if claim.recovering {
            // Ask first: the previous attempt may have acted before it died.
            let verdict = match reconcile(claim.effect_id.clone(), steps.clone()).await {
                Ok(v) => v,
                Err(EffectError::NothingDone(e) | EffectError::Ambiguous(e)) => {
                    // Could not tell what happened: leave the key to the lease rules.
                    beats.stop().await;
                    return Err(ambiguous(e));
                }
            };
            match verdict {
                Reconciliation::Done(outcome) => {
                    beats.stop().await;
                    if let Some(p) = lease_state.lost() {
                        return Err(Error::LeaseLost(p));
                    }
                    return self.finish(once, &token, outcome, Via::Reconcile).await;
                }
                Reconciliation::NothingDone => {}
                Reconciliation::StepsDone(done) => {
                    for (name, provider_ref) in done {
                        if steps.contains_key(&name) {
                            continue;
                        }
                        let rec = self
                            .record_step(operation, key, &token, &name, &provider_ref)
                            .await?;
                        if let Some(s) = rec.steps.get(&name) {
                            steps.insert(name, s.clone());
                        }
                    }
                }
            }
        }

        let ctx = EffectContext::new(
            self.clone(),
            operation,
            key,
            claim.clone(),
            steps,
            lease_state.clone(),
        );
        let result = effect(ctx).await;
        beats.stop().await;
        if let Some(p) = lease_state.lost() {
            return Err(Error::LeaseLost(p));
        }
        match result {
            Ok(outcome) => self.finish(once, &token, outcome, Via::Effect).await,
            Err(EffectError::NothingDone(source)) => {
                self.release(operation, key, &token).await?;
                Err(Error::NothingDone {
                    operation: operation.to_owned(),
                    key: key.to_owned(),
                    source,
                })
            }
            Err(EffectError::Ambiguous(source)) => Err(ambiguous(source)),
        }
    }

    /// The effect has happened: try hard to store its outcome. A retry after
    /// a lost answer sends the same token and outcome, which the server
    /// accepts; `lease_lost` (another attempt took over) propagates.
    async fn finish(
        &self,
        once: &Once,
        token: &str,
        outcome: Outcome,
        via: Via,
    ) -> Result<OnceResult, Error> {
        let budget = self.options().retry_for.max(Duration::from_secs(60));
        let limits = CallLimits {
            timeout: None,
            retry_until: Some(Instant::now() + budget),
        };
        let record = self
            .complete_within(&once.operation, &once.key, token, &outcome, limits)
            .await?;
        Ok(OnceResult {
            outcome: record.outcome.unwrap_or(outcome),
            replayed: false,
            expires_at: record.expires_at,
            effect_id: record.effect_id,
            attempt: record.attempt,
            via,
        })
    }
}

/// Lease × fraction. Without an explicit lease, the lease is measured from
/// the claim: its end less now by the local clock and by the server's `Date`,
/// the shorter, so a lagging clock never spaces heartbeats past the lease.
fn heartbeat_interval(claim: &OwnedClaim, lease: Option<Duration>, fraction: f64) -> Duration {
    let lease = lease.unwrap_or_else(|| {
        let mut left = claim.lease_expires_at - Utc::now();
        if let Some(date) = claim.server_date {
            left = left.min(claim.lease_expires_at - date);
        }
        let ms = u64::try_from(left.num_milliseconds())
            .unwrap_or(0)
            .max(1_000);
        Duration::from_millis(ms)
    });
    lease.mul_f64(fraction).max(Duration::from_millis(200))
}
