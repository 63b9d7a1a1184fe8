//! New claims and completions in batches (see `store::batch`): what a batch
//! is in each dialect, and how each call learns its own fate from it.
//!
//! Postgres runs a batch of claims as one multi-row insert and a batch of
//! completions as one call of `idemkey_complete_batch`, each one
//! transaction. SQLite, whose commits cost a sync of the write-ahead log
//! and whose statements cost no round trip, runs the single statements one
//! after the other inside one transaction on its one writing connection.
//! Either way nothing is answered before the commit. A batch of one is the
//! single statement, unchanged, except a Postgres completion, which goes
//! through the batch function for its plan (see `pg_completes`).
//!
//! When the database refuses a batch (a statement error, which rolled the
//! whole transaction back), each of its calls runs again alone, so one bad
//! row cannot fail its neighbours. When the connection fails, whether the
//! batch committed is unknown: every call in it is answered `Unavailable`,
//! as a single statement would be.

use std::future::Future;

use sqlx::sqlite::SqliteRow;
use sqlx::{PgPool, Postgres, Row, Sqlite, SqlitePool};

use super::postgres::{COMPLETE_BATCH, INSERT_CLAIMS};
use super::{completion, new_claim, record, Query, Sql, SQLITE};
use crate::domain::{OwnerTokenHash, ScopedKey};
use crate::store::batch::Batcher;
use crate::store::{millis, Completion, KeyRecord, NewClaim, StoreError, StoreResult};

/// Calls in one batch at most, unless `IDEMKEY_BATCH_MAX` says.
pub const MAX_BATCH: usize = 64;

/// A claim waiting for its batch.
pub struct ClaimCall {
    pub key: ScopedKey,
    pub claim: NewClaim,
}

/// A completion waiting for its batch (owned: the batch outlives the call).
pub struct CompleteCall {
    pub key: ScopedKey,
    pub owner: OwnerTokenHash,
    pub outcome_json: String,
    pub outcome_hash: [u8; 32],
}

impl CompleteCall {
    pub fn new(key: &ScopedKey, c: &Completion<'_>) -> Self {
        Self {
            key: key.clone(),
            owner: c.owner,
            outcome_json: c.outcome_json.to_owned(),
            outcome_hash: c.outcome_hash,
        }
    }

    fn completion(&self) -> Completion<'_> {
        Completion {
            owner: self.owner,
            outcome_json: &self.outcome_json,
            outcome_hash: self.outcome_hash,
        }
    }
}

type Answers = Vec<StoreResult<Option<KeyRecord>>>;

/// Postgres's two batchers, shared by every clone of its store.
#[derive(Debug)]
pub struct Batchers {
    pub claims: Batcher<ClaimCall, Option<KeyRecord>>,
    pub completes: Batcher<CompleteCall, Option<KeyRecord>>,
}

impl Batchers {
    /// `in_flight` batches of each kind at once, each of one tenant's
    /// calls (so every statement stays within one tenant, as a database
    /// distributed by tenant needs).
    pub fn new(in_flight: usize, max: usize) -> Self {
        Self {
            claims: Batcher::new(in_flight, max, |a, b| a.key.tenant == b.key.tenant),
            completes: Batcher::new(in_flight, max, |a, b| a.key.tenant == b.key.tenant),
        }
    }
}

/// The order two batches take row locks in: by scoped key.
fn scoped_order(a: &ScopedKey, b: &ScopedKey) -> std::cmp::Ordering {
    (a.tenant.as_str(), a.operation.as_str(), a.key.as_str()).cmp(&(
        b.tenant.as_str(),
        b.operation.as_str(),
        b.key.as_str(),
    ))
}

/// Whether the database itself refused the statement (so nothing of the
/// transaction committed), as opposed to the connection failing.
fn refused(e: &StoreError) -> bool {
    matches!(e, StoreError::Unavailable(sqlx::Error::Database(_))) && !e.is_connection()
}

// Postgres.

/// How a batch of one call runs.
#[derive(Clone, Copy)]
enum One {
    /// As the call's single statement.
    Alone,
    /// As any batch (completions: the batch function's plan is kept, the
    /// single statement's is made again at every run).
    Together,
}

