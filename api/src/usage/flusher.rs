//! The background task that flushes usage counts and prunes old rows.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use tokio::task::JoinHandle;

use super::Usage;

/// How often each node adds its counts to the database.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// Usage rows are kept a little longer than the longest chart (a week).
const KEEP: TimeDelta = TimeDelta::days(8);
/// Pruning runs every this many flushes (about every ten minutes)...
const PRUNE_EVERY: u32 = 120;
/// ...and deletes at most this many rows at a time.
const PRUNE_BATCH: u32 = 5_000;

impl Usage {
    /// Starts flushing every `every` on the current runtime.
    pub fn spawn_flusher(&self, every: Duration) -> JoinHandle<()> {
        let usage = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await; // the first tick is immediate
            for round in 1u32.. {
                tick.tick().await;
                usage.flush_logged().await;
                if round % PRUNE_EVERY == 0 {
                    usage.prune().await;
                }
            }
        })
    }

    /// Flushes, logging rather than returning a failure (the counts stay
    /// pending for the next try).
    #[tracing::instrument(skip_all)]
    pub async fn flush_logged(&self) {
        match self.flush().await {
            Ok(0) => {}
            Ok(rows) => tracing::debug!(rows, "usage flushed"),
            Err(e) => tracing::warn!(error = %e, "usage flush failed; will retry"),
        }
    }

    /// Deletes rows older than the longest chart, a bounded batch at a time.
    /// Safe on every node at once: deleting a row twice deletes it once.
    async fn prune(&self) {
        let before = Utc::now() - KEEP;
        match self.store().prune_usage(before, PRUNE_BATCH).await {
            Ok(0) => {}
            Ok(rows) => tracing::debug!(rows, "old usage rows pruned"),
            Err(e) => tracing::warn!(error = %e, "usage pruning failed"),
        }
    }
}
