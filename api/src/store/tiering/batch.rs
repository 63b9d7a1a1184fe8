//! Tiering and cleanup, written once for both dialects (see `Statements`
//! for where they lock differently).

use sqlx::{
    ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Pool, Row, Transaction, Type,
};

use super::{ArchiveLag, Placement, SealedSegment, TierCandidate};
use crate::domain::{Fingerprint, ScopedKey, TenantId};
use crate::store::claims::{generic_sql, Sql};
use crate::store::dialect::Dialect;
use crate::store::{hash32, scoped_from, StoreError, StoreResult};

/// A tiering batch's hold on its dialect's database: the transaction that
/// slims (Postgres: also holding the selected rows and the segment's
/// advisory lock), opened when first needed.
pub(super) struct Batch<D: Database> {
    pool: Pool<D>,
    tx: Option<Transaction<'static, D>>,
    lock_id: i64,
}

generic_sql!(impl {
    pub(super) async fn begin_tiering(&self, limit: u32) -> StoreResult<Option<(Vec<TierCandidate>, Batch<D>)>> {
        let mut batch = Batch { pool: self.pool.clone(), tx: None, lock_id: rand::random() };
        let due = sqlx::query(D::TIERING.select_due).bind(i64::from(limit));
        let rows = if D::TIERING.read_due_in_transaction {
            due.fetch_all(&mut **batch.tx().await?).await?
        } else {
            due.fetch_all(self.pool).await?
        };
        if rows.is_empty() {
            return Ok(None); // a transaction rolls back as it drops
        }
        let candidates = rows.iter().map(candidate::<D>).collect::<StoreResult<_>>()?;
        Ok(Some((candidates, batch)))
    }

    pub(super) async fn delete_expired(&self, limit: u32) -> StoreResult<u64> {
        let done = sqlx::query(D::TIERING.delete_expired)
            .bind(i64::from(limit))
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done))
    }

    pub(super) async fn condemn_segments(&self, limit: u32) -> StoreResult<Vec<String>> {
        let mut tx = self.pool.begin().await?;
        let condemn = sqlx::query(D::TIERING.condemn);
        let condemn = match D::TIERING.condemn_candidates {
            Some(pick) => {
                let rows = sqlx::query(pick)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *tx)
                    .await?;
                let names = rows.iter().map(|row| row.try_get("name")).collect::<Result<Vec<String>, _>>()?;
                if names.is_empty() {
                    return Ok(Vec::new());
                }
                condemn.bind(serde_json::Value::from(names).to_string())
            }
            None => condemn.bind(i64::from(limit)),
        };
        let rows = condemn.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        rows.iter().map(|row| Ok(row.try_get("name")?)).collect()
    }

    pub(super) async fn forget_segment(&self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query(D::TIERING.forget)
            .bind(name.to_owned())
            .execute(self.pool)
            .await?;
        Ok(D::rows_affected(&done) == 1)
    }

    pub(super) async fn archive_lag(&self) -> StoreResult<ArchiveLag> {
        let row = sqlx::query(D::TIERING.lag).fetch_one(self.pool).await?;
        Ok(ArchiveLag {
            tiering_due_since: D::opt_time(&row, "tiering_due")?,
            cleanup_due_since: D::opt_time(&row, "cleanup_due")?,
            segments: row.try_get("segments")?,
            segment_records: row.try_get("records")?,
            segment_bytes: row.try_get("bytes")?,
            now: D::time(&row, "now")?,
        })
    }
});

