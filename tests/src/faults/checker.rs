//! The judge of a round: "no effect twice", read from the provider's
//! ledger, the clients' journal and, where the keys are still protected
//! when the round ends, a final look at every key.
//!
//! For each key it asserts that
//! - the provider charged its effect id exactly once, or — where a retry
//!   came after the key's protection had legitimately ended (a short
//!   window) and so started a new record — at most once per record;
//! - idemkey answered `claimed` (201) again only after the previous record
//!   was released, or after its protection ended (see `epochs`);
//! - the key ended `completed`: with a final look, a final replay returns
//!   the outcome lookup shows, that outcome names the provider's single
//!   charge and some completer sent it; without one (the keys are gone by
//!   then), every acknowledged completion and replay of one record carries
//!   the same outcome, naming the provider's charge;
//! - every completion acknowledged with a 200 is that outcome (nothing
//!   acknowledged is lost or replaced), and so is every replay a client saw;
//!   a replay always carries an outcome of the caller's own request;
//! - every caller finished, and no answer fell outside the protocol.

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::clients::{request_of, Workload};
use super::epochs::{self, Records};
use super::figures::count;
pub use super::figures::Figures;
use super::fleet::Provider;
use super::journal::{Call, Entry};

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
/// ledger, the class's replay `window`, and a final look through the
/// servers when `look` says the keys are still protected.
pub async fn judge(
    w: &Workload,
    provider: &Provider,
    entries: &HashMap<String, Vec<Entry>>,
    window: Duration,
    look: bool,
) -> (Figures, Vec<Violation>) {
    let ledger = provider.charges_by_reference().await;
    let mut figures = count(entries);
    let mut violations = Vec::new();
    let mut keys: Vec<&String> = entries.keys().collect();
    keys.sort();
    // `IDEMKEY_FAULT_STORIES=release-c` prints the stories of the keys
    // whose names start with it, violations or not.
    let shown = std::env::var("IDEMKEY_FAULT_STORIES").ok();
    for key in keys {
        let story = &entries[key];
        if shown.as_ref().is_some_and(|p| key.starts_with(p.as_str())) {
            println!("story of {key}:");
            story.iter().for_each(|e| println!("    {e}"));
        }
        let last = match look {
            true => Some(final_look(w, key).await),
            false => None,
        };
        let granted = story.iter().find_map(|e| e.effect_id.clone());
        let effect_id = last
            .as_ref()
            .and_then(|l| l.record["effect_id"].as_str().map(str::to_owned))
            .or(granted)
            .unwrap_or_default();
        let charges = ledger.get(&effect_id).copied().unwrap_or(0);
        figures.charges += charges;
        let provider_charge = provider.find(&effect_id).await;
        let records = epochs::judge(story, window);
        figures.reclaimed += records.reclaimed;
        figures.unjudged += records.unjudged;
        figures.late_completions += records.late_completions;
        figures.late_claims += records.late_claims;
        for what in problems(story, last.as_ref(), charges, provider_charge, records) {
            violations.push(Violation {
                key: key.clone(),
                what,
                story: story.iter().map(Entry::to_string).collect(),
            });
        }
    }
    figures.violations = violations.len() as u64;
    (figures, violations)
}

/// Everything wrong with one key.
fn problems(
    story: &[Entry],
    look: Option<&FinalLook>,
    charges: u64,
    provider_charge: Option<String>,
    records: Records,
) -> Vec<String> {
    let mut found = records.problems;
    let allowed = 1 + records.unjudged;
    if (records.unjudged == 0 && charges != 1) || charges == 0 || charges > allowed {
        let late = if story.iter().any(|e| e.late) {
            " (a charge was answered after its owner's lease had ended: the client's margin was too small)"
        } else {
            ""
        };
        found.push(format!(
            "the provider charged its effect id {charges} times{late} ({allowed} records)"
        ));
    }
    found.extend(answers_outside_the_protocol(story));
    if story.iter().any(|e| e.call == Call::GaveUp) {
        found.push("a caller never finished".into());
    }
    let single = (charges == 1).then_some(provider_charge).flatten();
    match look {
        Some(look) => found.extend(final_problems(story, look, single)),
        None => found.extend(journal_problems(story, single)),
    }
    found
}

