//! This node's registrations as a waiter, on Postgres.
//!
//! A change of a key is announced to the other nodes only when one of them
//! waits on it (see `store::events`). So before a claim waits, its node
//! makes sure it is registered for the key; one registration per node and
//! key serves every claim waiting there. It is remembered here until a
//! little before it ends, and a claim whose wait would outlast it registers
//! again (a registration only ever lengthens).
//!
//! A look that started before the registration committed may have missed a
//! change that nobody announced, so [`Waiters::covering`] says when the
//! registration was made, and the claim looks again if its last look is
//! older. SQLite needs none of this: its one process wakes its own waiters.

use std::time::Duration;

use quick_cache::sync::Cache;
use tokio::time::Instant;

use crate::cache::bounded;
use crate::domain::KeyHash;

/// A registration lasts at least this long, so a storm of short waits on
/// one key registers once.
const MIN_REGISTRATION: Duration = Duration::from_secs(30);

/// A registration is trusted until this long before the database ends it.
const MARGIN: Duration = Duration::from_secs(2);

/// Keys whose registration this node remembers (an evicted one is made
/// again by the next claim that waits on it: one more statement, no harm).
const REMEMBERED: usize = 16_384;

pub struct Waiters {
    /// This node's name in the registrations (random per process).
    node: String,
    registered: Cache<KeyHash, Registered>,
}

#[derive(Clone, Copy)]
struct Registered {
    /// When the registering statement had committed.
    made: Instant,
    /// Waits ending before this are covered.
    covers_until: Instant,
}

impl Default for Waiters {
    fn default() -> Self {
        Self {
            node: format!("{:016x}", rand::random::<u64>()),
            registered: bounded(REMEMBERED),
        }
    }
}

impl Waiters {
    /// This node's name in its registrations.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// When the registration covering a wait on `h` until `until` was made,
    /// if this node has one.
    pub fn covering(&self, h: KeyHash, until: Instant) -> Option<Instant> {
        let known = self.registered.get(&h)?;
        (known.covers_until >= until).then_some(known.made)
    }

    /// How long a registration for a wait until `until` should last, asked
    /// at `asked`.
    pub fn length(asked: Instant, until: Instant) -> Duration {
        until.saturating_duration_since(asked).max(MIN_REGISTRATION) + MARGIN
    }

    /// Remembers a registration of `length`, asked at `asked` and
    /// committed at `made`.
    pub fn remember(&self, h: KeyHash, asked: Instant, length: Duration, made: Instant) {
        let covers_until = asked + length.saturating_sub(MARGIN);
        self.registered.insert(h, Registered { made, covers_until });
    }
}
