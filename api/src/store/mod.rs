//! Storage: every SQL statement lives below this module.
//!
//! The store offers exactly the atomic steps the claim protocol needs. Each
//! transition is a single guarded statement (an insert that may do nothing,
//! or an update whose `where` names the state, attempt or owner it expects);
//! the caller learns whether it won from the returned row, never from a
//! previous read. No transaction is held open across a client's work.
//!
//! Two backends keep the same contract: Postgres (the production authority)
//! and SQLite (the embedded default, one file in the data directory), with
//! one body per method and SQL text per dialect (see `dialect`). The
//! end-to-end tests run one set of bodies against both
//! (`idemkey_tests::on_every_backend!`).

#[macro_use]
mod fragments;

/// Runs the same call on whichever backend is configured; on Postgres,
/// through the breaker that fails fast while the database is away.
macro_rules! dispatch {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            Store::Postgres($s) => $s.breaker().guard(async { $call }).await,
            Store::Sqlite($s) => $call,
        }
    };
}

/// Runs the same call on whichever backend is configured, on Postgres
/// without the breaker (calls that predate it, and the workers').
macro_rules! each_backend {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            Store::Postgres($s) => $call,
            Store::Sqlite($s) => $call,
        }
    };
}

mod batch;
mod breaker;
pub mod catalogue;
mod claims;
mod classes;
mod cursor;
mod dialect;
mod events;
mod hot_keys;
mod postgres;
mod quotas;
mod record;
mod recovery;
mod rejections;
mod sqlite;
mod tiering;
mod usage;
mod watch;
mod webhooks;

use std::time::Duration;

use thiserror::Error;

pub use batch::Sizes as BatchSizes;
pub use claims::batch::MAX_BATCH;
pub use claims::postgres_sql;
pub use classes::StoredClass;
pub use events::{Heard, CHANNEL as KEY_EVENTS_CHANNEL};
pub use hot_keys::{HotKey, HotKeyMinute};
pub use postgres::PgStore;
pub use quotas::{TenantQuota, TenantStorage};
pub use record::{
    Completion, KeyRecord, ListCursor, ListQuery, ListState, NewClaim, Resolver, Routing, StepDone,
    Version,
};
pub use rejections::{Rejection, KEPT_PER_CLASS as REJECTIONS_KEPT_PER_CLASS};
pub use sqlite::SqliteStore;

use claims::Sql;
pub use tiering::{ArchiveLag, Placement, SealedSegment, TierBatch, TierCandidate};
pub use usage::{HotCount, HotState, UsageBucket, UsageMinute};
pub use watch::StuckCount;
pub use webhooks::{AttemptResult, Delivery, DeliveryCounts, NewEndpoint, StoredEndpoint};

use crate::domain::{IdempotencyKey, KeyHash, OperationName, OwnerTokenHash, ScopedKey, TenantId};

