//! The lease watch: a worker on every node (unless `IDEMKEY_WORKERS=off`)
//! that wakes every `IDEMKEY_WORKER_INTERVAL`,
//!
//! - counts stuck keys — in progress, lease expired, quarantined — and their
//!   oldest age, for `/metrics`;
//! - quarantines expired leases of classes whose policy says
//!   `on_lease_expiry: quarantine`, so such a key shows as quarantined even
//!   before anyone claims it again;
//! - forgets nodes' registrations as waiters whose waits are long over.
//!
//! Running on every node at once is safe: quarantining is the same
//! compare-and-swap a claim would run (it only matches the attempt it saw,
//! with the lease still expired), so two nodes visiting one key change it
//! once. Each wake visits a bounded batch, oldest lease first.

use crate::domain::policy::LeaseExpiry;
use crate::engine::Engine;

/// Expired leases visited per wake.
const BATCH: u32 = 200;

/// One pass: count, then quarantine what the policies say to.
#[tracing::instrument(skip_all)]
pub async fn watch_once(engine: &Engine) -> anyhow::Result<()> {
    for stuck in engine.store.stuck_counts().await? {
        let age = stuck
            .oldest
            .map(|t| (stuck.now - t).num_seconds().max(0))
            .unwrap_or(0);
        engine.metrics.stuck(stuck.kind, stuck.count, age);
    }
    // Registrations of waits long over (Postgres; see `store::events`).
    engine.store.prune_waiters().await?;
    for (k, seen) in engine.store.expired_leases(BATCH).await? {
        let policy = engine.policy(&k.tenant, &k.operation).await?;
        if policy.on_lease_expiry == LeaseExpiry::Quarantine
            && engine.quarantine_expired_lease(&k, seen).await?
        {
            engine.metrics.lease_watch_quarantined.inc();
        }
    }
    Ok(())
}
