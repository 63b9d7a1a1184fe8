//! The Postgres backend: the production ownership authority.
//!
//! Times come from the database clock (`now()`), so leases and windows mean
//! the same thing on every node whatever their own clocks say.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Connection;

use super::batch::Sizes;
use super::breaker::Breaker;
use super::claims::batch::{self, Batchers, ClaimCall, CompleteCall};
use super::{Completion, KeyRecord, NewClaim, StoreResult};
use crate::domain::ScopedKey;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// A pooled connection idle at least this long is pinged before use.
///
/// sqlx pings every connection as it goes back to the pool, so one released
/// a moment ago is known to be good; its default of pinging again on every
/// acquire added a round trip to every statement (seen in the benchmark's
/// profile). A connection that died while idle for less than this fails its
/// statement, which answers 503 `unavailable` (retryable, never "new"), and
/// sqlx then discards it.
const PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    url: String,
    breaker: Arc<Breaker>,
    batchers: Arc<Batchers>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a password.
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

impl PgStore {
    pub async fn connect(
        url: &str,
        max_connections: u32,
        batch_max: usize,
    ) -> anyhow::Result<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .test_before_acquire(false)
            .before_acquire(|conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= PING_IF_IDLE_FOR {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .connect_lazy(url)
            .context("IDEMKEY_DATABASE_URL is not a valid Postgres URL")?;
        Ok(Self {
            pool,
            url: url.to_owned(),
            breaker: Arc::default(),
            // A quarter of the pool for each kind of batch, so they leave
            // half of it to every other statement.
            batchers: Arc::new(Batchers::new(
                (max_connections / 4).max(1) as usize,
                batch_max,
            )),
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The same pool: Postgres needs no separate readers (see the SQLite
    /// store's, which does).
    pub fn reader(&self) -> &PgPool {
        &self.pool
    }

    /// Batches run so far, by kind.
    pub(super) fn batch_sizes(&self) -> Vec<(&'static str, Sizes)> {
        vec![
            ("claims", self.batchers.claims.sizes()),
            ("completions", self.batchers.completes.sizes()),
        ]
    }

    /// A new claim, in a batch with the claims running beside it.
    pub(super) async fn insert_claim(
        &self,
        k: &ScopedKey,
        c: &NewClaim,
    ) -> StoreResult<Option<KeyRecord>> {
        let pool = self.pool.clone();
        let call = ClaimCall {
            key: k.clone(),
            claim: c.clone(),
        };
        self.batchers
            .claims
            .submit(call, move |calls| batch::pg_claims(pool.clone(), calls))
            .await
    }

    /// A completion, in a batch with the completions running beside it.
    pub(super) async fn complete(
        &self,
        k: &ScopedKey,
        c: &Completion<'_>,
    ) -> StoreResult<Option<KeyRecord>> {
        let pool = self.pool.clone();
        self.batchers
            .completes
            .submit(CompleteCall::new(k, c), move |calls| {
                batch::pg_completes(pool.clone(), calls)
            })
            .await
    }

    /// Fails calls fast while the database is away (shared by every clone).
    pub fn breaker(&self) -> &Breaker {
        &self.breaker
    }

    /// Creates the database if it is missing, then applies the migrations.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let url = &self.url;
        if !sqlx::Postgres::database_exists(url).await.unwrap_or(true) {
            // Several nodes may start at once; losing the race is fine.
            if let Err(e) = sqlx::Postgres::create_database(url).await {
                if !sqlx::Postgres::database_exists(url).await.unwrap_or(false) {
                    return Err(e).context("creating the database");
                }
            }
        }
        MIGRATOR
            .run(&self.pool)
            .await
            .context("applying Postgres migrations")
    }
}
