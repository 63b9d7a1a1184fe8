//! JSON views of records and claim answers.
//!
//! Outcomes are spliced in as the exact text the owner stored, so a replay is
//! byte-for-byte what was completed (re-serialising through a JSON value would
//! change number spellings such as `1.50`).

use chrono::{DateTime, Utc};
use serde::Serialize;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::domain::{RecordState, ScopedKey};
use crate::engine::Engine;
use crate::store::KeyRecord;

pub use crate::domain::time::rfc3339;

fn opt_rfc3339(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(rfc3339)
}

/// A record as lookup (and every owner call) shows it.
#[derive(Serialize)]
pub struct RecordView<'a> {
    operation: &'a str,
    key: &'a str,
    state: &'static str,
    fingerprint: String,
    attempt: i32,
    effect_id: &'a str,
    tier: &'static str,
    created_at: String,
    claimed_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quarantine_reason: Option<&'a str>,
    expires_at: String,
    steps: BTreeMap<String, StepView>,
    history: Value,
}

/// One finished step of a multi-step operation.
#[derive(Serialize, Deserialize)]
pub struct StepView {
    #[serde(default, skip_deserializing)]
    pub effect_id: String,
    pub provider_ref: String,
    pub done_at: String,
}

/// The record's steps with each step's own effect id.
pub fn steps(engine: &Engine, k: &ScopedKey, steps_json: &str) -> BTreeMap<String, StepView> {
    let mut steps: BTreeMap<String, StepView> =
        serde_json::from_str(steps_json).unwrap_or_else(|e| {
            tracing::error!(error = %e, "unreadable steps column");
            BTreeMap::new()
        });
    for (name, step) in &mut steps {
        step.effect_id = engine.step_effect_id(k, name);
    }
    steps
}

impl<'a> RecordView<'a> {
    pub fn new(k: &'a ScopedKey, r: &'a KeyRecord, engine: &Engine, effect_id: &'a str) -> Self {
        Self {
            operation: k.operation.as_str(),
            key: k.key.as_str(),
            state: r.state.as_str(),
            fingerprint: r.fingerprint.to_hex(),
            attempt: r.attempt,
            effect_id,
            tier: if r.routing.is_some() {
                "archived"
            } else {
                "hot"
            },
            created_at: rfc3339(r.created_at),
            claimed_at: rfc3339(r.claimed_at),
            lease_expires_at: (r.state == RecordState::InProgress)
                .then(|| rfc3339(r.lease_expires_at)),
            completed_at: opt_rfc3339(r.completed_at),
            quarantine_reason: r.quarantine_reason.as_deref(),
            expires_at: rfc3339(r.protected_until()),
            steps: steps(engine, k, &r.steps),
            history: serde_json::from_str(&r.history).unwrap_or(Value::Null),
        }
    }
}

/// The answer to a claim that granted ownership (`claimed` or `recovering`).
#[derive(Serialize)]
pub struct OwnedView<'a> {
    pub status: &'static str,
    pub owner_token: &'a str,
    pub attempt: i32,
    pub lease_expires_at: String,
    pub expires_at: String,
    pub effect_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_attempt: Option<PreviousAttempt>,
    /// Steps already done (recovering answers only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steps: Option<BTreeMap<String, StepView>>,
}

#[derive(Serialize)]
pub struct PreviousAttempt {
    pub attempt: i32,
    pub claimed_at: String,
    pub lease_expires_at: String,
}

/// The answer to a claim of a completed key.
#[derive(Serialize)]
pub struct ReplayView<'a> {
    pub status: &'static str,
    pub replayed: bool,
    pub attempt: i32,
    pub effect_id: &'a str,
    pub completed_at: Option<String>,
    pub expires_at: String,
}

/// Serialises `view` and appends the stored outcome text, if any, as its
/// `outcome` member.
pub fn with_outcome(view: &impl Serialize, outcome: Option<&str>) -> String {
    let mut json = serde_json::to_string(view).expect("views serialise");
    if let Some(outcome) = outcome {
        json.pop(); // the object's closing brace
        json.push_str(",\"outcome\":");
        json.push_str(outcome);
        json.push('}');
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outcome_is_spliced_in_verbatim() {
        #[derive(Serialize)]
        struct V {
            a: u8,
        }
        let json = with_outcome(&V { a: 1 }, Some(r#"{"body": 1.50 }"#));
        assert_eq!(json, r#"{"a":1,"outcome":{"body": 1.50 }}"#);
        assert_eq!(with_outcome(&V { a: 1 }, None), r#"{"a":1}"#);
    }
}