generic_sql!(
    impl<D> Batch<D> {
        async fn tx(&mut self) -> StoreResult<&mut Transaction<'static, D>> {
            let tx = match self.tx.take() {
                Some(tx) => tx,
                None => self.pool.begin().await?,
            };
            Ok(self.tx.insert(tx))
        }

        pub(super) async fn reserve(&mut self, name: &str) -> StoreResult<()> {
            let lock_id = self.lock_id;
            // The lock first: the pending row never exists without its holder.
            if let Some(lock) = D::TIERING.lock_segment {
                let tx = self.tx().await?;
                sqlx::query(lock).bind(lock_id).execute(&mut **tx).await?;
            }
            sqlx::query(D::TIERING.reserve)
                .bind(name.to_owned())
                .bind(lock_id)
                .execute(&self.pool)
                .await?;
            Ok(())
        }

        pub(super) async fn slim(
            &mut self,
            segment: SealedSegment<'_>,
            placed: usize,
            rows: String,
        ) -> StoreResult<Option<u64>> {
            let tx = self.tx().await?;
            let live = sqlx::query(D::TIERING.make_live)
                .bind(segment.name.to_owned())
                .bind(to_i64(segment.len)?)
                .bind(segment.sha256.to_vec())
                .bind(i32::try_from(placed).unwrap_or(i32::MAX))
                .execute(&mut **tx)
                .await?;
            if D::rows_affected(&live) != 1 {
                return Ok(None);
            }
            let slimmed = sqlx::query(D::TIERING.slim)
                .bind(segment.name.to_owned())
                .bind(rows)
                .execute(&mut **tx)
                .await?;
            Ok(Some(D::rows_affected(&slimmed)))
        }

        pub(super) async fn commit(self) -> StoreResult<()> {
            if let Some(tx) = self.tx {
                tx.commit().await?;
            }
            Ok(())
        }
    }
);

/// The placed rows as `slim` reads them: a JSON array of objects with the
/// scoped key, the packed outcome's hash, and its offset, length and
/// SHA-256 in the segment (hashes in hex).
pub(super) fn slim_rows(candidates: &[TierCandidate], placed: &[Placement]) -> StoreResult<String> {
    let rows = placed
        .iter()
        .map(|p| {
            let c = &candidates[p.index];
            Ok(serde_json::json!({
                "tenant": c.key.tenant.as_str(),
                "operation": c.key.operation.as_str(),
                "key": c.key.key.as_str(),
                "outcome_hash": hex::encode(c.outcome_hash),
                "off": to_i64(p.offset)?,
                "len": to_i64(p.len)?,
                "sha": hex::encode(p.sha256),
            }))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(serde_json::Value::Array(rows).to_string())
}

fn candidate<D>(row: &D::Row) -> StoreResult<TierCandidate>
where
    D: Dialect,
    for<'r> &'r str: ColumnIndex<<D as Database>::Row>,
    String: for<'r> Decode<'r, D> + Type<D>,
    Vec<u8>: for<'r> Decode<'r, D> + Type<D>,
{
    let fingerprint: Vec<u8> = row.try_get("fingerprint")?;
    let outcome_hash: Vec<u8> = row.try_get("outcome_hash")?;
    Ok(TierCandidate {
        key: key_from(row)?,
        fingerprint: Fingerprint::from_slice(&fingerprint)
            .ok_or_else(|| StoreError::Corrupt("fingerprint length".into()))?,
        outcome: row.try_get("outcome")?,
        outcome_hash: hash32(&outcome_hash)?,
        expires_at: D::time(row, "expires_at")?,
    })
}

/// A byte count or offset as both databases store it (a signed 64-bit
/// integer).
fn to_i64(n: u64) -> StoreResult<i64> {
    i64::try_from(n).map_err(|_| StoreError::Corrupt(format!("{n} does not fit a 64-bit integer")))
}

/// The scoped key of a selected row.
fn key_from<R: Row>(row: &R) -> StoreResult<ScopedKey>
where
    for<'a> &'a str: ColumnIndex<R>,
    for<'a> String: Decode<'a, R::Database> + Type<R::Database>,
{
    let tenant: String = row.try_get("tenant")?;
    let operation: String = row.try_get("operation")?;
    let key: String = row.try_get("key")?;
    let tenant =
        TenantId::parse(&tenant).map_err(|_| StoreError::Corrupt(format!("tenant {tenant:?}")))?;
    scoped_from(&tenant, &operation, &key)
}
