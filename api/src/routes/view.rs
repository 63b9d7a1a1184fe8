//! JSON views of records and claim answers, and their schemas.
//!
//! Outcomes are spliced in as the exact text the owner stored, so a replay is
//! byte-for-byte what was completed (re-serialising through a JSON value would
//! change number spellings such as `1.50`). The `outcome` member is therefore
//! no field of these types; [`Outcome`] documents it, and
//! [`SplicedOutcome`] adds it to the schemas of the views that carry it.

use chrono::{DateTime, Utc};
use serde::Serialize;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use utoipa::openapi::schema::Schema;
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

use super::openapi::schemas::{
    ClaimedWord, CompletedWord, EffectId, Fingerprint, OwnerToken, RecoveringWord, ReleasedWord,
    Timestamp,
};

use crate::domain::{RecordState, ScopedKey};
use crate::engine::Engine;
use crate::store::KeyRecord;

pub use crate::domain::time::rfc3339;

fn opt_rfc3339(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(rfc3339)
}

/// A key's record. It never contains the owner token.
#[derive(Serialize, ToSchema)]
#[schema(as = Record)]
pub struct RecordView<'a> {
    operation: &'a str,
    /// The decoded key.
    key: &'a str,
    #[schema(value_type = RecordStateWord, inline)]
    state: &'static str,
    #[schema(value_type = Fingerprint)]
    fingerprint: String,
    #[schema(minimum = 1)]
    attempt: i32,
    #[schema(value_type = EffectId)]
    effect_id: &'a str,
    /// `hot` while the outcome is in the database, `archived` once the
    /// tiering worker moved it to the archive (after the class's
    /// `hot_retention`). Nothing else changes for the caller: an archived key
    /// replays the same bytes.
    #[schema(value_type = Tier, inline)]
    tier: &'static str,
    /// The first claim; the replay window counts from here.
    #[schema(value_type = Timestamp)]
    created_at: String,
    /// When the current attempt claimed or took over.
    #[schema(value_type = Timestamp)]
    claimed_at: String,
    /// `in_progress` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Timestamp, required = false)]
    lease_expires_at: Option<String>,
    /// `completed` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Timestamp, required = false)]
    completed_at: Option<String>,
    /// Why the key was quarantined (kept after a resolve with an outcome).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, required = false)]
    quarantine_reason: Option<&'a str>,
    /// When the replay protection of this key ends.
    #[schema(value_type = Timestamp)]
    expires_at: String,
    /// Each recorded step by name.
    steps: BTreeMap<String, StepView>,
    /// The audit trail, oldest first; the first event and the latest 49.
    #[schema(value_type = Vec<HistoryEvent>)]
    history: Value,
}

/// A record's `state`.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // a schema: the state's word comes from the store
pub enum RecordStateWord {
    InProgress,
    Completed,
    Quarantined,
}

/// Where a record's outcome is kept.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum Tier {
    Hot,
    Archived,
}

/// One event of a record's audit trail (written by the store's SQL).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct HistoryEvent {
    #[schema(inline)]
    event: HistoryEventKind,
    /// The attempt the event belongs to (every event but `tiered`).
    attempt: Option<i32>,
    #[schema(value_type = Timestamp)]
    at: String,
    /// `true` on `claimed`, when the key was reused after its window.
    renewed: Option<bool>,
    step: Option<String>,
    reason: Option<String>,
    /// `owner`, `lease watch`, or for resolve `admin`/`owner` with `:` and
    /// the token's `sub`.
    by: Option<String>,
    #[schema(inline)]
    resolution: Option<Resolution>,
    /// On `tiered`: the archive segment that now holds the outcome.
    segment: Option<String>,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
enum HistoryEventKind {
    Claimed,
    TakenOver,
    Step,
    Completed,
    Quarantined,
    Resolved,
    Tiered,
}

#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
enum Resolution {
    Completed,
    Released,
}

/// One finished step of a multi-step operation.
#[derive(Serialize, ToSchema)]
#[schema(as = Step)]
pub struct StepView {
    /// The step's own effect id, `<effect_id>.<step>`.
    pub effect_id: String,
    pub provider_ref: String,
    #[schema(value_type = Timestamp)]
    pub done_at: String,
}

/// A step as the record's `steps` column keeps it.
#[derive(Deserialize)]
struct StoredStep {
    provider_ref: String,
    done_at: String,
}

