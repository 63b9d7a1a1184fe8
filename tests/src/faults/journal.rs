//! What the clients saw, per key and in order: every answer of idemkey and
//! of the provider, every simulated death. The checker reads it to judge a
//! round, and prints a key's whole story when something went wrong there.
//!
//! Entries keep the database clock's times the answers carry (when a claim
//! or heartbeat was granted, when an outcome was stored), so the checker can
//! tell which record of a key a call belonged to, and whether the key was
//! still protected when a claim was answered `claimed`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::time::Instant;

/// What a journal entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `POST …/claim`.
    Claim,
    /// `POST …/complete`; the entry keeps the outcome that was sent.
    Complete,
    /// `POST …/release` after a transient failure before the effect.
    Release,
    /// `POST …/heartbeat` during a long effect.
    Heartbeat,
    /// `GET /charges/{effect_id}` at the provider after `recovering`.
    Find,
    /// `POST /charges` at the provider: the effect.
    Charge,
    /// The client dropped its owner token between effect and completion.
    Died,
    /// The owner paused past the end of its lease.
    Stalled,
    /// The owner began a long effect, under heartbeats.
    Working,
    /// The lease was too close to its end to start the effect safely.
    Abandoned,
    /// The client stopped trying at the round's deadline.
    GaveUp,
}

/// One thing a client saw or did.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Since the round started.
    pub at: Duration,
    pub caller: u32,
    pub node: Option<usize>,
    pub call: Call,
    /// The HTTP status; 0 when no answer came (refused, reset, timed out).
    pub status: u16,
    /// The answer's `status`/`code`/`state` word, or the transport error.
    pub word: String,
    pub attempt: Option<i64>,
    /// The outcome sent (complete) or replayed (claim `completed`).
    pub outcome: Option<Value>,
    /// The request a claim sent (0: the original, 1: a corrected one).
    pub variant: u8,
    /// When the call was sent, by the wall clock (the database's clock on
    /// this machine).
    pub sent_at: DateTime<Utc>,
    /// Granted claims and heartbeats: when the database granted them (the
    /// lease end the answer names, less the lease asked for).
    pub granted_at: Option<DateTime<Utc>>,
    /// Granted claims, heartbeats and `in_progress`: the lease end named.
    pub lease_end: Option<DateTime<Utc>>,
    /// Acknowledged completions and replays: when the outcome was stored.
    pub completed_at: Option<DateTime<Utc>>,
    /// An owner's calls (charge, complete, heartbeat, release): when its own
    /// claim was granted, which names the record it owned.
    pub owner_since: Option<DateTime<Utc>>,
    /// Granted claims: the effect id.
    pub effect_id: Option<String>,
    /// A charge id, a lease end, an error text.
    pub note: String,
    /// A charge the provider answered only after its owner's lease had
    /// ended: the client's safety margin was not enough (a client-side
    /// timing problem, not the server's).
    pub late: bool,
}

impl Entry {
    pub fn new(call: Call, caller: u32) -> Self {
        Self {
            at: Duration::ZERO,
            caller,
            node: None,
            call,
            status: 0,
            word: String::new(),
            attempt: None,
            outcome: None,
            variant: 0,
            sent_at: Utc::now(),
            granted_at: None,
            lease_end: None,
            completed_at: None,
            owner_since: None,
            effect_id: None,
            note: String::new(),
            late: false,
        }
    }

    /// An answer a client retries the same call after (with backoff).
    pub fn is_retryable(&self) -> bool {
        matches!(self.status, 0 | 429 | 503) || (self.status == 409 && self.word == "in_progress")
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "+{:>7.3}s c{:<3} ", self.at.as_secs_f64(), self.caller)?;
        match self.node {
            Some(n) => write!(f, "n{n} ")?,
            None => write!(f, "   ")?,
        }
        write!(f, "{:?}", self.call)?;
        if matches!(
            self.call,
            Call::Claim
                | Call::Complete
                | Call::Release
                | Call::Heartbeat
                | Call::Find
                | Call::Charge
        ) {
            write!(f, " {} {}", self.status, self.word)?;
        }
        if self.variant != 0 {
            write!(f, " request#{}", self.variant)?;
        }
        if let Some(a) = self.attempt {
            write!(f, " attempt={a}")?;
        }
        let clock = |t: DateTime<Utc>| t.format("%H:%M:%S%.3f").to_string();
        if let Some(t) = self.granted_at {
            write!(f, " granted {}", clock(t))?;
        }
        if let Some(t) = self.lease_end {
            write!(f, " lease until {}", clock(t))?;
        }
        if let Some(t) = self.completed_at {
            write!(f, " completed {}", clock(t))?;
        }
        if !self.note.is_empty() {
            write!(f, " {}", self.note)?;
        }
        if self.late {
            write!(f, " LATE (answered after the lease ended)")?;
        }
        if let Some(o) = &self.outcome {
            write!(f, " outcome.body={}", o["body"])?;
        }
        Ok(())
    }
}

/// Every key's entries, in the order they were recorded.
pub struct Journal {
    started: Instant,
    keys: Mutex<HashMap<String, Vec<Entry>>>,
}

impl Default for Journal {
    fn default() -> Self {
        Self {
            started: Instant::now(),
            keys: Mutex::default(),
        }
    }
}

impl Journal {
    pub fn record(&self, key: &str, mut entry: Entry) {
        entry.at = self.started.elapsed();
        self.keys
            .lock()
            .expect("journal")
            .entry(key.to_owned())
            .or_default()
            .push(entry);
    }

    /// A copy of every key's entries.
    pub fn snapshot(&self) -> HashMap<String, Vec<Entry>> {
        self.keys.lock().expect("journal").clone()
    }
}
