//! What the tiering and cleanup workers do to the store (SPEC section 7).
//!
//! **Tiering** is one transaction per batch, and it is what makes a crash
//! harmless:
//! 1. [`Store::begin_tiering`] selects completed records past their hot
//!    retention (Postgres: `for update skip locked`, so nodes never pick the
//!    same rows);
//! 2. [`TierBatch::reserve`] records the segment's name as `pending` before
//!    a byte is uploaded, so a run that dies after uploading leaves a row
//!    that names its orphan;
//! 3. the worker uploads the segment and verifies it by reading it back;
//! 4. [`TierBatch::slim`] turns the segment `live` and replaces each row's
//!    outcome by a routing entry, guarded so that only rows still holding
//!    exactly the outcome that was packed are touched;
//! 5. [`TierBatch::commit`].
//!
//! Killed before 5, the transaction rolls back: every row still holds its
//! outcome, and the `pending` segment is an orphan that cleanup deletes. On
//! Postgres the tiering transaction holds an advisory lock on the segment's
//! `lock_id` until it ends, so "orphan" is exact: a `pending` segment whose
//! lock anybody can take has no live writer. The embedded SQLite store serves
//! one process whose worker runs tiering and cleanup one after the other, so
//! any `pending` segment cleanup sees is an orphan.
//!
//! **Cleanup** removes records past their replay window (never one whose
//! lease is still running), in bounded batches, and condemns segments nothing
//! points at: a `live` segment once its last record is gone, an orphaned
//! `pending` one, or a `deleting` one whose deletion was interrupted. A
//! condemned segment is marked `deleting` (committed) before its object is
//! deleted, and its row is removed only after; a foreign key from the
//! routing entry (Postgres) refuses to remove a segment still in use.

mod batch;
mod postgres;
mod sqlite;

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Sqlite};

use super::claims::Sql;
use super::{Store, StoreResult};
use crate::domain::{Fingerprint, ScopedKey};
use batch::{slim_rows, Batch};

pub(super) use postgres::POSTGRES;
pub(super) use sqlite::SQLITE;

/// A completed record due for tiering, with what is packed of it.
#[derive(Debug, Clone)]
pub struct TierCandidate {
    pub key: ScopedKey,
    pub fingerprint: Fingerprint,
    /// The outcome's exact text.
    pub outcome: String,
    /// The canonical hash the row holds: the slimming update matches it, so
    /// it never routes a row to bytes that are not its own.
    pub outcome_hash: [u8; 32],
    pub expires_at: DateTime<Utc>,
}

/// Where one candidate's outcome was packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// Index into [`TierBatch::candidates`].
    pub index: usize,
    pub offset: u64,
    pub len: u64,
    pub sha256: [u8; 32],
}

/// A segment as uploaded and verified.
#[derive(Debug, Clone, Copy)]
pub struct SealedSegment<'a> {
    pub name: &'a str,
    pub len: u64,
    pub sha256: [u8; 32],
}

/// How far behind the workers are, on the store's clock.
#[derive(Debug, Clone, Default)]
pub struct ArchiveLag {
    /// The oldest `tier_at` of a completed record still hot.
    pub tiering_due_since: Option<DateTime<Utc>>,
    /// The oldest `expires_at` of a record cleanup has not removed yet.
    pub cleanup_due_since: Option<DateTime<Utc>>,
    /// Live segments, the records packed into them, and their bytes.
    pub segments: i64,
    pub segment_records: i64,
    pub segment_bytes: i64,
    pub now: DateTime<Utc>,
}

/// One tiering batch; dropped without [`TierBatch::commit`], nothing it did
/// to the records is kept.
pub struct TierBatch {
    candidates: Vec<TierCandidate>,
    inner: Inner,
}

enum Inner {
    Postgres(Batch<Postgres>),
    Sqlite(Batch<Sqlite>),
}

/// Runs the same call on the batch of either dialect.
macro_rules! on_batch {
    ($inner:expr, $b:ident => $call:expr) => {
        match $inner {
            Inner::Postgres($b) => $call,
            Inner::Sqlite($b) => $call,
        }
    };
}

impl TierBatch {
    pub fn candidates(&self) -> &[TierCandidate] {
        &self.candidates
    }

