//! Tiering and cleanup on the embedded SQLite store: one process, whose
//! worker runs tiering and cleanup one after the other. The batch is read
//! without a transaction (holding SQLite's single write lock across an
//! upload would stall every claim); the slimming transaction is short, and
//! guarded per row by the outcome hash that was packed.

use chrono::{DateTime, Utc};
use sqlx::sqlite::{Sqlite, SqlitePool, SqliteRow};
use sqlx::{Row, Transaction};

use super::{key_from, lock_id, to_i64, ArchiveLag, Placement, SealedSegment, TierCandidate};
use crate::domain::Fingerprint;
use crate::store::{hash32, SqliteStore, StoreError, StoreResult};

// ?1 now (ms)
const SELECT_DUE: &str = "\
    select tenant, operation, key, fingerprint, outcome, outcome_hash, expires_at \
      from idempotency_key \
     where state = 'completed' and segment is null and tier_at <= ?1 and expires_at > ?1 \
     order by tier_at limit ?2";

const RESERVE: &str = "\
    insert into archive_segment (name, lock_id, state, created_at, updated_at) \
    values (?1, ?2, 'pending', ?3, ?3)";

const MAKE_LIVE: &str = "\
    update archive_segment set state = 'live', len = ?2, sha256 = ?3, records = ?4, \
           updated_at = ?5 \
     where name = ?1 and state = 'pending'";

// ?1 tenant, ?2 operation, ?3 key, ?4 now, ?5 outcome hash, ?6 segment,
// ?7 offset, ?8 length, ?9 sha256
const SLIM: &str = "\
    update idempotency_key set outcome = null, segment = ?6, segment_offset = ?7, \
           segment_len = ?8, segment_sha256 = ?9, tiered_at = ?4, \
           history = json_insert(case when json_array_length(history) >= 50 \
                     then json_remove(history, '$[1]') else history end, '$[#]', \
                     json_object('event', 'tiered', 'segment', ?6, \
                       'at', strftime('%Y-%m-%dT%H:%M:%fZ', ?4 / 1000.0, 'unixepoch'))) \
     where tenant = ?1 and operation = ?2 and key = ?3 \
       and state = 'completed' and segment is null and outcome_hash = ?5";

// ?1 now, ?2 limit
const DELETE_EXPIRED: &str = concat!(
    "delete from idempotency_key where (tenant, operation, key) in ( \
        select tenant, operation, key from idempotency_key \
         where",
    sqlite_gone!("?1"),
    "order by expires_at limit ?2)"
);

// ?1 now, ?2 limit: every pending segment is an orphan here (see the module).
const CONDEMN: &str = "\
    update archive_segment set state = 'deleting', updated_at = ?1 \
     where name in ( \
        select s.name from archive_segment s \
         where s.state in ('pending', 'deleting') \
            or (s.state = 'live' \
                and not exists (select 1 from idempotency_key k where k.segment = s.name)) \
         order by s.created_at limit ?2) \
    returning name";

const FORGET: &str = "delete from archive_segment where name = ?1 and state = 'deleting'";

/// `cleanup_due`: when the oldest record cleanup has not removed yet
/// became gone.
const LAG: &str = concat!(
    "select (select min(tier_at) from idempotency_key \
             where state = 'completed' and segment is null and tier_at <= ?1 \
               and expires_at > ?1) as tiering_due, \
           (select min(case when state = 'completed' then expires_at \
                       else max(expires_at, lease_expires_at + window_ms) end) \
              from idempotency_key where",
    sqlite_gone!("?1"),
    ") as cleanup_due, \
           count(*) as segments, \
           coalesce(sum(records), 0) as records, \
           coalesce(sum(len), 0) as bytes \
      from archive_segment where state = 'live'"
);

pub(super) struct SqliteTiering {
    pool: SqlitePool,
    tx: Option<Transaction<'static, Sqlite>>,
}

