//! `/v1/keys/{operation}/{key}/…`: claim, the owner's calls, lookup.

use actix_web::body::MessageBody;
use actix_web::http::StatusCode;
use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::body::{read_json, CLAIM_LIMIT, OUTCOME_LIMIT, SMALL_LIMIT};
use super::caller::{KeyCaller, Owner, Reader};
use std::collections::BTreeMap;

use super::view::{
    self, rfc3339, with_outcome, OwnedView, PreviousAttempt, RecordView, ReplayView, StepView,
};
use super::AppState;
use crate::domain::fingerprint::FingerprintError;
use crate::domain::outcome::OutcomeError;
use crate::domain::policy::LeaseOutOfRange;
use crate::domain::usage::UsageEvent;
use crate::domain::{Fingerprint, Outcome, ScopedKey};
use crate::engine::{ClaimAnswer, ClaimRequest, OwnerCall};
use crate::error::{ApiError, ErrorCode};
use crate::store::KeyRecord;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimBody {
    request: Option<Box<RawValue>>,
    fingerprint: Option<String>,
    wait_ms: Option<u64>,
    lease_ms: Option<u64>,
}

pub async fn claim(
    state: web::Data<AppState>,
    KeyCaller { key: k, .. }: KeyCaller<Owner>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let started = std::time::Instant::now();
    let answer = answer_claim(&state, k, payload).await;
    let word = match &answer {
        Ok((word, _)) => word,
        Err(e) => e.code().as_str(),
    };
    state.engine.metrics.claim_answered(word, started.elapsed());
    answer.map(|(_, response)| response)
}

/// The claim's answer and its `status` word.
async fn answer_claim(
    state: &AppState,
    k: ScopedKey,
    payload: web::Payload,
) -> Result<(&'static str, HttpResponse), ApiError> {
    let body: ClaimBody = read_json(payload, CLAIM_LIMIT).await?;
    let policy = state.engine.policy(&k.tenant, &k.operation).await?;
    let rules_digest = policy.fingerprint.digest();
    let fingerprint = match (&body.request, &body.fingerprint) {
        (Some(request), None) => {
            (state.engine.fingerprints).of(request.get(), &policy.fingerprint, rules_digest)
        }
        (None, Some(hex)) => Fingerprint::parse_hex(hex),
        _ => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidBody,
                "send exactly one of `request` and `fingerprint`",
            ))
        }
    }
    .map_err(fingerprint_error)?;
    let request = ClaimRequest {
        fingerprint,
        rules_digest,
        request_json: body.request.as_ref().map(|r| r.get().to_owned()),
        lease: policy.lease_for(body.lease_ms).map_err(lease_error)?,
        wait_ms: body.wait_ms,
    };
    let started = std::time::Instant::now();
    let answer = state.engine.claim(&k, &policy, &request).await;
    state.usage.claim(&k, &answer, started.elapsed());
    let answer = answer?;
    let effect_id = || state.engine.effect_id(&k);
    Ok(match answer {
        ClaimAnswer::Claimed { record, token } => {
            let effect_id = effect_id();
            let view = owned("claimed", &record, token.expose(), &effect_id, None, None);
            (
                "claimed",
                json(StatusCode::CREATED, with_outcome(&view, None)),
            )
        }
        ClaimAnswer::Recovering {
            record,
            token,
            previous,
        } => {
            let previous = PreviousAttempt {
                attempt: previous.attempt,
                claimed_at: rfc3339(previous.claimed_at),
                lease_expires_at: rfc3339(previous.lease_expires_at),
            };
            let steps = view::steps(&state.engine, &k, &record.steps);
            let effect_id = effect_id();
            let view = owned(
                "recovering",
                &record,
                token.expose(),
                &effect_id,
                Some(previous),
                Some(steps),
            );
            (
                "recovering",
                json(StatusCode::OK, with_outcome(&view, None)),
            )
        }
        ClaimAnswer::Completed { replay } => {
            // Rendered once per cached copy (see `cache::Rendered`).
            let body = replay.rendered.get_or_init(|| {
                let view = ReplayView {
                    status: "completed",
                    replayed: true,
                    attempt: replay.attempt,
                    effect_id: &effect_id(),
                    completed_at: Some(rfc3339(replay.completed_at)),
                    expires_at: rfc3339(replay.expires_at),
                };
                with_outcome(&view, Some(&replay.outcome)).into()
            });
            ("completed", json(StatusCode::OK, body))
        }
    })
}

