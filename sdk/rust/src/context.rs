//! What an effect is given while it owns a key: the effect id to pass to its
//! provider, the steps already done, a way to record steps, and the lease —
//! kept alive by heartbeats in a background task, with a signal that fires
//! when it is lost (another attempt took over, or the key was quarantined).
//! And [`EffectError`], what an effect returns when it fails:
//! [`EffectError::NothingDone`] releases the key, anything else leaves it to
//! the lease rules.

use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::{CallLimits, Client};
use crate::error::{BoxError, Error, Problem};
use crate::types::{OwnedClaim, PreviousAttempt, StepRecord, Steps};

/// Whether the lease is still ours, shared by the heartbeats and the effect.
pub(crate) struct LeaseState {
    lost: watch::Sender<bool>,
    why: Mutex<Option<Problem>>,
}

impl LeaseState {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            lost: watch::Sender::new(false),
            why: Mutex::new(None),
        })
    }

    /// Marks the lease lost, keeping the first answer that showed it.
    pub(crate) fn lose(&self, problem: Problem) {
        let mut why = self.why.lock().unwrap_or_else(|e| e.into_inner());
        if why.is_none() {
            *why = Some(problem);
        }
        drop(why);
        self.lost.send_replace(true);
    }

    /// The answer that showed the loss, once lost.
    pub(crate) fn lost(&self) -> Option<Problem> {
        self.why.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Fires when the lease is lost. Clone it into whatever does the work.
#[derive(Clone)]
pub struct LeaseSignal {
    rx: watch::Receiver<bool>,
}

impl LeaseSignal {
    /// True once the lease is lost.
    pub fn is_lost(&self) -> bool {
        *self.rx.borrow()
    }

    /// Returns when the lease is lost (or when the `once` call that owned
    /// it has ended).
    pub async fn lost(&mut self) {
        let _ = self.rx.wait_for(|lost| *lost).await;
    }
}

/// Given to the effect. Cheap to clone.
#[derive(Clone)]
pub struct EffectContext {
    inner: Arc<ContextInner>,
}

struct ContextInner {
    client: Client,
    operation: String,
    key: String,
    owner_token: String,
    claim: OwnedClaim,
    steps: Mutex<Steps>,
    lease: Arc<LeaseState>,
}

impl EffectContext {
    pub(crate) fn new(
        client: Client,
        operation: &str,
        key: &str,
        claim: OwnedClaim,
        steps: Steps,
        lease: Arc<LeaseState>,
    ) -> Self {
        Self {
            inner: Arc::new(ContextInner {
                client,
                operation: operation.to_owned(),
                key: key.to_owned(),
                owner_token: claim.owner_token.clone(),
                claim,
                steps: Mutex::new(steps),
                lease,
            }),
        }
    }

    /// The operation class.
    pub fn operation(&self) -> &str {
        &self.inner.operation
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.inner.key
    }

    /// Pass it to your provider as its idempotency key / reference: the same
    /// for every attempt of this key.
    pub fn effect_id(&self) -> &str {
        &self.inner.claim.effect_id
    }

    /// The attempt number (1 for a new key).
    pub fn attempt(&self) -> u64 {
        self.inner.claim.attempt
    }

    /// True when this attempt took over from an owner whose lease ran out.
    pub fn recovering(&self) -> bool {
        self.inner.claim.recovering
    }

    /// The attempt taken over, when recovering.
    pub fn previous_attempt(&self) -> Option<&PreviousAttempt> {
        self.inner.claim.previous_attempt.as_ref()
    }

    /// Steps already done (recorded on the key, or reported by reconcile).
    pub fn steps(&self) -> Steps {
        self.inner
            .steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The recorded step of this name, if it is done.
    pub fn step_done(&self, name: &str) -> Option<StepRecord> {
        self.inner
            .steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// The effect id of a named step: `effect_id + "." + name`.
    pub fn step_effect_id(&self, name: &str) -> String {
        format!("{}.{name}", self.effect_id())
    }

    /// True once the lease is lost: stop, do not act further.
    pub fn lease_lost(&self) -> bool {
        self.inner.lease.lost().is_some()
    }

    /// A signal that fires when the lease is lost.
    pub fn lease_signal(&self) -> LeaseSignal {
        LeaseSignal {
            rx: self.inner.lease.lost.subscribe(),
        }
    }

    fn lease_lost_error(&self) -> Option<Error> {
        self.inner.lease.lost().map(Error::LeaseLost)
    }

    /// Records that a named step finished at its provider.
    pub async fn record_step(&self, name: &str, provider_ref: &str) -> Result<(), Error> {
        if let Some(e) = self.lease_lost_error() {
            return Err(e);
        }
        let i = &self.inner;
        match i
            .client
            .record_step(&i.operation, &i.key, &i.owner_token, name, provider_ref)
            .await
        {
            Ok(rec) => {
                if let Some(s) = rec.steps.get(name) {
                    i.steps
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(name.to_owned(), s.clone());
                }
                Ok(())
            }
            Err(Error::LeaseLost(p) | Error::Quarantined(p)) => {
                i.lease.lose(p.clone());
                Err(Error::LeaseLost(p))
            }
            Err(e) => Err(e),
        }
    }

    /// Runs a named step unless it is already done: `run(step_effect_id)`
    /// performs it and returns the provider's reference, which is then
    /// recorded. Returns the provider reference (the recorded one when the
    /// step was done already).
    pub async fn step<F, Fut>(&self, name: &str, run: F) -> Result<String, EffectError>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<String, EffectError>>,
    {
        if let Some(done) = self.step_done(name) {
            return Ok(done.provider_ref);
        }
        if let Some(e) = self.lease_lost_error() {
            return Err(e.into());
        }
        let provider_ref = run(self.step_effect_id(name)).await?;
        self.record_step(name, &provider_ref).await?;
        Ok(provider_ref)
    }
}

/// The heartbeat task of one owned key; aborted if dropped unstopped (a
/// cancelled `once`), so it never outlives its owner.
pub(crate) struct Heartbeats {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Heartbeats {
    /// Heartbeats every `interval` until stopped or the lease is lost.
    pub(crate) fn spawn(
        client: Client,
        operation: &str,
        key: &str,
        claim: &OwnedClaim,
        lease: Option<Duration>,
        interval: Duration,
        state: Arc<LeaseState>,
    ) -> Self {
        let (stop, mut stopped) = oneshot::channel::<()>();
        let (operation, key, token) = (
            operation.to_owned(),
            key.to_owned(),
            claim.owner_token.clone(),
        );
        let budget = interval.max(Duration::from_millis(500));
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    () = tokio::time::sleep(interval) => {}
                }
                let limits = CallLimits {
                    timeout: Some(budget),
                    retry_until: Some(Instant::now() + budget),
                };
                let beat = client.heartbeat_within(&operation, &key, &token, lease, limits);
                let answer = tokio::select! {
                    _ = &mut stopped => return,
                    answer = beat => answer,
                };
                // Transport trouble or a 503: try again at the next tick.
                if let Err(
                    Error::LeaseLost(p)
                    | Error::Quarantined(p)
                    | Error::NotFound(p)
                    | Error::AlreadyCompleted(p),
                ) = answer
                {
                    state.lose(p);
                    return;
                }
            }
        });
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the heartbeats and waits until none is in flight.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Heartbeats {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// How an effect (or a reconcile) failed.
///
/// `?` on any standard error gives [`EffectError::Ambiguous`], the safe
/// default: nothing is released and the key is left to the lease rules.
/// Return [`EffectError::NothingDone`] only when you KNOW nothing happened
/// (validation failed, the provider refused before acting): the key is
/// released and the next call runs afresh.
#[derive(Debug)]
pub enum EffectError {
    /// Nothing was done: release the key.
    NothingDone(BoxError),
    /// Something may have been done: keep the key (lease/quarantine rules).
    Ambiguous(BoxError),
}

impl EffectError {
    /// Nothing was done, for this reason.
    pub fn nothing_done(why: impl Into<BoxError>) -> Self {
        Self::NothingDone(why.into())
    }

    /// Something may have been done.
    pub fn ambiguous(why: impl Into<BoxError>) -> Self {
        Self::Ambiguous(why.into())
    }
}

impl fmt::Display for EffectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NothingDone(e) => write!(f, "nothing done: {e}"),
            Self::Ambiguous(e) => write!(f, "ambiguous: {e}"),
        }
    }
}

impl<E> From<E> for EffectError
where
    E: std::error::Error + Send + Sync + 'static,
{
    fn from(e: E) -> Self {
        Self::Ambiguous(Box::new(e))
    }
}