pub(super) async fn begin(
    s: &SqliteStore,
    limit: u32,
) -> StoreResult<Option<(Vec<TierCandidate>, SqliteTiering)>> {
    let rows = sqlx::query(SELECT_DUE)
        .bind(Utc::now().timestamp_millis())
        .bind(i64::from(limit))
        .fetch_all(s.pool())
        .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let candidates = rows.iter().map(candidate).collect::<StoreResult<_>>()?;
    Ok(Some((
        candidates,
        SqliteTiering {
            pool: s.pool().clone(),
            tx: None,
        },
    )))
}

fn millis_time(ms: i64, what: &str) -> StoreResult<DateTime<Utc>> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| StoreError::Corrupt(format!("{what} {ms}")))
}

fn candidate(row: &SqliteRow) -> StoreResult<TierCandidate> {
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    let outcome_hash: Vec<u8> = row.try_get("outcome_hash")?;
    Ok(TierCandidate {
        key: key_from(row)?,
        fingerprint: Fingerprint::from_slice(&fingerprint)
            .ok_or_else(|| StoreError::Corrupt("fingerprint length".into()))?,
        outcome: row.try_get("outcome")?,
        outcome_hash: hash32(&outcome_hash)?,
        expires_at: millis_time(row.try_get("expires_at")?, "expires_at")?,
    })
}

impl SqliteTiering {
    pub(super) async fn reserve(&mut self, name: &str) -> StoreResult<()> {
        sqlx::query(RESERVE)
            .bind(name)
            .bind(lock_id())
            .bind(Utc::now().timestamp_millis())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub(super) async fn slim(
        &mut self,
        candidates: &[TierCandidate],
        segment: SealedSegment<'_>,
        placed: &[Placement],
    ) -> StoreResult<Option<u64>> {
        let now = Utc::now().timestamp_millis();
        let tx = match &mut self.tx {
            Some(tx) => tx,
            None => self.tx.insert(self.pool.begin().await?),
        };
        let live = sqlx::query(MAKE_LIVE)
            .bind(segment.name)
            .bind(to_i64(segment.len)?)
            .bind(segment.sha256.to_vec())
            .bind(i64::try_from(placed.len()).unwrap_or(i64::MAX))
            .bind(now)
            .execute(&mut **tx)
            .await?;
        if live.rows_affected() != 1 {
            return Ok(None);
        }
        let mut slimmed = 0;
        for p in placed {
            let c = &candidates[p.index];
            let done = sqlx::query(SLIM)
                .bind(c.key.tenant.as_str())
                .bind(c.key.operation.as_str())
                .bind(c.key.key.as_str())
                .bind(now)
                .bind(c.outcome_hash.to_vec())
                .bind(segment.name)
                .bind(to_i64(p.offset)?)
                .bind(to_i64(p.len)?)
                .bind(p.sha256.to_vec())
                .execute(&mut **tx)
                .await?;
            slimmed += done.rows_affected();
        }
        Ok(Some(slimmed))
    }

    pub(super) async fn commit(self) -> StoreResult<()> {
        if let Some(tx) = self.tx {
            tx.commit().await?;
        }
        Ok(())
    }
}

impl SqliteStore {
    pub async fn delete_expired(&self, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(DELETE_EXPIRED)
            .bind(Utc::now().timestamp_millis())
            .bind(i64::from(limit))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }

    pub async fn condemn_segments(&self, limit: u32) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(CONDEMN)
            .bind(Utc::now().timestamp_millis())
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(|row| Ok(row.try_get("name")?)).collect()
    }

    pub async fn forget_segment(&self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query(FORGET).bind(name).execute(self.pool()).await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn archive_lag(&self) -> StoreResult<ArchiveLag> {
        let now = Utc::now();
        let row = sqlx::query(LAG)
            .bind(now.timestamp_millis())
            .fetch_one(self.pool())
            .await?;
        let tiering: Option<i64> = row.try_get("tiering_due")?;
        let cleanup: Option<i64> = row.try_get("cleanup_due")?;
        Ok(ArchiveLag {
            tiering_due_since: tiering.map(|ms| millis_time(ms, "tier_at")).transpose()?,
            cleanup_due_since: cleanup
                .map(|ms| millis_time(ms, "expires_at"))
                .transpose()?,
            segments: row.try_get("segments")?,
            segment_records: row.try_get("records")?,
            segment_bytes: row.try_get("bytes")?,
            now,
        })
    }
}
