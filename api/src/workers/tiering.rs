//! The archive worker: tiering, then cleanup, on every node every
//! `IDEMKEY_WORKER_INTERVAL` (unless `IDEMKEY_WORKERS=off`). The store's
//! half, and why a crash at any point is harmless, is described in
//! `crate::store` (module `tiering`).
//!
//! **Tiering.** Completed records past their hot retention are taken in
//! batches (at most [`BATCH_RECORDS`] records and about
//! [`SEGMENT_TARGET_BYTES`] of outcomes), packed into one segment object
//! (`crate::archive::segment`), uploaded and verified by reading it back,
//! and only then slimmed to routing entries, in the transaction that
//! selected them.
//!
//! **Cleanup.** Records past their replay window are removed in batches of
//! [`CLEANUP_BATCH`]; segments nothing routes to any more (every record in
//! them expired, or an orphan of a tiering run that died) are deleted.
//!
//! A wake works until no full batch is left, so a backlog drains in one
//! wake rather than a batch per interval. Failures are logged and retried at
//! the next wake; they never make a key look new (a row loses its outcome
//! only in the transaction that routes it to a verified copy).

use crate::archive::segment::{SegmentEntry, SegmentWriter};
use crate::archive::SegmentName;
use crate::domain::time::rfc3339;
use crate::engine::Engine;
use crate::store::{Placement, SealedSegment};

/// Records selected per tiering batch.
pub const BATCH_RECORDS: u32 = 500;
/// A segment stops taking outcomes once it holds this many bytes (a single
/// outcome larger than this still gets a segment of its own).
pub const SEGMENT_TARGET_BYTES: usize = 8 << 20;
/// Expired records removed per statement.
pub const CLEANUP_BATCH: u32 = 1000;
/// Segments condemned per statement.
const SEGMENT_BATCH: u32 = 100;

/// A named point where a test can stop the worker dead (set by
/// `IDEMKEY_TEST_FAILPOINT`; see docs/operations.md). Reaching it logs a line
/// and parks the worker forever, holding whatever it holds, so that a test
/// can kill the process at exactly that point.
#[derive(Debug, Clone, Default)]
pub struct Failpoint(Option<String>);

impl Failpoint {
    pub fn new(name: Option<String>) -> Self {
        Self(name)
    }

    async fn hit(&self, name: &str) {
        if self.0.as_deref() == Some(name) {
            tracing::warn!(failpoint = name, "failpoint reached; the worker stops here");
            std::future::pending::<()>().await;
        }
    }
}

/// What one wake did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub tiered: u64,
    pub segments_written: u64,
    pub cleaned: u64,
    pub segments_deleted: u64,
}

/// One wake: tier what is due, clean up what expired, report the lag.
#[tracing::instrument(skip_all)]
pub async fn run_once(engine: &Engine, failpoint: &Failpoint) -> anyhow::Result<Pass> {
    let mut pass = Pass::default();
    let tiered = tier_all(engine, failpoint, &mut pass).await;
    let cleaned = clean_up(engine, &mut pass).await;
    report_lag(engine).await?;
    tiered.and(cleaned).map(|()| pass)
}

async fn tier_all(engine: &Engine, failpoint: &Failpoint, pass: &mut Pass) -> anyhow::Result<()> {
    while tier_batch(engine, failpoint, pass).await? {}
    Ok(())
}

/// Tiers one batch; true if more may be due.
async fn tier_batch(
    engine: &Engine,
    failpoint: &Failpoint,
    pass: &mut Pass,
) -> anyhow::Result<bool> {
    let Some(mut batch) = engine.store.begin_tiering(BATCH_RECORDS).await? else {
        return Ok(false);
    };
    let mut writer = SegmentWriter::new();
    let mut placed = Vec::new();
    for (index, c) in batch.candidates().iter().enumerate() {
        if !writer.is_empty() && writer.len() + c.outcome.len() > SEGMENT_TARGET_BYTES {
            break;
        }
        let entry = SegmentEntry {
            tenant: c.key.tenant.as_str(),
            operation: c.key.operation.as_str(),
            key: c.key.key.as_str(),
            fingerprint: c.fingerprint.to_hex(),
            expires_at: rfc3339(c.expires_at),
        };
        let p = writer.push(&entry, &c.outcome);
        placed.push(Placement {
            index,
            offset: p.offset,
            len: p.len,
            sha256: p.sha256,
        });
    }
    let more = placed.len() < batch.candidates().len()
        || batch.candidates().len() == BATCH_RECORDS as usize;
    let name = SegmentName::generate();
    batch.reserve(name.as_str()).await?;
    // Dropping the batch on any error below rolls its rows back untouched;
    // the reserved segment is then an orphan for cleanup.
    let info = engine.archive.put_segment(&name, writer.finish()).await?;
    failpoint.hit("tiering.after_upload").await;
    let sealed = SealedSegment {
        name: name.as_str(),
        len: info.len,
        sha256: info.sha256,
    };
    let Some(slimmed) = batch.slim(sealed, &placed).await? else {
        tracing::warn!(segment = %name, "segment was condemned before it could be used; batch dropped");
        return Ok(more);
    };
    failpoint.hit("tiering.after_slim").await;
    batch.commit().await?;
    engine.metrics.segments_written.inc();
    engine.metrics.tiered_records.inc_by(slimmed);
    pass.segments_written += 1;
    pass.tiered += slimmed;
    tracing::debug!(segment = %name, records = slimmed, bytes = info.len, "segment written");
    Ok(more)
}

async fn clean_up(engine: &Engine, pass: &mut Pass) -> anyhow::Result<()> {
    loop {
        let removed = engine.store.delete_expired(CLEANUP_BATCH).await?;
        engine.metrics.cleaned_records.inc_by(removed);
        pass.cleaned += removed;
        if removed < u64::from(CLEANUP_BATCH) {
            break;
        }
    }
    loop {
        let condemned = engine.store.condemn_segments(SEGMENT_BATCH).await?;
        for stored in &condemned {
            let Ok(name) = SegmentName::parse(stored) else {
                tracing::error!(segment = %stored, "a segment row holds an invalid name; left alone");
                continue;
            };
            engine.archive.delete(&name).await?;
            if engine.store.forget_segment(stored).await? {
                engine.metrics.segments_deleted.inc();
                pass.segments_deleted += 1;
            }
        }
        if condemned.len() < SEGMENT_BATCH as usize {
            return Ok(());
        }
    }
}

async fn report_lag(engine: &Engine) -> anyhow::Result<()> {
    let lag = engine.store.archive_lag().await?;
    let age = |since: Option<chrono::DateTime<chrono::Utc>>| {
        since.map_or(0, |t| (lag.now - t).num_seconds().max(0))
    };
    let m = &engine.metrics;
    m.tiering_lag_seconds.set(age(lag.tiering_due_since));
    m.cleanup_lag_seconds.set(age(lag.cleanup_due_since));
    m.archive_segments.set(lag.segments);
    m.archive_segment_records.set(lag.segment_records);
    m.archive_bytes.set(lag.segment_bytes);
    Ok(())
}