fn owned<'a>(
    status: &'static str,
    r: &KeyRecord,
    token: &'a str,
    effect_id: &'a str,
    previous_attempt: Option<PreviousAttempt>,
    steps: Option<BTreeMap<String, StepView>>,
) -> OwnedView<'a> {
    OwnedView {
        status,
        owner_token: token,
        attempt: r.attempt,
        lease_expires_at: rfc3339(r.lease_expires_at),
        expires_at: rfc3339(r.protected_until()),
        effect_id,
        previous_attempt,
        steps,
    }
}

fn lease_error(e: LeaseOutOfRange) -> ApiError {
    ApiError::bad_request(
        ErrorCode::InvalidLease,
        format!("lease_ms must be 1000-{}", e.max_ms),
    )
}

fn fingerprint_error(e: FingerprintError) -> ApiError {
    match e {
        FingerprintError::InvalidHex => ApiError::bad_request(
            ErrorCode::InvalidFingerprint,
            "fingerprint must be 64 lowercase hex characters",
        ),
        FingerprintError::NumberOutOfRange(n) => ApiError::bad_request(
            ErrorCode::NumberOutOfRange,
            format!("the number {n} cannot be represented exactly as an IEEE double; send it as a string"),
        ),
        other => ApiError::bad_request(ErrorCode::InvalidRequest, other.to_string()),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    owner_token: String,
    outcome: Box<RawValue>,
}

pub async fn complete(
    state: web::Data<AppState>,
    KeyCaller { key: k, .. }: KeyCaller<Owner>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body: CompleteBody = read_json(payload, OUTCOME_LIMIT).await?;
    let policy = state.engine.policy(&k.tenant, &k.operation).await?;
    let outcome = Outcome::parse(&body.outcome, policy.max_outcome_bytes).map_err(outcome_error)?;
    let call = OwnerCall {
        token: &body.owner_token,
    };
    let record = state.engine.complete(&k, &call, &outcome).await?;
    Ok(record_response(&state, &k, &record))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeartbeatBody {
    owner_token: String,
    lease_ms: Option<u64>,
}

pub async fn heartbeat(
    state: web::Data<AppState>,
    KeyCaller { key: k, .. }: KeyCaller<Owner>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body: HeartbeatBody = read_json(payload, SMALL_LIMIT).await?;
    let policy = state.engine.policy(&k.tenant, &k.operation).await?;
    let lease = body
        .lease_ms
        .map(|ms| policy.lease_for(Some(ms)))
        .transpose()
        .map_err(lease_error)?;
    let call = OwnerCall {
        token: &body.owner_token,
    };
    let record = state.engine.heartbeat(&k, &call, lease).await?;
    Ok(record_response(&state, &k, &record))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReleaseBody {
    owner_token: String,
}

pub async fn release(
    state: web::Data<AppState>,
    KeyCaller { key: k, .. }: KeyCaller<Owner>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body: ReleaseBody = read_json(payload, SMALL_LIMIT).await?;
    let call = OwnerCall {
        token: &body.owner_token,
    };
    state.engine.release(&k, &call).await?;
    state.usage.count(&k, UsageEvent::Released);
    Ok(released())
}

pub(super) fn released() -> HttpResponse {
    json(StatusCode::OK, r#"{"status":"released"}"#.to_owned())
}

pub(super) fn outcome_error(e: OutcomeError) -> ApiError {
    match e {
        OutcomeError::TooLarge { limit } => ApiError::TooLarge {
            code: ErrorCode::OutcomeTooLarge,
            limit,
        },
        OutcomeError::Invalid(why) => ApiError::bad_request(ErrorCode::InvalidOutcome, why),
    }
}

pub async fn lookup(
    state: web::Data<AppState>,
    KeyCaller { key: k, .. }: KeyCaller<Reader>,
) -> Result<HttpResponse, ApiError> {
    let record = state.engine.lookup(&k).await?;
    Ok(record_response(&state, &k, &record))
}

pub(super) fn record_response(state: &AppState, k: &ScopedKey, record: &KeyRecord) -> HttpResponse {
    let effect_id = state.engine.effect_id(k);
    let view = RecordView::new(k, record, &state.engine, &effect_id);
    json(
        StatusCode::OK,
        with_outcome(&view, record.outcome.as_deref()),
    )
}

fn json(status: StatusCode, body: impl MessageBody + 'static) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("application/json")
        .body(body)
}
