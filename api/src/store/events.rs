//! Key events between nodes: Postgres LISTEN/NOTIFY on one channel.
//!
//! The database sends an event whenever a record changes state or is
//! deleted (a trigger, see the key-events migration), and a node may announce
//! a change itself before making it ([`PgStore::announce`]). Each node keeps
//! one listening connection. Postgres drops notifications sent while a
//! listener is disconnected, so every (re)connection is reported as a
//! [`Heard::Gap`]: whoever listens must assume it missed something.
//!
//! SQLite is one process on one machine: it needs no channel, the engine
//! wakes its own waiters.

use std::time::Duration;

use sqlx::postgres::PgListener;

use super::{PgStore, StoreResult};
use crate::domain::KeyHash;

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
}
