//! The judge of a round: "no effect twice", read from the provider's
//! ledger, the clients' journal and a final look at every key.
//!
//! For each key it asserts that
//! - the provider charged its effect id exactly once;
//! - idemkey answered `claimed` (201) at most once (nobody releases in
//!   these rounds and the window is an hour, so a second 201 would mean the
//!   key looked new again);
//! - the key ended `completed`, a final replay returns the outcome lookup
//!   shows, and that outcome names the provider's single charge;
//! - every completion acknowledged with a 200 is that outcome (nothing
//!   acknowledged is lost or replaced), and so is every replay a client saw;
//! - every caller finished, and no answer fell outside the protocol.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::clients::{request_of, Workload};
use super::fleet::Provider;
use super::journal::{Call, Entry};

/// The figures of a round, or of all rounds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    pub rounds: u64,
    pub faults: u64,
    pub operations: u64,
    pub claimed: u64,
    pub recovering: u64,
    /// `recovering` answers whose previous attempt had charged already
    /// (found at the provider, completed without charging).
    pub takeovers: u64,
    pub replays: u64,
    pub retries: u64,
    /// Claims and completions cut off in flight (reset or timed out after
    /// the request was sent, not refused): the moments a fault hit a call
    /// the server may already have acted on.
    pub unanswered: u64,
    pub deaths: u64,
    pub stalls: u64,
    pub abandoned: u64,
    pub lease_lost: u64,
    pub charges: u64,
    pub violations: u64,
}

impl std::ops::AddAssign for Figures {
    fn add_assign(&mut self, o: Self) {
        self.rounds += o.rounds;
        self.faults += o.faults;
        self.operations += o.operations;
        self.claimed += o.claimed;
        self.recovering += o.recovering;
        self.takeovers += o.takeovers;
        self.replays += o.replays;
        self.retries += o.retries;
        self.unanswered += o.unanswered;
        self.deaths += o.deaths;
        self.stalls += o.stalls;
        self.abandoned += o.abandoned;
        self.lease_lost += o.lease_lost;
        self.charges += o.charges;
        self.violations += o.violations;
    }
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rounds {} · faults {} · operations {} · claimed {} · recovering {} · \
             takeovers {} · replays {} · retries {} (unanswered {}) · deaths {} · \
             stalls {} · abandoned {} · lease_lost {} · charges {} · violations {}",
            self.rounds,
            self.faults,
            self.operations,
            self.claimed,
            self.recovering,
            self.takeovers,
            self.replays,
            self.retries,
            self.unanswered,
            self.deaths,
            self.stalls,
            self.abandoned,
            self.lease_lost,
            self.charges,
            self.violations
        )
    }
}

/// One broken promise, with the key's whole story.
#[derive(Debug, Clone)]
pub struct Violation {
    pub key: String,
    pub what: String,
    pub story: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "key {}: {}", self.key, self.what)?;
        for line in &self.story {
            writeln!(f, "    {line}")?;
        }
        Ok(())
    }
}

/// How a key looks at the end: its record and a replay of its claim.
struct FinalLook {
    record: Value,
    replay: Value,
}

/// Judges a finished round: every key of `entries` against the provider's
/// ledger and a final look through the servers.
pub async fn judge(
    w: &Workload,
    provider: &Provider,
    entries: &HashMap<String, Vec<Entry>>,
) -> (Figures, Vec<Violation>) {
    let ledger = provider.charges_by_reference().await;
    let mut figures = count(entries);
    let mut violations = Vec::new();
    let mut keys: Vec<&String> = entries.keys().collect();
    keys.sort();
    for key in keys {
        let story = &entries[key];
        let look = final_look(w, key).await;
        let effect_id = look.record["effect_id"].as_str().unwrap_or_default();
        let charges = ledger.get(effect_id).copied().unwrap_or(0);
        figures.charges += charges;
        let provider_charge = provider.find(effect_id).await;
        let mut broken = |what: String| {
            violations.push(Violation {
                key: key.clone(),
                what,
                story: story.iter().map(Entry::to_string).collect(),
            })
        };
        for problem in problems(story, &look, charges, provider_charge) {
            broken(problem);
        }
    }
    figures.violations = violations.len() as u64;
    (figures, violations)
}

