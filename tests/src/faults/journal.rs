//! What the clients saw, per key and in order: every answer of idemkey and
//! of the provider, every simulated death. The checker reads it to judge a
//! round, and prints a key's whole story when something went wrong there.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

/// What a journal entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `POST …/claim`.
    Claim,
    /// `POST …/complete`; the entry keeps the outcome that was sent.
    Complete,
    /// `GET /charges/{effect_id}` at the provider after `recovering`.
    Find,
    /// `POST /charges` at the provider: the effect.
    Charge,
    /// The client dropped its owner token between effect and completion.
    Died,
    /// The owner paused past the end of its lease.
    Stalled,
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
            Call::Claim | Call::Complete | Call::Find | Call::Charge
        ) {
            write!(f, " {} {}", self.status, self.word)?;
        }
        if let Some(a) = self.attempt {
            write!(f, " attempt={a}")?;
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
