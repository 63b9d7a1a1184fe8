//! The claim protocol, carried out against the store.
//!
//! The domain decides what a record means; the store performs one atomic
//! statement; this layer loops between the two until a statement succeeds or
//! an answer is final. A failed compare-and-swap means somebody else changed
//! the row first, so we read again and decide again — we never act on a read
//! alone.
//!
//! Around that loop sit three things that make it cheaper, none of which
//! decides anything: the outcome cache (replays of completed keys),
//! single-flight looks (a storm on one key shares its reads) and key events
//! (waiting claims are woken when the owner finishes).

mod archived;
mod claim;
mod classes;
mod events;
mod fingerprints;
mod flight;
mod look;
mod owner;
mod policy_cache;
mod quota;
mod read_model;
mod recent;
mod recovery;
mod refusal;
mod rules;
mod waiters;
mod webhooks;

use std::sync::Arc;

pub use claim::{ClaimAnswer, ClaimRequest};
pub use classes::OperationClass;
pub use fingerprints::Fingerprints;
pub use owner::OwnerCall;
pub use policy_cache::POLICY_TTL;
pub use quota::{QuotaUsage, Quotas};
pub use recent::COALESCING_WINDOW;
pub use recovery::MAX_STEPS;
pub use refusal::{Busy, Refusal};
pub use webhooks::NewWebhook;

use crate::archive::Archive;
use crate::cache::{CacheUnavailable, OutcomeCache};
use crate::domain::{EffectSecret, ScopedKey};
use crate::metrics::Metrics;
use crate::store::{Heard, Store};
use events::KeyEvents;
use flight::Flights;
use look::Look;
use policy_cache::PolicyCache;

#[derive(Clone)]
pub struct Engine {
    // The engine's insides are the crate's: the routes, the workers and
    // the health check reach them; the dashboard reads through methods
    // (`read_model`).
    pub(crate) store: Store,
    pub(crate) secret: EffectSecret,
    pub(crate) cache: OutcomeCache,
    /// Where tiered outcomes live (read through routing entries, written
    /// by the tiering worker).
    pub(crate) archive: Archive,
    pub metrics: Arc<Metrics>,
    /// Operation-class policies recently read on this node (`Engine::policy`).
    policies: PolicyCache,
    events: Arc<KeyEvents>,
    flights: Arc<Flights<Look>>,
    /// Fingerprint rule sets read from the store (`rules`).
    rule_sets: Arc<rules::RuleSets>,
    /// Fingerprints of request texts seen recently (`fingerprints`).
    pub(crate) fingerprints: Fingerprints,
    /// In-progress looks reused within the coalescing window (`recent`).
    recent: Arc<recent::RecentLooks>,
    /// Where waiting claims count their safety ticks from.
    started: tokio::time::Instant,
    /// This node's registrations as a waiter (Postgres; `waiters`).
    waiters: Arc<waiters::Waiters>,
    /// Registrations being made, shared by the claims that start waiting
    /// on one key at once (`None`: it failed, and was logged).
    registering: Arc<Flights<Option<tokio::time::Instant>>>,
    /// Which tenants are refused new keys (`quota`).
    quotas: Arc<Quotas>,
}