/// Everything wrong with one key.
fn problems(
    story: &[Entry],
    look: &FinalLook,
    charges: u64,
    provider_charge: Option<String>,
) -> Vec<String> {
    let mut found = Vec::new();
    if charges != 1 {
        let late = if story.iter().any(|e| e.late) {
            " (a charge was answered after its owner's lease had ended: the client's margin was too small)"
        } else {
            ""
        };
        found.push(format!(
            "the provider charged its effect id {charges} times{late}"
        ));
    }
    let claimed = story.iter().filter(|e| is(e, Call::Claim, 201)).count();
    if claimed > 1 {
        found.push(format!("answered `claimed` (201) {claimed} times"));
    }
    let outcome = &look.record["outcome"];
    if look.record["state"] != "completed" || outcome.is_null() {
        found.push(format!("did not end completed: {}", look.record));
        return found;
    }
    if look.replay["status"] != "completed" || look.replay["outcome"] != *outcome {
        found.push(format!(
            "the final replay {} differs from the record's outcome {outcome}",
            look.replay
        ));
    }
    let named = outcome["body"]["charge"].as_str().map(str::to_owned);
    if named.is_none() || named != provider_charge {
        found.push(format!(
            "the outcome names charge {named:?}, the provider's charge is {provider_charge:?}"
        ));
    }
    let sent = story
        .iter()
        .any(|e| e.call == Call::Complete && e.outcome.as_ref() == Some(outcome));
    if !sent {
        found.push(format!("no completer sent the stored outcome {outcome}"));
    }
    for e in story {
        let seen = e.outcome.as_ref();
        if is(e, Call::Complete, 200) && seen != Some(outcome) {
            found.push(format!("an acknowledged completion was lost: {e}"));
        }
        if is(e, Call::Claim, 200) && e.word == "completed" && seen != Some(outcome) {
            found.push(format!("a replay differs from the final outcome: {e}"));
        }
        let expected = e.is_retryable()
            || matches!(
                (e.call, e.status, e.word.as_str()),
                (Call::Claim, 201 | 200, _)
                    | (Call::Complete, 200, "completed")
                    | (Call::Complete, 409, "lease_lost" | "already_completed")
                    | (
                        Call::Find | Call::Charge | Call::Died | Call::Stalled | Call::Abandoned,
                        _,
                        _
                    )
            );
        if !expected {
            found.push(format!("an answer outside the protocol: {e}"));
        }
    }
    if story.iter().any(|e| e.call == Call::GaveUp) {
        found.push("a caller never finished".into());
    }
    found
}

fn is(e: &Entry, call: Call, status: u16) -> bool {
    e.call == call && e.status == status
}

fn count(entries: &HashMap<String, Vec<Entry>>) -> Figures {
    let mut f = Figures {
        rounds: 1,
        operations: entries.len() as u64,
        ..Figures::default()
    };
    for e in entries.values().flatten() {
        match (e.call, e.status, e.word.as_str()) {
            (Call::Claim, 201, _) => f.claimed += 1,
            (Call::Claim, 200, "recovering") => f.recovering += 1,
            (Call::Claim, 200, "completed") => f.replays += 1,
            (Call::Find, _, "found") => f.takeovers += 1,
            (Call::Died, _, _) => f.deaths += 1,
            (Call::Stalled, _, _) => f.stalls += 1,
            (Call::Abandoned, _, _) => f.abandoned += 1,
            (Call::Complete, 409, "lease_lost") => f.lease_lost += 1,
            (Call::Claim | Call::Complete, 0, word) if word != "connect_failed" => {
                f.retries += 1;
                f.unanswered += 1;
            }
            _ if e.is_retryable() => f.retries += 1,
            _ => {}
        }
    }
    f
}

/// Looks `key` up and replays its claim, retrying answers that are not an
/// answer yet (503, no answer) for up to 30 s.
async fn final_look(w: &Workload, key: &str) -> FinalLook {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, base) = w.addresses.pick();
        let url = format!("{base}/v1/keys/{}/{key}", w.operation);
        let record = get_json(w.http.get(&url).bearer_auth(&w.token)).await;
        let body = json!({ "request": request_of(key) });
        let claim = w.http.post(format!("{url}/claim")).bearer_auth(&w.token);
        let replay = get_json(claim.json(&body)).await;
        if let (Some(record), Some(replay)) = (record, replay) {
            return FinalLook { record, replay };
        }
        assert!(
            Instant::now() < deadline,
            "key {key} could not be looked up within 30 s after the round"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The JSON of an answer, or None for a 503 or no answer.
async fn get_json(request: reqwest::RequestBuilder) -> Option<Value> {
    let response = request.send().await.ok()?;
    if response.status() == 503 {
        return None;
    }
    response.json().await.ok()
}
