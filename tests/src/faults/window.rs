//! Clients of a class with a short replay window (the `window` round).
//!
//! A key's protection never ends while an attempt may still act on it or
//! has just acted: an outcome stored late is replayed for a whole window
//! after it was stored, and a record never completed stays protected until
//! its last lease ended a whole window ago. These clients put that to work:
//! - many owners work longer than the window before their effect, under
//!   heartbeats, so their outcome is stored after the first window ended;
//! - an owner that dies after its effect is recovered by a retry timed after
//!   the first window ended but well before its last lease ended a window
//!   ago;
//! - a caller that comes later starts while the key is known to be
//!   protected, from what the answers said so far.
//!
//! Every time comes from the answers (granted leases, stored outcomes) on
//! the database's clock, which is this machine's. A retry that still lands
//! after the protection legitimately ended (a killed server delayed it) is
//! not an error of the server; the checker counts it as not judged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

use super::calls::Grant;
use super::clients::Workload;
use super::journal::{Call, Entry};

/// A later caller starts at the latest this long before the key's known
/// protection ends.
const AHEAD: Duration = Duration::from_millis(900);

/// The short window and what the callers learnt about each key.
pub struct Windowed {
    /// The class's replay window.
    pub length: Duration,
    /// Chance, in thousandths, that an owner works past the window before
    /// its effect.
    pub slow_per_mille: u32,
    /// Per key: a time until which it is surely protected (unless
    /// released), from the answers seen so far.
    protected: Mutex<HashMap<String, DateTime<Utc>>>,
}

impl Windowed {
    pub fn new(length: Duration, slow_per_mille: u32) -> Self {
        Self {
            length,
            slow_per_mille,
            protected: Mutex::default(),
        }
    }

    fn window(&self) -> TimeDelta {
        TimeDelta::from_std(self.length).expect("a window")
    }

    /// Learns from one answer: a grant or heartbeat protects the key a
    /// window past the moment it was granted, `in_progress` a window past
    /// the moment it was asked, a stored outcome a window past its storing.
    pub fn learn(&self, key: &str, e: &Entry) {
        let seen = match (e.call, e.status) {
            (Call::Claim, 409) if e.word == "in_progress" => Some(e.sent_at),
            _ => e.granted_at.or(e.completed_at),
        };
        if let Some(at) = seen {
            let until = at + self.window();
            let mut known = self.protected.lock().expect("protection");
            let slot = known.entry(key.to_owned()).or_insert(until);
            *slot = (*slot).max(until);
        }
    }

    /// When a caller that planned to come at `planned` should start: then,
    /// or earlier if the key's protection is known to end soon.
    pub async fn start_within(&self, key: &str, planned: Instant) {
        while Instant::now() < planned {
            let ends = self.protected.lock().expect("protection").get(key).copied();
            let soon =
                ends.is_some_and(|end| (end - Utc::now()).to_std().unwrap_or_default() <= AHEAD);
            if soon {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// When an owner that died after its effect comes back as a new client:
    /// after the first window of the key ended (at the latest a window
    /// after this owner's grant) and after the lease ran out, but 600 ms
    /// before that lease ended a window ago.
    pub fn comeback(&self, grant: &Grant, lease_end: DateTime<Utc>) -> DateTime<Utc> {
        let earliest =
            (grant.granted_at + self.window()).max(lease_end) + TimeDelta::milliseconds(100);
        let latest = lease_end + self.window() - TimeDelta::milliseconds(600);
        let span = (latest - earliest).num_milliseconds().max(0);
        earliest + TimeDelta::milliseconds(rand::random_range(0..=span))
    }
}

impl Workload {
    /// A long effect: `length` of work under heartbeats every third of the
    /// lease. The lease end the last heartbeat gave, or `None` when the key
    /// is no longer this owner's.
    pub async fn work(
        &self,
        key: &str,
        caller: u32,
        grant: &Grant,
        lease_ms: u64,
        length: Duration,
    ) -> Option<DateTime<Utc>> {
        let mut e = grant.entry(Call::Working, caller);
        e.note = format!("{} ms under heartbeats", length.as_millis());
        self.record(key, e);
        let done = Instant::now() + length;
        let mut lease_end = grant.lease_end;
        loop {
            let beat = Duration::from_millis(lease_ms / 3);
            let now = Instant::now();
            if now + beat >= done {
                tokio::time::sleep_until(done).await;
                return Some(lease_end);
            }
            tokio::time::sleep(beat).await;
            match self.heartbeat(key, caller, grant, lease_ms).await {
                Ok(Some(end)) => lease_end = end,
                Ok(None) => {}
                Err(()) => return None,
            }
        }
    }
}

/// Sleeps until the wall-clock time `at`.
pub async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(left) = (at - Utc::now()).to_std() {
        tokio::time::sleep(left).await;
    }
}
