//! Reading through routing entries: the outcome of a tiered key, fetched
//! from the archive by byte range and checked against the SHA-256 its
//! routing entry holds (SPEC section 7, "Tiering").
//!
//! A tiered record keeps its unique key, fingerprint and state in the
//! database, so ownership and key reuse (422) are decided exactly as for a
//! hot record; only the outcome's bytes live elsewhere. When they cannot be
//! read — the store is down or slow, the segment is missing, the bytes fail
//! their check — the answer is 503 `unavailable` with `Retry-After`, never
//! "new" and never a fresh claim (invariant 6). An outcome read back is
//! cached like any other completed outcome.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Engine;
use super::Refusal;
use crate::archive::segment::open_outcome;
use crate::archive::{ArchiveError, SegmentName};
use crate::cache::FinalOutcome;
use crate::domain::{RecordState, ScopedKey};
use crate::store::KeyRecord;

/// How long a request waits for the archive before answering 503.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

impl Engine {
    /// `k`'s record as lookup shows it: with its outcome, read from the
    /// archive when the key is tiered.
    pub async fn lookup(&self, k: &ScopedKey) -> Result<KeyRecord, Refusal> {
        let record = self.current(k).await?;
        self.with_outcome(k, record).await
    }

    /// `record` with its outcome text in place: unchanged unless it is a
    /// tiered completed record, whose outcome comes from this node's cache
    /// or else the archive.
    pub(super) async fn with_outcome(
        &self,
        k: &ScopedKey,
        mut record: KeyRecord,
    ) -> Result<KeyRecord, Refusal> {
        if record.state != RecordState::Completed || record.outcome.is_some() {
            return Ok(record);
        }
        let Some(routing) = &record.routing else {
            tracing::error!("a completed record with neither an outcome nor a routing entry");
            return Err(Refusal::Unavailable);
        };
        if let Some(hit) = self.cache.local(k).filter(|hit| same_record(hit, &record)) {
            record.outcome = Some(hit.outcome.to_string());
            return Ok(record);
        }
        let read_at = Instant::now();
        let name = SegmentName::parse(&routing.segment).map_err(|_| {
            tracing::error!(segment = %routing.segment, "a routing entry names an invalid segment");
            Refusal::Unavailable
        })?;
        let read = self.archive.read_range(&name, routing.offset, routing.len);
        let bytes = match tokio::time::timeout(READ_TIMEOUT, read).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(ArchiveError::Missing(name))) => {
                // Cleanup deletes a segment only once nothing routes to it:
                // this is damage to report, and still not "new".
                self.metrics.archive_read("missing");
                tracing::error!(segment = %name, "a routing entry points at a missing segment");
                return Err(Refusal::Unavailable);
            }
            Ok(Err(ArchiveError::Unavailable(e))) => {
                self.metrics.archive_read("unavailable");
                tracing::warn!(error = %e, "the archive could not answer a read");
                return Err(Refusal::Unavailable);
            }
            Err(_) => {
                self.metrics.archive_read("timeout");
                tracing::warn!(segment = %name, "the archive did not answer in time");
                return Err(Refusal::Unavailable);
            }
        };
        let outcome = open_outcome(&bytes, &routing.sha256).map_err(|why| {
            self.metrics.archive_read("corrupt");
            tracing::error!(segment = %name, offset = routing.offset, %why, "a tiered outcome failed its check");
            Refusal::Unavailable
        })?;
        self.metrics.archive_read("ok");
        record.outcome = Some(outcome);
        if let (Some(full), Some(ttl)) = (
            FinalOutcome::of(&record),
            FinalOutcome::ttl(&record, read_at),
        ) {
            self.cache.fill(k, Arc::new(full), ttl);
        }
        Ok(record)
    }
}

/// Whether a cached outcome is `record`'s own (not an earlier life of the
/// key, which cleanup or renewal replaced).
fn same_record(hit: &FinalOutcome, record: &KeyRecord) -> bool {
    hit.fingerprint == record.fingerprint
        && hit.expires_at == record.expires_at
        && Some(hit.completed_at) == record.completed_at
}