#[derive(Debug, Error)]
pub enum StoreError {
    /// The database could not answer. Never to be read as "not found".
    #[error("the store could not answer")]
    Unavailable(#[from] sqlx::Error),
    /// A row held something the schema forbids.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The database has been unreachable and the breaker refuses calls
    /// for a moment, at once (see `breaker`). Never "not found" either.
    #[error("the database is unreachable; refusing calls for a moment")]
    Unreachable,
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Postgres connections per node unless `IDEMKEY_DATABASE_POOL` says.
pub const DEFAULT_POOL: u32 = 16;

/// The configured backend.
#[derive(Clone, Debug)]
pub enum Store {
    Postgres(PgStore),
    Sqlite(SqliteStore),
}

impl Store {
    /// Opens the backend named by the URL's scheme, with the default pool.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_pooled(url, DEFAULT_POOL).await
    }

    /// Opens the backend named by the URL's scheme; a Postgres pool keeps at
    /// most `max_connections` connections.
    pub async fn connect_pooled(url: &str, max_connections: u32) -> anyhow::Result<Self> {
        Self::connect_tuned(url, max_connections, MAX_BATCH).await
    }

    /// As [`Store::connect_pooled`], with at most `batch_max` claims (or
    /// completions) in one batch (see `batch`; 1: each call alone).
    pub async fn connect_tuned(
        url: &str,
        max_connections: u32,
        batch_max: usize,
    ) -> anyhow::Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(
                PgStore::connect(url, max_connections, batch_max).await?,
            ));
        }
        if url.starts_with("sqlite:") {
            return Ok(Self::Sqlite(SqliteStore::connect(url, batch_max).await?));
        }
        anyhow::bail!(
            "IDEMKEY_DATABASE_URL: unsupported scheme in {:?} (expected postgres:// or sqlite://)",
            redact(url)
        )
    }

    /// Brings the schema up to date (creating the database if needed).
    pub async fn migrate(&self) -> anyhow::Result<()> {
        each_backend!(self, s => s.migrate().await)
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
            Self::Sqlite(_) => "sqlite",
        }
    }

    pub async fn ping(&self) -> StoreResult<()> {
        dispatch!(self, s => Sql::on(s.reader()).ping().await)
    }

    /// The atomic fork: inserts a new in-progress record, or returns `None`
    /// when any record for the key already exists.
    pub async fn insert_claim(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => s.insert_claim(k, c).await)
    }

    pub async fn find(&self, k: &ScopedKey) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => Sql::on(s.reader()).find(k).await)
    }

    /// Replaces a record that is gone (past its replay window, see
    /// `domain::protected_until`) with a fresh claim. `None` when the record
    /// no longer qualifies.
    pub async fn renew_expired(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => Sql::on(s.pool()).renew_expired(k, c).await)
    }

    /// Takes over an in-progress record whose lease has run out, if it is
    /// still the version `seen` (attempt and owner).
    pub async fn take_over(
        &self,
        k: &ScopedKey,
        seen: Version,
        owner: OwnerTokenHash,
        lease: Duration,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => Sql::on(s.pool()).take_over(k, seen, owner, lease).await)
    }

    /// Quarantines an in-progress record whose lease has run out (classes
    /// whose policy forbids automatic takeover), if it is still the version
    /// `seen`.
    pub async fn quarantine_expired(
        &self,
        k: &ScopedKey,
        seen: Version,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => Sql::on(s.pool()).quarantine_expired(k, seen).await)
    }

    /// Stores the outcome if `owner` is the current attempt of an in-progress
    /// record that is not gone, and moves the window's end to at least
    /// `now + replay_window`.
    pub async fn complete(
        &self,
        k: &ScopedKey,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => s.complete(k, c).await)
    }

    /// Extends the lease of the current attempt to `lease` (or the length
    /// the attempt chose when it claimed) from now.
    pub async fn heartbeat(
        &self,
        k: &ScopedKey,
        owner: OwnerTokenHash,
        lease: Option<Duration>,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => Sql::on(s.pool()).heartbeat(k, owner, lease).await)
    }

    /// Records a finished step for the current owner: a step already done
    /// with the same provider reference is left as it was; one with another
    /// reference, or a 65th step, matches nothing.
    pub async fn record_step(
        &self,
        k: &ScopedKey,
        s: &StepDone<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, st => Sql::on(st.pool()).record_step(k, s).await)
    }

    /// The owner marks its in-progress record quarantined (ambiguous outcome).
    pub async fn quarantine(
        &self,
        k: &ScopedKey,
        owner: OwnerTokenHash,
        reason: &str,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => Sql::on(s.pool()).quarantine(k, owner, reason).await)
    }

    /// Completes a quarantined record (or, for an admin, one whose lease ran
    /// out) with the chosen outcome.
    pub async fn resolve_complete(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        dispatch!(self, s => Sql::on(s.pool()).resolve_complete(k, by, c).await)
    }

    /// Releases a quarantined record (or, for an admin, one whose lease ran
    /// out), keeping who did it and the record's history in `key_release`, in
    /// the same transaction. True if it did.
    pub async fn resolve_release(
        &self,
        k: &ScopedKey,
        by: &Resolver,
        reason: Option<&str>,
    ) -> StoreResult<bool> {
        dispatch!(self, s => Sql::on(s.pool()).resolve_release(k, by, reason).await)
    }

    /// A tenant's live records, newest first.
    pub async fn list(
        &self,
        tenant: &TenantId,
        q: &ListQuery,
    ) -> StoreResult<Vec<(ScopedKey, KeyRecord)>> {
        dispatch!(self, s => Sql::on(s.reader()).list(tenant, q).await)
    }

    /// Deletes an in-progress record owned by `owner`. True if it did.
    pub async fn release(&self, k: &ScopedKey, owner: OwnerTokenHash) -> StoreResult<bool> {
        dispatch!(self, s => Sql::on(s.pool()).release(k, owner).await)
    }

    /// How many batches of each kind this store ran, and the calls they
    /// carried (see `batch`): on Postgres claims and completions apart, on
    /// SQLite together.
    pub fn batch_sizes(&self) -> Vec<(&'static str, batch::Sizes)> {
        each_backend!(self, s => s.batch_sizes())
    }

    /// Tells the other nodes that the record of `h` is about to change (so
    /// they drop what they cache of it). A no-op on SQLite, which has no
    /// other nodes.
    pub async fn announce(&self, h: KeyHash) -> StoreResult<()> {
        match self {
            Store::Postgres(s) => s.breaker().guard(s.announce(h)).await,
            Store::Sqlite(_) => Ok(()),
        }
    }
}

