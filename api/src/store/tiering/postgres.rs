//! Tiering and cleanup on Postgres: `for update skip locked` so that every
//! node can run the workers at once without picking the same rows, and an
//! advisory lock per segment that dies with the transaction writing it.

use sqlx::postgres::{PgPool, PgRow, Postgres};
use sqlx::{Row, Transaction};

use super::{key_from, lock_id, to_i64, ArchiveLag, Placement, SealedSegment, TierCandidate};
use crate::domain::Fingerprint;
use crate::store::{hash32, PgStore, StoreError, StoreResult};

const SELECT_DUE: &str = "\
    select tenant, operation, key, fingerprint, outcome, outcome_hash, expires_at \
      from idempotency_key \
     where state = 'completed' and segment is null and tier_at <= now() and expires_at > now() \
     order by tier_at limit $1 for update skip locked";

const LOCK: &str = "select pg_advisory_xact_lock($1)";

const RESERVE: &str =
    "insert into archive_segment (name, lock_id, state) values ($1, $2, 'pending')";

const MAKE_LIVE: &str = "\
    update archive_segment set state = 'live', len = $2, sha256 = $3, records = $4, \
           updated_at = now() \
     where name = $1 and state = 'pending'";

/// Routes each packed row to the segment, only if it still holds exactly the
/// outcome that was packed (same canonical hash, not tiered yet).
const SLIM: &str = "\
    update idempotency_key k set outcome = null, segment = $1, segment_offset = u.off, \
           segment_len = u.len, segment_sha256 = u.sha, tiered_at = now(), \
           history = (case when jsonb_array_length(k.history::jsonb) >= 50 \
                      then k.history::jsonb - 1 else k.history::jsonb end \
                      || jsonb_build_array(jsonb_build_object('event', 'tiered', 'segment', $1::text, \
                         'at', to_char(now() at time zone 'utc', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'))))::text \
      from unnest($2::text[], $3::text[], $4::text[], $5::bytea[], $6::bigint[], $7::bigint[], \
                  $8::bytea[]) as u(tenant, operation, key, outcome_hash, off, len, sha) \
     where k.tenant = u.tenant and k.operation = u.operation and k.key = u.key \
       and k.state = 'completed' and k.segment is null and k.outcome_hash = u.outcome_hash";

/// Records that are gone (`pg_gone!`: a record never completed stays a
/// whole window after its last lease), oldest window end first.
const DELETE_EXPIRED: &str = concat!(
    "with doomed as ( \
        select tenant, operation, key from idempotency_key \
         where",
    pg_gone!(),
    "order by expires_at limit $1 for update skip locked) \
    delete from idempotency_key k using doomed d \
     where k.tenant = d.tenant and k.operation = d.operation and k.key = d.key"
);

/// Segments nothing points at: an orphan of a dead tiering run (`pending`,
/// and its writer's advisory lock is free), a `live` one whose records are
/// all gone, or a `deleting` one whose deletion was interrupted.
macro_rules! unused_segment {
    () => {
        "((s.state = 'pending' and pg_try_advisory_xact_lock(s.lock_id)) \
           or (s.state = 'live' \
               and not exists (select 1 from idempotency_key k where k.segment = s.name)) \
           or (s.state = 'deleting' and s.updated_at < now() - interval '2 minutes'))"
    };
}

/// Step one of condemning, in a transaction: lock the candidates. Its
/// snapshot may predate a tiering run that committed while it ran (a
/// `pending` segment whose writer just finished looks like an orphan, and
/// the re-check of a row locked after its update does not see the rows the
/// same commit routed to it), so this only picks and locks.
const CONDEMN_CANDIDATES: &str = concat!(
    "select s.name from archive_segment s where ",
    unused_segment!(),
    " order by s.created_at limit $1 for update skip locked"
);

/// Step two, in the same transaction: with the candidates locked no tiering
/// run can change them any more, and this statement's fresh snapshot sees
/// every run that committed before the locks were taken. Only what still
/// qualifies is condemned.
const CONDEMN: &str = concat!(
    "update archive_segment s set state = 'deleting', updated_at = now() \
      where s.name = any($1) and ",
    unused_segment!(),
    " returning s.name"
);

const FORGET: &str = "delete from archive_segment where name = $1 and state = 'deleting'";

/// `cleanup_due`: when the oldest record cleanup has not removed yet
/// became gone.
const LAG: &str = concat!(
    "select (select min(tier_at) from idempotency_key \
             where state = 'completed' and segment is null and tier_at <= now() \
               and expires_at > now()) as tiering_due, \
           (select min(case when state = 'completed' then expires_at \
                       else greatest(expires_at, \
                                     lease_expires_at + window_ms * interval '1 millisecond') end) \
              from idempotency_key where",
    pg_gone!(),
    ") as cleanup_due, \
           count(*) as segments, \
           coalesce(sum(records), 0)::bigint as records, \
           coalesce(sum(len), 0)::bigint as bytes, \
           now() as now \
      from archive_segment where state = 'live'"
);