impl Engine {
    pub fn new(
        store: Store,
        secret: EffectSecret,
        cache: OutcomeCache,
        archive: Archive,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            store,
            secret,
            cache,
            archive,
            metrics,
            policies: PolicyCache::new(POLICY_TTL),
            events: Arc::default(),
            flights: Arc::default(),
            rule_sets: Arc::default(),
            fingerprints: Fingerprints::default(),
            recent: Arc::default(),
            started: tokio::time::Instant::now(),
            waiters: Arc::default(),
            registering: Arc::default(),
            quotas: Arc::default(),
        }
    }

    /// The same engine with the server's default quotas (none unless set).
    pub fn with_quota_defaults(mut self, defaults: crate::domain::quota::Limits) -> Self {
        self.quotas = Arc::new(Quotas::new(defaults));
        self
    }

    /// The store, counting the statement about to be sent.
    fn counted(&self, statement: &'static str) -> &Store {
        self.metrics.statement(statement);
        &self.store
    }

    /// Drops every cached copy of `k`'s outcome, on every node: this node's
    /// in-process layer, Redis, and (through a key event) the other nodes'
    /// in-process layers. Call it **before** any statement that deletes or
    /// rewrites a record that may be completed — renewing a key past its
    /// window today; resolve and cleanup when they exist. The statement's
    /// own key event then evicts again once it commits, which closes the gap
    /// in which another node could re-read the old row.
    ///
    /// `Err` when Redis could not confirm the delete. Its copy then lives
    /// until its time to live runs out, never past the record's expiry: a
    /// caller changing a record that is *inside* its window must not go on.
    pub async fn evict(&self, k: &ScopedKey) -> Result<(), CacheUnavailable> {
        let redis = self.cache.evict(k).await;
        let announced = match self.store {
            Store::Postgres(_) => self.counted("announce").announce(k.hash()).await,
            Store::Sqlite(_) => Ok(()),
        };
        if let Err(e) = announced {
            tracing::warn!(error = ?e, "could not announce a key change to other nodes");
            return Err(CacheUnavailable);
        }
        redis
    }

    /// Makes sure this node is registered (Postgres) as waiting on `k`
    /// until at least `until`; answers when the covering registration was
    /// made.
    async fn register_waiter(
        &self,
        k: &ScopedKey,
        until: tokio::time::Instant,
    ) -> Result<tokio::time::Instant, crate::store::StoreError> {
        let h = k.hash();
        if let Some(made) = self.waiters.covering(h, until) {
            return Ok(made);
        }
        // Claims that start waiting on the key at once (a storm of
        // duplicates) share one registration, and so one moment after
        // which their next look must start: they can then share that look
        // too, instead of each needing one newer than its own statement.
        let (engine, key) = (self.clone(), k.clone());
        let (shared, _, _) = self
            .registering
            .run_timed(k, None, move || async move {
                engine
                    .register_now(&key, until)
                    .await
                    .map_err(|e| tracing::warn!(error = ?e, "could not register as a waiter"))
                    .ok()
            })
            .await;
        if let Some(made) = shared.flatten().and(self.waiters.covering(h, until)) {
            return Ok(made);
        }
        // The shared registration failed or ends before this wait would.
        self.register_now(k, until).await
    }

    /// Registers this node as waiting on `k` until at least `until`, now.
    async fn register_now(
        &self,
        k: &ScopedKey,
        until: tokio::time::Instant,
    ) -> Result<tokio::time::Instant, crate::store::StoreError> {
        let h = k.hash();
        let asked = tokio::time::Instant::now();
        let length = waiters::Waiters::length(asked, until);
        self.counted("register_waiter")
            .register_waiter(k, self.waiters.node(), length)
            .await?;
        let made = tokio::time::Instant::now();
        self.waiters.remember(h, asked, length, made);
        Ok(made)
    }

    /// This node changed `k`'s record: wakes its waiters and drops its
    /// copies here, and on Postgres announces the change to the other nodes
    /// when one of them waits on the key — `waited` as the change's own
    /// statement said, else asked now that the change has committed. A node
    /// that cannot be told falls back to its waiters' periodic re-read.
    async fn changed_everywhere(&self, k: &ScopedKey, waited: Option<bool>) {
        self.changed(k);
        if !matches!(self.store, Store::Postgres(_)) {
            return;
        }
        let waited = match waited {
            Some(waited) => Ok(waited),
            None => self.counted("waited").waited(k).await,
        };
        let announced = match waited {
            Ok(false) => Ok(()),
            Ok(true) => self.counted("announce").announce(k.hash()).await,
            Err(e) => Err(e),
        };
        if let Err(e) = announced {
            tracing::warn!(error = ?e, "could not announce a key change to the nodes waiting on it");
        }
    }

    /// This node changed `k`'s record: wake its waiters and drop its cached
    /// copy here (see `changed_everywhere` for the other nodes).
    fn changed(&self, k: &ScopedKey) {
        let h = k.hash();
        self.recent.changed(h);
        self.cache.evict_local(h);
        self.events.publish(h);
    }

    /// Handles what the key-event listener heard from the database.
    pub fn heard(&self, heard: Heard) {
        match heard {
            Heard::Key(h) => {
                self.metrics.key_event("postgres");
                self.recent.changed(h);
                self.cache.evict_local(h);
                self.events.publish(h);
            }
            Heard::Gap => {
                self.metrics.key_event("gap");
                self.recent.gap();
                self.cache.clear_local();
                self.events.publish_all();
            }
        }
    }

    /// On Postgres, listens for other nodes' key changes for as long as the
    /// process runs. SQLite serves one process: nothing to listen to.
    pub fn listen_for_key_events(&self) {
        if let Store::Postgres(pg) = &self.store {
            let (pg, engine) = (pg.clone(), self.clone());
            tokio::spawn(pg.listen(move |heard| engine.heard(heard)));
        }
    }
}
