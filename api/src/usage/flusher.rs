//! Flushing usage counts and pruning old rows: the usage flusher's pass
//! (run by `crate::workers`).

use std::time::Duration;

use chrono::{TimeDelta, Utc};

use super::Usage;
use crate::store::StoreResult;

/// How often each node adds its counts to the database.
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);

/// Usage rows are kept a little longer than the longest chart (a week).
const KEEP: TimeDelta = TimeDelta::days(8);
/// Pruning runs every this many flushes (about every ten minutes)...
pub const PRUNE_EVERY: u32 = 120;
/// ...and deletes at most this many rows at a time.
const PRUNE_BATCH: u32 = 5_000;

impl Usage {
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

    /// Deletes rows older than the longest chart (usage, hot keys, and
    /// refusals, also those past the newest of their class), a bounded batch at a time. Safe on every node
    /// at once: deleting a row twice deletes it once.
    pub async fn prune(&self) -> StoreResult<u64> {
        let before = Utc::now() - KEEP;
        let rows = self.store().prune_usage(before, PRUNE_BATCH).await?
            + self.store().prune_rejections(before, PRUNE_BATCH).await?
            + self.store().prune_hot_keys(before, PRUNE_BATCH).await?;
        if rows > 0 {
            tracing::debug!(rows, "old usage rows pruned");
        }
        Ok(rows)
    }
}