/// Runs a batch together (a batch of one as `one` says), and again call by
/// call if the database refused it.
async fn together_or_alone<'c, C, F>(
    calls: &'c [C],
    one: One,
    together: impl Future<Output = StoreResult<Answers>>,
    alone: impl Fn(&'c C) -> F,
) -> Answers
where
    F: Future<Output = StoreResult<Option<KeyRecord>>>,
{
    if let (One::Alone, [call]) = (one, calls) {
        return vec![alone(call).await];
    }
    match together.await {
        Ok(answers) => answers,
        Err(e) if refused(&e) => {
            tracing::warn!(error = ?e, rows = calls.len(), "a batch was refused; running each call alone");
            let mut answers = Vec::with_capacity(calls.len());
            for c in calls {
                answers.push(alone(c).await);
            }
            answers
        }
        Err(e) => calls.iter().map(|_| Err(copy_error(&e))).collect(),
    }
}

/// One array parameter: `f` of every call, in `order`.
fn column<C, T>(calls: &[C], order: &[usize], f: impl Fn(&C) -> T) -> Vec<T> {
    order.iter().map(|&i| f(&calls[i])).collect()
}

pub async fn pg_claims(pool: PgPool, calls: Vec<ClaimCall>) -> Answers {
    let pool = &pool;
    together_or_alone(
        &calls,
        One::Alone,
        pg_claims_together(pool, &calls),
        |c| async move { Sql::on(pool).insert_claim(&c.key, &c.claim).await },
    )
    .await
}

async fn pg_claims_together(pool: &PgPool, calls: &[ClaimCall]) -> StoreResult<Answers> {
    let all: Vec<usize> = (0..calls.len()).collect();
    let rows = sqlx::query(INSERT_CLAIMS)
        .bind(column(calls, &all, |c| c.key.tenant.as_str().to_owned()))
        .bind(column(calls, &all, |c| c.key.operation.as_str().to_owned()))
        .bind(column(calls, &all, |c| c.key.key.as_str().to_owned()))
        .bind(column(calls, &all, |c| {
            c.claim.fingerprint.as_bytes().to_vec()
        }))
        .bind(column(calls, &all, |c| c.claim.owner.0.to_vec()))
        .bind(column(calls, &all, |c| millis(c.claim.lease)))
        .bind(column(calls, &all, |c| millis(c.claim.replay_window)))
        .bind(column(calls, &all, |c| millis(c.claim.tier_after)))
        .bind(column(calls, &all, |c| {
            c.claim.rules_digest.map(|d| d.to_vec())
        }))
        .bind(column(calls, &all, |c| c.claim.field_digests.clone()))
        .fetch_all(pool)
        .await?;
    let mut won = Vec::with_capacity(rows.len());
    for row in &rows {
        won.push(record::<Postgres>(row)?);
    }
    // Each winner is named by its owner hash, random per claim.
    Ok(calls
        .iter()
        .map(|c| {
            Ok(won
                .iter()
                .position(|r| r.owner_token_hash == c.claim.owner)
                .map(|i| won[i].clone()))
        })
        .collect())
}

/// Even a batch of one runs as the batch function: the function's update
/// is planned once per connection (see its migrations), where Postgres
/// plans the single statement again at every run (on the partitioned
/// table, a plan made for the key's values always looks cheaper to it than
/// the one plan that fits every key).
pub async fn pg_completes(pool: PgPool, calls: Vec<CompleteCall>) -> Answers {
    let pool = &pool;
    together_or_alone(
        &calls,
        One::Together,
        pg_completes_together(pool, &calls),
        |c| async move { Sql::on(pool).complete(&c.key, &c.completion()).await },
    )
    .await
}