pub(super) struct PgTiering {
    tx: Transaction<'static, Postgres>,
    pool: PgPool,
    lock_id: i64,
}

pub(super) async fn begin(
    s: &PgStore,
    limit: u32,
) -> StoreResult<Option<(Vec<TierCandidate>, PgTiering)>> {
    let mut tx = s.pool().begin().await?;
    let rows = sqlx::query(SELECT_DUE)
        .bind(i64::from(limit))
        .fetch_all(&mut *tx)
        .await?;
    if rows.is_empty() {
        return Ok(None); // the transaction rolls back as it drops
    }
    let candidates = rows.iter().map(candidate).collect::<StoreResult<_>>()?;
    Ok(Some((
        candidates,
        PgTiering {
            tx,
            pool: s.pool().clone(),
            lock_id: lock_id(),
        },
    )))
}

fn candidate(row: &PgRow) -> StoreResult<TierCandidate> {
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    let outcome_hash: Vec<u8> = row.try_get("outcome_hash")?;
    Ok(TierCandidate {
        key: key_from(row)?,
        fingerprint: Fingerprint::from_slice(&fingerprint)
            .ok_or_else(|| StoreError::Corrupt("fingerprint length".into()))?,
        outcome: row.try_get("outcome")?,
        outcome_hash: hash32(&outcome_hash)?,
        expires_at: row.try_get("expires_at")?,
    })
}

impl PgTiering {
    pub(super) async fn reserve(&mut self, name: &str) -> StoreResult<()> {
        // The lock first: the pending row never exists without its holder.
        sqlx::query(LOCK)
            .bind(self.lock_id)
            .execute(&mut *self.tx)
            .await?;
        sqlx::query(RESERVE)
            .bind(name)
            .bind(self.lock_id)
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
        let live = sqlx::query(MAKE_LIVE)
            .bind(segment.name)
            .bind(to_i64(segment.len)?)
            .bind(segment.sha256.to_vec())
            .bind(i32::try_from(placed.len()).unwrap_or(i32::MAX))
            .execute(&mut *self.tx)
            .await?;
        if live.rows_affected() != 1 {
            return Ok(None);
        }
        let mut columns = SlimColumns::default();
        for p in placed {
            let c = &candidates[p.index];
            columns.tenant.push(c.key.tenant.as_str().to_owned());
            columns.operation.push(c.key.operation.as_str().to_owned());
            columns.key.push(c.key.key.as_str().to_owned());
            columns.outcome_hash.push(c.outcome_hash.to_vec());
            columns.offset.push(to_i64(p.offset)?);
            columns.len.push(to_i64(p.len)?);
            columns.sha256.push(p.sha256.to_vec());
        }
        let slimmed = sqlx::query(SLIM)
            .bind(segment.name)
            .bind(columns.tenant)
            .bind(columns.operation)
            .bind(columns.key)
            .bind(columns.outcome_hash)
            .bind(columns.offset)
            .bind(columns.len)
            .bind(columns.sha256)
            .execute(&mut *self.tx)
            .await?;
        Ok(Some(slimmed.rows_affected()))
    }

    pub(super) async fn commit(self) -> StoreResult<()> {
        self.tx.commit().await?;
        Ok(())
    }
}

#[derive(Default)]
struct SlimColumns {
    tenant: Vec<String>,
    operation: Vec<String>,
    key: Vec<String>,
    outcome_hash: Vec<Vec<u8>>,
    offset: Vec<i64>,
    len: Vec<i64>,
    sha256: Vec<Vec<u8>>,
}

impl PgStore {
    pub async fn delete_expired(&self, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(DELETE_EXPIRED)
            .bind(i64::from(limit))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }

    pub async fn condemn_segments(&self, limit: u32) -> StoreResult<Vec<String>> {
        let mut tx = self.pool().begin().await?;
        let candidates: Vec<String> = sqlx::query_scalar(CONDEMN_CANDIDATES)
            .bind(i64::from(limit))
            .fetch_all(&mut *tx)
            .await?;
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        let condemned = sqlx::query_scalar(CONDEMN)
            .bind(&candidates)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(condemned)
    }

    pub async fn forget_segment(&self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query(FORGET).bind(name).execute(self.pool()).await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn archive_lag(&self) -> StoreResult<ArchiveLag> {
        let row = sqlx::query(LAG).fetch_one(self.pool()).await?;
        Ok(ArchiveLag {
            tiering_due_since: row.try_get("tiering_due")?,
            cleanup_due_since: row.try_get("cleanup_due")?,
            segments: row.try_get("segments")?,
            segment_records: row.try_get("records")?,
            segment_bytes: row.try_get("bytes")?,
            now: row.try_get("now")?,
        })
    }
}