/// Answers no client following the recipe should meet, and replays of
/// another request's outcome.
fn answers_outside_the_protocol(story: &[Entry]) -> Vec<String> {
    let mut found = Vec::new();
    let granted: Vec<u8> = story
        .iter()
        .filter(|g| g.call == Call::Claim && g.granted_at.is_some())
        .map(|g| g.variant)
        .collect();
    for e in story {
        let other_request_granted = granted.iter().any(|v| *v != e.variant);
        let expected = e.is_retryable()
            || matches!(
                (e.call, e.status, e.word.as_str()),
                (Call::Claim, 201 | 200, _)
                    | (Call::Complete, 200, "completed")
                    | (Call::Complete, 409, "lease_lost" | "already_completed")
                    | (Call::Release, 200, "released")
                    | (Call::Release, 404, "not_found")
                    | (Call::Release | Call::Heartbeat, 409, "lease_lost")
                    | (Call::Heartbeat, 200, "in_progress")
                    | (
                        Call::Find
                            | Call::Charge
                            | Call::Died
                            | Call::Stalled
                            | Call::Working
                            | Call::Abandoned,
                        _,
                        _
                    )
            )
            || (e.call == Call::Claim && e.word == "key_reused" && other_request_granted);
        if !expected {
            found.push(format!("an answer outside the protocol: {e}"));
        }
        let replayed = e.outcome.as_ref().map(|o| o["body"]["variant"].as_u64());
        if is(e, Call::Claim, 200)
            && e.word == "completed"
            && replayed != Some(Some(e.variant.into()))
        {
            found.push(format!("a replay carried another request's outcome: {e}"));
        }
    }
    found
}

/// With a final look: the record ended completed, its replay is its
/// outcome, naming the provider's charge, sent by a completer; every
/// acknowledged completion and replay is that outcome.
fn final_problems(story: &[Entry], look: &FinalLook, charge: Option<String>) -> Vec<String> {
    let mut found = Vec::new();
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
    if named.is_none() || (charge.is_some() && named != charge) {
        found.push(format!(
            "the outcome names charge {named:?}, the provider's charge is {charge:?}"
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
    }
    found
}

/// Without a final look: some outcome was acknowledged or replayed, one
/// per record (per `completed_at`), naming the provider's charge.
fn journal_problems(story: &[Entry], charge: Option<String>) -> Vec<String> {
    let mut found = Vec::new();
    let outcomes: Vec<&Entry> = story
        .iter()
        .filter(|e| {
            is(e, Call::Complete, 200) || (is(e, Call::Claim, 200) && e.word == "completed")
        })
        .collect();
    if outcomes.is_empty() {
        found.push("did not end completed: no completion acknowledged, no replay seen".into());
    }
    for e in &outcomes {
        let first = outcomes
            .iter()
            .find(|o| o.completed_at == e.completed_at)
            .expect("itself");
        if first.outcome != e.outcome {
            found.push(format!(
                "an acknowledged outcome or replay differs from another of the same record: {e}"
            ));
        }
        let named = e
            .outcome
            .as_ref()
            .and_then(|o| o["body"]["charge"].as_str());
        if charge.is_some() && named != charge.as_deref() {
            found.push(format!(
                "the outcome names charge {named:?}, the provider's charge is {charge:?}: {e}"
            ));
        }
    }
    found
}

fn is(e: &Entry, call: Call, status: u16) -> bool {
    e.call == call && e.status == status
}

/// Looks `key` up and replays its claim with the request its outcome
/// names, retrying answers that are not an answer yet (503, no answer) for
/// up to 30 s.
async fn final_look(w: &Workload, key: &str) -> FinalLook {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, base) = w.addresses.pick();
        let url = format!("{base}/v1/keys/{}/{key}", w.operation);
        let record = get_json(w.http.get(&url).bearer_auth(&w.token)).await;
        if let Some(record) = record {
            let variant = record["outcome"]["body"]["variant"].as_u64().unwrap_or(0) as u8;
            let body = json!({ "request": request_of(key, variant) });
            let claim = w.http.post(format!("{url}/claim")).bearer_auth(&w.token);
            if let Some(replay) = get_json(claim.json(&body)).await {
                return FinalLook { record, replay };
            }
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
