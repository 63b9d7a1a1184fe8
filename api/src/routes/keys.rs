//! `/v1/keys/{operation}/{key}/…`: the owner's calls and lookup (the claim
//! is in claim.rs).

use actix_web::body::MessageBody;
use actix_web::http::StatusCode;
use actix_web::{get, post, web, HttpResponse};
use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::body::{read_json, OUTCOME_LIMIT, SMALL_LIMIT};
use super::caller::{role_names, KeyCaller, KeyPath, Owner, Reader};
use super::claim::lease_error;
use super::openapi::schemas::OwnerToken;
use super::view::{with_outcome, RecordView, ReleasedView};
use super::AppState;
use crate::domain::outcome::OutcomeError;
use crate::domain::usage::UsageEvent;
use crate::domain::{Outcome, ScopedKey};
use crate::engine::OwnerCall;
use crate::error::{ApiError, ErrorCode};
use crate::store::KeyRecord;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CompleteRequest)]
pub struct CompleteBody {
    #[schema(value_type = OwnerToken)]
    owner_token: String,
    #[schema(value_type = crate::domain::outcome::Shape)]
    outcome: Box<RawValue>,
}

crate::problems!(
    /// What the owner's calls without an outcome can refuse with.
    OwnerProblems: InvalidOperation, InvalidKey, InvalidJson, InvalidBody, Unauthorized,
    Forbidden, NotFound, LeaseLost, AlreadyCompleted, Quarantined, PayloadTooLarge, RateLimited,
    Unavailable
);

crate::problems!(
    /// What complete can refuse with.
    CompleteProblems: InvalidOperation, InvalidKey, InvalidJson, InvalidBody, InvalidOutcome,
    Unauthorized, Forbidden, NotFound, LeaseLost, AlreadyCompleted, Quarantined,
    PayloadTooLarge, OutcomeTooLarge, RateLimited, Unavailable
);

crate::problems!(
    /// What a heartbeat can refuse with.
    HeartbeatProblems: InvalidOperation, InvalidKey, InvalidJson, InvalidBody, InvalidLease,
    Unauthorized, Forbidden, NotFound, LeaseLost, AlreadyCompleted, Quarantined,
    PayloadTooLarge, RateLimited, Unavailable
);

/// The owner stores the final outcome
///
/// Roles: `client` (or `admin`), with the current attempt's `owner_token`.
///
/// The outcome is stored and replayed as the exact text sent. A repeat by
/// the same token with an equal outcome (equal after RFC 8785
/// canonicalisation) answers 200 again; a different outcome is 409
/// `already_completed`. The stored outcome never changes. An owner whose
/// lease ran out but was not taken over may still complete. The body may
/// be up to 8 MiB + 64 KiB (413 `payload_too_large`); the outcome itself at
/// most the class's `max_outcome_bytes` (413 `outcome_too_large`; the key
/// stays in progress).
#[utoipa::path(
    tag = "keys",
    operation_id = "complete",
    params(KeyPath),
    request_body(content = CompleteBody, example = json!({
        "owner_token": "bAVmFf3kHEhstTFBg2VZnWx7HRA5TpZHRWF3u2Klv9E",
        "outcome": {
            "status_code": 201,
            "headers": {"Location": "/charges/ch_1"},
            "body": {"charge": "ch_1"},
            "resource_id": "ch_1"
        }
    })),
    responses(
        (status = 200, description = "The record, now `completed`, with its `outcome`.", body = RecordView),
        CompleteProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Owner>()))),
)]
#[post("/complete")]
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

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = HeartbeatRequest)]
pub struct HeartbeatBody {
    #[schema(value_type = OwnerToken)]
    owner_token: String,
    /// The new lease, 1000 up to the class's `max_lease`. Default the lease
    /// this attempt claimed with.
    #[schema(minimum = 1000)]
    lease_ms: Option<u64>,
}

/// The owner extends its lease
///
/// Roles: `client` (or `admin`), with the current attempt's `owner_token`.
/// The lease is set to end at now + `lease_ms`, or, without it, now + the
/// lease this attempt got when it claimed. It never extends the replay
/// window. Body at most 64 KiB. An `invalid_lease` leaves the lease as it
/// was.
#[utoipa::path(
    tag = "keys",
    operation_id = "heartbeat",
    params(KeyPath),
    request_body = HeartbeatBody,
    responses(
        (status = 200, description = "The record with its new `lease_expires_at`.", body = RecordView),
        HeartbeatProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Owner>()))),
)]
#[post("/heartbeat")]
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

/// The owner's token, and nothing else.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = OwnerRequest)]
pub struct ReleaseBody {
    #[schema(value_type = OwnerToken)]
    owner_token: String,
}

/// The owner gives the key back (no effect happened)
///
/// Roles: `client` (or `admin`), with the current attempt's `owner_token`.
/// The record is deleted; the next claim, with any request, starts at
/// attempt 1. Release only when you know no effect happened. Body at most
/// 64 KiB.
#[utoipa::path(
    tag = "keys",
    operation_id = "release",
    params(KeyPath),
    request_body = ReleaseBody,
    responses(
        (status = 200, description = "The record was removed; the key may be claimed anew.", body = ReleasedView),
        OwnerProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Owner>()))),
)]
#[post("/release")]
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
    let view = ReleasedView {
        status: super::openapi::schemas::ReleasedWord::Word,
    };
    json(StatusCode::OK, with_outcome(&view, None))
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

crate::problems!(
    /// What a lookup can refuse with.
    LookupProblems: InvalidOperation, InvalidKey, Unauthorized, Forbidden, NotFound,
    RateLimited, Unavailable
);

/// Read a key's record
///
/// Roles: `client`, `viewer` or `admin`. A key that was released, never
/// existed, belongs to another tenant, or is gone (past its replay window)
/// is 404 `not_found`. An archived key whose outcome the archive cannot
/// give is 503 `unavailable`, never a 404.
#[utoipa::path(
    tag = "keys",
    operation_id = "lookup",
    params(KeyPath),
    responses(
        (status = 200, description = "The key's record.", body = RecordView),
        LookupProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Reader>()))),
)]
#[get("")]
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

pub(super) fn json(status: StatusCode, body: impl MessageBody + 'static) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("application/json")
        .body(body)
}