/// The record's steps with each step's own effect id.
pub fn steps(engine: &Engine, k: &ScopedKey, steps_json: &str) -> BTreeMap<String, StepView> {
    let stored: BTreeMap<String, StoredStep> =
        serde_json::from_str(steps_json).unwrap_or_else(|e| {
            tracing::error!(error = %e, "unreadable steps column");
            BTreeMap::new()
        });
    stored
        .into_iter()
        .map(|(name, step)| {
            let view = StepView {
                effect_id: engine.step_effect_id(k, &name),
                provider_ref: step.provider_ref,
                done_at: step.done_at,
            };
            (name, view)
        })
        .collect()
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

/// The answer to a claim that granted ownership of a new key.
#[derive(Serialize, ToSchema)]
#[schema(as = Claimed)]
pub struct ClaimedView<'a> {
    #[schema(inline)]
    pub status: ClaimedWord,
    #[schema(value_type = OwnerToken)]
    pub owner_token: &'a str,
    /// Always 1.
    #[schema(minimum = 1, maximum = 1)]
    pub attempt: i32,
    #[schema(value_type = Timestamp)]
    pub lease_expires_at: String,
    /// When the replay protection of this key ends.
    #[schema(value_type = Timestamp)]
    pub expires_at: String,
    #[schema(value_type = EffectId)]
    pub effect_id: &'a str,
}

/// A takeover. The record stays `in_progress` with the new attempt. Ask the
/// provider about the effect id (and the steps' effect ids) before acting
/// again.
#[derive(Serialize, ToSchema)]
#[schema(as = Recovering)]
pub struct RecoveringView<'a> {
    #[schema(inline)]
    pub status: RecoveringWord,
    #[schema(value_type = OwnerToken)]
    pub owner_token: &'a str,
    #[schema(minimum = 2)]
    pub attempt: i32,
    #[schema(value_type = Timestamp)]
    pub lease_expires_at: String,
    #[schema(value_type = Timestamp)]
    pub expires_at: String,
    #[schema(value_type = EffectId)]
    pub effect_id: &'a str,
    pub previous_attempt: PreviousAttempt,
    /// The steps already done, each by name.
    pub steps: BTreeMap<String, StepView>,
}

/// The attempt a takeover replaced.
#[derive(Serialize, ToSchema)]
pub struct PreviousAttempt {
    pub attempt: i32,
    #[schema(value_type = Timestamp)]
    pub claimed_at: String,
    #[schema(value_type = Timestamp)]
    pub lease_expires_at: String,
}

/// The stored outcome of a completed key, exactly as it was stored.
#[derive(Serialize, ToSchema)]
#[schema(as = Replay)]
pub struct ReplayView<'a> {
    #[schema(inline)]
    pub status: CompletedWord,
    /// Always `true`.
    pub replayed: bool,
    pub attempt: i32,
    #[schema(value_type = EffectId)]
    pub effect_id: &'a str,
    #[schema(value_type = Timestamp)]
    pub completed_at: String,
    #[schema(value_type = Timestamp)]
    pub expires_at: String,
}

/// The answer to a release.
#[derive(Serialize, ToSchema)]
#[schema(as = Released)]
pub struct ReleasedView {
    #[schema(inline)]
    pub status: ReleasedWord,
}

/// The answers a claim gives with 200: `recovering`, the previous owner's
/// lease ran out and the caller took over (check the provider with the
/// effect id before acting again), or `completed`, the replay of the stored
/// outcome.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // a schema: the handler renders each variant
pub enum ClaimOk<'a> {
    Recovering(RecoveringView<'a>),
    Replay(ReplayView<'a>),
}

/// The answers a resolve gives with 200: the record (resolved with an
/// outcome) or `{"status": "released"}`.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code, clippy::large_enum_variant)] // a schema, never built
pub enum Resolved<'a> {
    Record(RecordView<'a>),
    Released(ReleasedView),
}

/// Adds the spliced-in `outcome` member (see [`with_outcome`]) to the
/// schemas of the views that carry it: a replay always, a record once it is
/// completed.
pub struct SplicedOutcome;

impl utoipa::Modify for SplicedOutcome {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let schemas = &mut doc.components.get_or_insert_with(Default::default).schemas;
        for (name, required, description) in [
            ("Replay", true, None),
            (
                "Record",
                false,
                Some("`completed` only, exactly as stored."),
            ),
        ] {
            let Some(RefOr::T(Schema::Object(object))) = schemas.get_mut(name) else {
                unreachable!("{name} is an object schema");
            };
            let outcome = utoipa::openapi::schema::AllOfBuilder::new()
                .item(utoipa::openapi::Ref::from_schema_name("Outcome"))
                .description(description);
            object.properties.insert("outcome".into(), outcome.into());
            if required {
                object.required.push("outcome".into());
            }
        }
    }
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