    /// Records segment `name` as `pending`, before it is uploaded.
    pub async fn reserve(&mut self, name: &str) -> StoreResult<()> {
        on_batch!(&mut self.inner, b => b.reserve(name).await)
    }

    /// Makes `segment` live and routes each placed record to it. `None` if
    /// the segment is no longer ours to use (cleanup condemned it: only
    /// possible when this run took longer than cleanup allows), in which
    /// case nothing was changed and the batch should be dropped.
    pub async fn slim(
        &mut self,
        segment: SealedSegment<'_>,
        placed: &[Placement],
    ) -> StoreResult<Option<u64>> {
        let rows = slim_rows(&self.candidates, placed)?;
        on_batch!(&mut self.inner, b => b.slim(segment, placed.len(), rows).await)
    }

    pub async fn commit(self) -> StoreResult<()> {
        on_batch!(self.inner, b => b.commit().await)
    }
}

impl Store {
    /// Up to `limit` completed records past their hot retention and inside
    /// their window, oldest due first; `None` when there are none.
    pub async fn begin_tiering(&self, limit: u32) -> StoreResult<Option<TierBatch>> {
        let found = match self {
            Store::Postgres(s) => Sql::on(s.pool())
                .begin_tiering(limit)
                .await?
                .map(|(c, b)| (c, Inner::Postgres(b))),
            Store::Sqlite(s) => Sql::on(s.pool())
                .begin_tiering(limit)
                .await?
                .map(|(c, b)| (c, Inner::Sqlite(b))),
        };
        Ok(found.map(|(candidates, inner)| TierBatch { candidates, inner }))
    }

    /// Removes up to `limit` records past their replay window (none whose
    /// lease is still running). How many it removed.
    pub async fn delete_expired(&self, limit: u32) -> StoreResult<u64> {
        each_backend!(self, s => Sql::on(s.pool()).delete_expired(limit).await)
    }

    /// Marks up to `limit` segments nothing points at as `deleting` and
    /// names them: their objects are to be deleted, then
    /// [`Store::forget_segment`].
    pub async fn condemn_segments(&self, limit: u32) -> StoreResult<Vec<String>> {
        each_backend!(self, s => Sql::on(s.pool()).condemn_segments(limit).await)
    }

    /// Removes a condemned segment's row once its object is gone.
    pub async fn forget_segment(&self, name: &str) -> StoreResult<bool> {
        each_backend!(self, s => Sql::on(s.pool()).forget_segment(name).await)
    }

    pub async fn archive_lag(&self) -> StoreResult<ArchiveLag> {
        each_backend!(self, s => Sql::on(s.reader()).archive_lag().await)
    }
}

/// Tiering's and cleanup's statements in one dialect. Where the dialects
/// lock differently, the statement is absent (`None`) in SQLite, which
/// serves one process whose worker runs tiering and cleanup one after the
/// other.
#[derive(Debug, Clone, Copy)]
pub struct Statements {
    /// 1 limit; completed records past their hot retention, inside their
    /// window, oldest due first.
    pub select_due: &'static str,
    /// Whether `select_due` runs in the tiering transaction (its rows then
    /// stay locked until the batch ends) or before it.
    pub read_due_in_transaction: bool,
    /// 1 lock id: taken in the tiering transaction before the segment is
    /// reserved, and held until it ends, so a `pending` segment whose lock
    /// is free has no live writer.
    pub lock_segment: Option<&'static str>,
    /// 1 name, 2 lock id; committed at once (outside the transaction).
    pub reserve: &'static str,
    /// 1 name, 2 length, 3 SHA-256, 4 records; only a `pending` segment.
    pub make_live: &'static str,
    /// 1 segment, 2 the placed rows as JSON (`slim_rows`); routes each row
    /// only if it still holds exactly the outcome that was packed.
    pub slim: &'static str,
    /// 1 limit.
    pub delete_expired: &'static str,
    /// 1 limit: picks and locks the segments to condemn, in the condemning
    /// transaction; `condemn` then takes their names.
    pub condemn_candidates: Option<&'static str>,
    /// 1 the candidates' names as a JSON array (with `condemn_candidates`),
    /// else the limit; returns `name`.
    pub condemn: &'static str,
    /// 1 name.
    pub forget: &'static str,
    /// `tiering_due`, `cleanup_due`, `segments`, `records`, `bytes`, `now`.
    pub lag: &'static str,
}