/// Milliseconds, as both backends bind durations.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A stored window length (ms) back as a duration.
fn window(ms: i64) -> StoreResult<Duration> {
    u64::try_from(ms)
        .map(Duration::from_millis)
        .map_err(|_| StoreError::Corrupt(format!("window_ms {ms}")))
}

fn hash32(bytes: &[u8]) -> StoreResult<[u8; 32]> {
    bytes
        .try_into()
        .map_err(|_| StoreError::Corrupt("hash length".into()))
}

fn opt_hash32(bytes: Option<Vec<u8>>) -> StoreResult<Option<[u8; 32]>> {
    bytes.as_deref().map(hash32).transpose()
}

/// A routing entry from its columns: all present, or all absent.
fn routing_from_parts(
    segment: Option<String>,
    offset: Option<i64>,
    len: Option<i64>,
    sha256: Option<Vec<u8>>,
    tiered_at: Option<chrono::DateTime<chrono::Utc>>,
) -> StoreResult<Option<Routing>> {
    match (segment, offset, len, sha256, tiered_at) {
        (None, None, None, None, None) => Ok(None),
        (Some(segment), Some(offset), Some(len), Some(sha256), Some(tiered_at)) => {
            let bytes = |n: i64, what: &str| {
                u64::try_from(n).map_err(|_| StoreError::Corrupt(format!("segment {what} {n}")))
            };
            Ok(Some(Routing {
                segment,
                offset: bytes(offset, "offset")?,
                len: bytes(len, "length")?,
                sha256: hash32(&sha256)?,
                tiered_at,
            }))
        }
        _ => Err(StoreError::Corrupt("incomplete routing entry".into())),
    }
}

/// Rebuilds a scoped key from a listed row.
fn scoped_from(tenant: &TenantId, operation: &str, key: &str) -> StoreResult<ScopedKey> {
    Ok(ScopedKey {
        tenant: tenant.clone(),
        operation: OperationName::parse(operation)
            .map_err(|_| StoreError::Corrupt(format!("operation {operation:?}")))?,
        key: IdempotencyKey::parse(key).map_err(|_| StoreError::Corrupt("key".into()))?,
    })
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    let (Some(scheme), Some(at)) = (url.find("://"), url.rfind('@')) else {
        return url.to_owned();
    };
    if at < scheme + 3 {
        return url.to_owned();
    }
    match url[scheme + 3..at].split_once(':') {
        Some((user, _password)) => format!("{}://{user}:***{}", &url[..scheme], &url[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://./data/x.db"), "sqlite://./data/x.db");
    }
}
