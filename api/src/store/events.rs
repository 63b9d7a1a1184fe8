//! Key events between nodes: Postgres LISTEN/NOTIFY on one channel.
//!
//! The database sends an event whenever a record changes state or is
//! deleted (a trigger, see the key-events migration), and a node may announce
//! a change itself before making it ([`PgStore::announce`]). Each node keeps
//! one listening connection. Postgres drops notifications sent while a
//! listener is disconnected, so every (re)connection is reported as a
//! [`Heard::Gap`]: whoever listens must assume it missed something.
//!
//! Only keys somebody waits on are announced: a node about to let claims
//! wait on a key registers itself in `key_waiter` ([`PgStore::register_waiter`]),
//! and the node that completes, releases, quarantines or resolves the key
//! announces it when such a registration exists (a completion learns it
//! from its own statement, the rarer changes ask [`PgStore::waited`]).
//! Notifying on every change made every commit queue behind a database-wide
//! lock; see the key-waiters migration.
//!
//! SQLite is one process on one machine: it needs no channel, the engine
//! wakes its own waiters.

use std::time::Duration;

use sqlx::postgres::PgListener;

use super::{millis, PgStore, Store, StoreResult};
use crate::domain::{KeyHash, ScopedKey};

/// The channel every node listens on.
pub const CHANNEL: &str = "idemkey_key_events";

const FIRST_RETRY: Duration = Duration::from_millis(200);
const MAX_RETRY: Duration = Duration::from_secs(5);

/// What a listener heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    /// The record with this key digest changed.
    Key(KeyHash),
    /// The listener was (re)connected: events before this may be lost.
    Gap,
}

impl PgStore {
    /// Listens until the process ends, reconnecting with backoff, and hands
    /// every event to `on`.
    pub async fn listen(self, on: impl Fn(Heard) + Send + 'static) {
        let mut wait = FIRST_RETRY;
        loop {
            let mut listener = match self.subscribe().await {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for key events; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(MAX_RETRY);
                    continue;
                }
            };
            wait = FIRST_RETRY;
            on(Heard::Gap);
            loop {
                match listener.try_recv().await {
                    Ok(Some(n)) => match KeyHash::parse_hex(n.payload()) {
                        Some(h) => on(Heard::Key(h)),
                        None => {
                            tracing::debug!(payload = n.payload(), "ignoring a foreign key event")
                        }
                    },
                    // The connection was lost; the next call reconnects.
                    Ok(None) => on(Heard::Gap),
                    Err(e) => {
                        tracing::warn!(error = %e, "lost the key-event listener; reconnecting");
                        on(Heard::Gap);
                        break;
                    }
                }
            }
        }
    }

    async fn subscribe(&self) -> sqlx::Result<PgListener> {
        let mut listener = PgListener::connect_with(self.pool()).await?;
        listener.listen(CHANNEL).await?;
        Ok(listener)
    }

    /// Tells every node that the record of `h` is about to change.
    pub async fn announce(&self, h: KeyHash) -> StoreResult<()> {
        sqlx::query("select pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(h.to_hex())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Registers `node` as waiting on `k` for at least `for_at_least`, then
    /// reads the row `for share` in the same transaction: a change of the
    /// key that is under way when this runs finishes first (and the
    /// caller's next read sees it), and one that starts later sees the
    /// registration and is announced.
    pub async fn register_waiter(
        &self,
        k: &ScopedKey,
        node: &str,
        for_at_least: Duration,
    ) -> StoreResult<()> {
        sqlx::query(REGISTER_WAITER)
            .bind(k.tenant.as_str())
            .bind(k.operation.as_str())
            .bind(k.key.as_str())
            .bind(node)
            .bind(millis(for_at_least))
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Whether any node waits on `k` (asked after a change has committed).
    pub async fn waited(&self, k: &ScopedKey) -> StoreResult<bool> {
        let waited = sqlx::query_scalar("select idemkey_waited($1, $2, $3)")
            .bind(k.tenant.as_str())
            .bind(k.operation.as_str())
            .bind(k.key.as_str())
            .fetch_one(self.pool())
            .await?;
        Ok(waited)
    }

    /// Deletes registrations whose waits are over, a bounded batch at a
    /// time. The number deleted.
    pub async fn prune_waiters(&self) -> StoreResult<u64> {
        let done = sqlx::query(PRUNE_WAITERS).execute(self.pool()).await?;
        Ok(done.rows_affected())
    }
}

/// `$1..$3` the scoped key, `$4` the node, `$5` how long (ms). A
/// registration only ever lengthens.
const REGISTER_WAITER: &str = "with registered as ( \
       insert into key_waiter (tenant, operation, key, node, until) \
       values ($1, $2, $3, $4, now() + $5 * interval '1 millisecond') \
       on conflict (tenant, operation, key, node) \
       do update set until = greatest(key_waiter.until, excluded.until) returning 1) \
     select 1 from idempotency_key where tenant = $1 and operation = $2 and key = $3 for share";

/// Registrations over for a minute (clocks of nodes and database differ a
/// little; a waiter never outlives its registration by design).
const PRUNE_WAITERS: &str = "delete from key_waiter where ctid = any (array( \
       select ctid from key_waiter where until < now() - interval '1 minute' \
        order by until limit 1000))";

/// The key-waiter registrations on whichever backend is configured.
impl Store {
    /// Registers this node (`node`) as waiting on `k` for at least
    /// `for_at_least`, so a change of the key is announced to it (see
    /// `events`). A no-op on SQLite, whose one process wakes its own waiters.
    pub async fn register_waiter(
        &self,
        k: &ScopedKey,
        node: &str,
        for_at_least: Duration,
    ) -> StoreResult<()> {
        match self {
            Store::Postgres(s) => {
                let registered = s.register_waiter(k, node, for_at_least);
                s.breaker().guard(registered).await
            }
            Store::Sqlite(_) => Ok(()),
        }
    }

    /// Whether a node waits on `k`; false on SQLite.
    pub async fn waited(&self, k: &ScopedKey) -> StoreResult<bool> {
        match self {
            Store::Postgres(s) => s.breaker().guard(s.waited(k)).await,
            Store::Sqlite(_) => Ok(false),
        }
    }

    /// Forgets registrations of waits long over (the lease watch's chore).
    pub async fn prune_waiters(&self) -> StoreResult<u64> {
        match self {
            Store::Postgres(s) => s.prune_waiters().await,
            Store::Sqlite(_) => Ok(0),
        }
    }
}
