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

mod postgres;
mod sqlite;

use chrono::{DateTime, Utc};

use super::{scoped_from, Store, StoreError, StoreResult};
use crate::domain::{Fingerprint, ScopedKey, TenantId};

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
    Postgres(postgres::PgTiering),
    Sqlite(sqlite::SqliteTiering),
}

impl TierBatch {
    pub fn candidates(&self) -> &[TierCandidate] {
        &self.candidates
    }

    /// Records segment `name` as `pending`, before it is uploaded.
    pub async fn reserve(&mut self, name: &str) -> StoreResult<()> {
        match &mut self.inner {
            Inner::Postgres(t) => t.reserve(name).await,
            Inner::Sqlite(t) => t.reserve(name).await,
        }
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
        match &mut self.inner {
            Inner::Postgres(t) => t.slim(&self.candidates, segment, placed).await,
            Inner::Sqlite(t) => t.slim(&self.candidates, segment, placed).await,
        }
    }

    pub async fn commit(self) -> StoreResult<()> {
        match self.inner {
            Inner::Postgres(t) => t.commit().await,
            Inner::Sqlite(t) => t.commit().await,
        }
    }
}

impl Store {
    /// Up to `limit` completed records past their hot retention and inside
    /// their window, oldest due first; `None` when there are none.
    pub async fn begin_tiering(&self, limit: u32) -> StoreResult<Option<TierBatch>> {
        let found = match self {
            Store::Postgres(s) => postgres::begin(s, limit)
                .await?
                .map(|(c, t)| (c, Inner::Postgres(t))),
            Store::Sqlite(s) => sqlite::begin(s, limit)
                .await?
                .map(|(c, t)| (c, Inner::Sqlite(t))),
        };
        Ok(found.map(|(candidates, inner)| TierBatch { candidates, inner }))
    }

    /// Removes up to `limit` records past their replay window (none whose
    /// lease is still running). How many it removed.
    pub async fn delete_expired(&self, limit: u32) -> StoreResult<u64> {
        match self {
            Store::Postgres(s) => s.delete_expired(limit).await,
            Store::Sqlite(s) => s.delete_expired(limit).await,
        }
    }

    /// Marks up to `limit` segments nothing points at as `deleting` and
    /// names them: their objects are to be deleted, then
    /// [`Store::forget_segment`].
    pub async fn condemn_segments(&self, limit: u32) -> StoreResult<Vec<String>> {
        match self {
            Store::Postgres(s) => s.condemn_segments(limit).await,
            Store::Sqlite(s) => s.condemn_segments(limit).await,
        }
    }

    /// Removes a condemned segment's row once its object is gone.
    pub async fn forget_segment(&self, name: &str) -> StoreResult<bool> {
        match self {
            Store::Postgres(s) => s.forget_segment(name).await,
            Store::Sqlite(s) => s.forget_segment(name).await,
        }
    }

    pub async fn archive_lag(&self) -> StoreResult<ArchiveLag> {
        match self {
            Store::Postgres(s) => s.archive_lag().await,
            Store::Sqlite(s) => s.archive_lag().await,
        }
    }
}

/// A byte count or offset as both databases store it (a signed 64-bit
/// integer).
fn to_i64(n: u64) -> StoreResult<i64> {
    i64::try_from(n).map_err(|_| StoreError::Corrupt(format!("{n} does not fit a 64-bit integer")))
}

/// A random id for a segment's advisory lock.
fn lock_id() -> i64 {
    rand::random()
}

/// The scoped key of a selected row.
fn key_from<R: sqlx::Row>(row: &R) -> StoreResult<ScopedKey>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> String: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let tenant: String = row.try_get("tenant")?;
    let operation: String = row.try_get("operation")?;
    let key: String = row.try_get("key")?;
    let tenant =
        TenantId::parse(&tenant).map_err(|_| StoreError::Corrupt(format!("tenant {tenant:?}")))?;
    scoped_from(&tenant, &operation, &key)
}
