//! Storage: every SQL statement lives below this module.
//!
//! The store offers exactly the atomic steps the claim protocol needs. Each
//! transition is a single guarded statement (an insert that may do nothing,
//! or an update whose `where` names the state, attempt or owner it expects);
//! the caller learns whether it won from the returned row, never from a
//! previous read. No transaction is held open across a client's work.
//!
//! Postgres is the production authority. The embedded SQLite backend will
//! join it behind this same enum.

mod postgres;
mod record;

use thiserror::Error;

pub use postgres::PgStore;
pub use record::{Completion, KeyRecord, NewClaim};

use crate::domain::{OwnerTokenHash, ScopedKey};

#[derive(Debug, Error)]
pub enum StoreError {
    /// The database could not answer. Never to be read as "not found".
    #[error("the store could not answer")]
    Unavailable(#[from] sqlx::Error),
    /// A row held something the schema forbids.
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// The configured backend.
#[derive(Clone, Debug)]
pub enum Store {
    Postgres(PgStore),
}

impl Store {
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(PgStore::connect(url).await?));
        }
        anyhow::bail!(
            "IDEMKEY_DATABASE_URL: unsupported scheme in {:?} (expected postgres://)",
            redact(url)
        )
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        match self {
            Self::Postgres(s) => s.migrate().await,
        }
    }

    pub fn backend_name(&self) -> &'static str {
        match self {
            Self::Postgres(_) => "postgres",
        }
    }

    pub async fn ping(&self) -> StoreResult<()> {
        match self {
            Self::Postgres(s) => s.ping().await,
        }
    }

    /// The atomic fork: inserts a new in-progress record, or returns `None`
    /// when any record for the key already exists.
    pub async fn insert_claim(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        match self {
            Self::Postgres(s) => s.insert_claim(k, c).await,
        }
    }

    pub async fn find(&self, k: &ScopedKey) -> StoreResult<Option<KeyRecord>> {
        match self {
            Self::Postgres(s) => s.find(k).await,
        }
    }

    /// Replaces a record that is past its replay window (and holds no live
    /// lease) with a fresh claim. `None` when the record no longer qualifies.
    pub async fn renew_expired(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        match self {
            Self::Postgres(s) => s.renew_expired(k, c).await,
        }
    }

    /// Takes over an in-progress record whose lease has run out, if it is
    /// still at `seen_attempt`.
    pub async fn take_over(
        &self,
        k: &ScopedKey,
        seen_attempt: i32,
        owner: OwnerTokenHash,
        lease: std::time::Duration,
    ) -> StoreResult<Option<KeyRecord>> {
        match self {
            Self::Postgres(s) => s.take_over(k, seen_attempt, owner, lease).await,
        }
    }

    /// Quarantines an in-progress record whose lease has run out (classes
    /// whose policy forbids automatic takeover), if it is still at
    /// `seen_attempt`.
    pub async fn quarantine_expired(
        &self,
        k: &ScopedKey,
        seen_attempt: i32,
    ) -> StoreResult<Option<KeyRecord>> {
        match self {
            Self::Postgres(s) => s.quarantine_expired(k, seen_attempt).await,
        }
    }

    /// Stores the outcome if `owner` is the current attempt of an in-progress
    /// record.
    pub async fn complete(
        &self,
        k: &ScopedKey,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        match self {
            Self::Postgres(s) => s.complete(k, c).await,
        }
    }

    /// Extends the lease of the current attempt to `lease` (or the length
    /// the attempt chose when it claimed) from now.
    pub async fn heartbeat(
        &self,
        k: &ScopedKey,
        owner: OwnerTokenHash,
        lease: Option<std::time::Duration>,
    ) -> StoreResult<Option<KeyRecord>> {
        match self {
            Self::Postgres(s) => s.heartbeat(k, owner, lease).await,
        }
    }

    /// Deletes an in-progress record owned by `owner`. True if it did.
    pub async fn release(&self, k: &ScopedKey, owner: OwnerTokenHash) -> StoreResult<bool> {
        match self {
            Self::Postgres(s) => s.release(k, owner).await,
        }
    }
}

/// A database URL without its password, for messages.
pub fn redact(url: &str) -> String {
    let (Some(scheme), Some(at)) = (url.find("://"), url.rfind('@')) else {
        return url.to_owned();
    };
    match url[scheme + 3..at].split_once(':') {
        Some((user, _password)) if at > scheme => {
            format!("{}://{user}:***{}", &url[..scheme], &url[at..])
        }
        _ => url.to_owned(),
    }
}