async fn pg_completes_together(pool: &PgPool, calls: &[CompleteCall]) -> StoreResult<Answers> {
    let mut order: Vec<usize> = (0..calls.len()).collect();
    order.sort_by(|&a, &b| scoped_order(&calls[a].key, &calls[b].key));
    let rows = sqlx::query(COMPLETE_BATCH)
        .bind(column(calls, &order, |c| c.key.tenant.as_str().to_owned()))
        .bind(column(calls, &order, |c| {
            c.key.operation.as_str().to_owned()
        }))
        .bind(column(calls, &order, |c| c.key.key.as_str().to_owned()))
        .bind(column(calls, &order, |c| c.owner.0.to_vec()))
        .bind(column(calls, &order, |c| c.outcome_json.clone()))
        .bind(column(calls, &order, |c| c.outcome_hash.to_vec()))
        .fetch_all(pool)
        .await?;
    let mut answers: Answers = calls.iter().map(|_| Ok(None)).collect();
    for row in &rows {
        let position: i32 = row.try_get("i")?;
        let call = usize::try_from(position - 1)
            .ok()
            .and_then(|p| order.get(p))
            .ok_or_else(|| StoreError::Corrupt(format!("batch position {position}")))?;
        answers[*call] = Ok(Some(record::<Postgres>(row)?));
    }
    Ok(answers)
}

// SQLite.

/// A write waiting for the SQLite writer: claims and completions share
/// its batches, since they share its one connection and every commit
/// costs a sync of the log whatever it carries.
pub enum Write {
    Claim(ClaimCall),
    Complete(CompleteCall),
}

/// SQLite's one batcher. Two batches at a time: one writing, the next
/// already waiting for the writing connection, so the writer never waits
/// for a batch to be formed; the calls that arrive meanwhile form the one
/// after.
pub fn sqlite_batcher(max: usize) -> Batcher<Write, Option<KeyRecord>> {
    // One file serves one node and is never distributed: calls of any
    // tenants go together.
    Batcher::new(2, max, |_, _| true)
}

pub async fn sqlite_writes(pool: SqlitePool, calls: Vec<Write>) -> Answers {
    sqlite_together(pool, calls, |w| match w {
        Write::Claim(c) => new_claim(sqlx::query(SQLITE.insert_claim), &c.key, &c.claim),
        Write::Complete(c) => completion(sqlx::query(SQLITE.complete), &c.key, &c.completion()),
    })
    .await
}

type SqliteQuery = Query<'static, Sqlite>;

/// The single statements in one transaction on the writing connection:
/// one commit, so one sync of the log, for the batch.
async fn sqlite_together<C>(
    pool: SqlitePool,
    calls: Vec<C>,
    build: fn(&C) -> SqliteQuery,
) -> Answers {
    let pool = &pool;
    together_or_alone(
        &calls,
        One::Alone,
        sqlite_transaction(pool, &calls, build),
        |c| async move { sqlite_one(build(c).fetch_optional(pool).await) },
    )
    .await
}

async fn sqlite_transaction<C>(
    pool: &SqlitePool,
    calls: &[C],
    build: fn(&C) -> SqliteQuery,
) -> StoreResult<Answers> {
    let mut tx = pool.begin().await?;
    let mut answers = Vec::with_capacity(calls.len());
    for c in calls {
        let row = build(c).fetch_optional(&mut *tx).await?;
        answers.push(Ok(row.map(|r| record::<Sqlite>(&r)).transpose()?));
    }
    tx.commit().await?;
    Ok(answers)
}

fn sqlite_one(row: Result<Option<SqliteRow>, sqlx::Error>) -> StoreResult<Option<KeyRecord>> {
    row?.map(|r| record::<Sqlite>(&r)).transpose()
}

/// The same failure for every call of a batch (`sqlx::Error` is not
/// `Clone`): its kind is kept, which is all a caller acts on.
fn copy_error(e: &StoreError) -> StoreError {
    match e {
        StoreError::Unavailable(_) if e.is_connection() => StoreError::Unavailable(
            sqlx::Error::Io(std::io::Error::other(format!("batch failed: {e:?}"))),
        ),
        StoreError::Unavailable(inner) => {
            StoreError::Unavailable(sqlx::Error::Protocol(format!("batch failed: {inner}")))
        }
        StoreError::Corrupt(what) => StoreError::Corrupt(what.clone()),
        StoreError::Unreachable => StoreError::Unreachable,
    }
}
