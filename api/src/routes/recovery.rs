//! `/v1/keys/{operation}/{key}/steps/{step}`, `/quarantine`, `/resolve`:
//! what a client needs when an outcome is ambiguous.

use actix_web::{post, put, web, HttpResponse};
use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::body::{read_json, OUTCOME_LIMIT, SMALL_LIMIT};
use super::caller::{self, role_names, KeyCaller, KeyPath, Owner};
use super::keys::{outcome_error, record_response, released};
use super::openapi::schemas::OwnerToken;
use super::view::{RecordView, Resolved};
use super::AppState;
use crate::auth::Role;
use crate::domain::usage::UsageEvent;
use crate::domain::{OperationName, Outcome};
use crate::engine::OwnerCall;
use crate::error::{ApiError, ErrorCode};
use crate::store::Resolver;

const REF_LIMIT: usize = 1024;

/// The step's segment of `…/steps/{step}` (the key's are the extractor's).
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct StepPath {
    /// The step's name; it follows the operation-name pattern.
    #[param(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    step: String,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = StepRequest)]
pub struct StepBody {
    #[schema(value_type = OwnerToken)]
    owner_token: String,
    /// 1–1024 bytes.
    #[schema(min_length = 1)]
    provider_ref: String,
}

crate::problems!(
    /// What recording a step can refuse with.
    StepProblems: InvalidOperation, InvalidKey, InvalidStep, InvalidJson, InvalidBody,
    Unauthorized, Forbidden, NotFound, LeaseLost, AlreadyCompleted, Quarantined, StepConflict,
    TooManySteps, PayloadTooLarge, RateLimited, Unavailable
);

/// The owner records a finished step of a multi-step operation
///
/// Roles: `client` (or `admin`), with the current attempt's `owner_token`.
/// Each step has its own effect id: the operation's `effect_id`, a dot and
/// the step name. Recording a step again with the same `provider_ref`
/// changes nothing and answers 200; with another, 409 `step_conflict`. At
/// most 64 steps per key (409 `too_many_steps`). Steps survive a takeover.
/// Body at most 64 KiB; a `provider_ref` that is empty or over 1024 bytes is
/// 400 `invalid_body`.
#[utoipa::path(
    tag = "recovery",
    operation_id = "recordStep",
    params(KeyPath, StepPath),
    request_body = StepBody,
    responses(
        (status = 200, description = "The record, whose `steps` now holds the step.", body = RecordView),
        StepProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Owner>()))),
)]
#[put("/steps/{step}")]
pub async fn record_step(
    state: web::Data<AppState>,
    KeyCaller { key: k, .. }: KeyCaller<Owner>,
    path: web::Path<StepPath>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    // Step names follow the operation-name pattern.
    let step = OperationName::parse(&path.step).map_err(|_| {
        ApiError::bad_request(
            ErrorCode::InvalidStep,
            "step must match [a-z0-9][a-z0-9._-]{0,63}",
        )
    })?;
    let body: StepBody = read_json(payload, SMALL_LIMIT).await?;
    if body.provider_ref.is_empty() || body.provider_ref.len() > REF_LIMIT {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidBody,
            "provider_ref must be 1-1024 bytes",
        ));
    }
    let call = OwnerCall {
        token: &body.owner_token,
    };
    let record = state
        .engine
        .record_step(&k, &call, step.as_str(), &body.provider_ref)
        .await?;
    Ok(record_response(&state, &k, &record))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = QuarantineRequest)]
pub struct QuarantineBody {
    #[schema(value_type = OwnerToken)]
    owner_token: String,
    /// 1–1024 bytes, kept as `quarantine_reason`.
    #[schema(min_length = 1)]
    reason: String,
}

crate::problems!(
    /// What a quarantine can refuse with.
    QuarantineProblems: InvalidOperation, InvalidKey, InvalidJson, InvalidBody, Unauthorized,
    Forbidden, NotFound, LeaseLost, AlreadyCompleted, Quarantined, PayloadTooLarge,
    RateLimited, Unavailable
);

/// The owner marks the outcome ambiguous
///
/// Roles: `client` (or `admin`), with the current attempt's `owner_token`.
/// From then on claims answer 409 `quarantined` (a different request still
/// 422 `key_reused`) until the key is resolved. Body at most 64 KiB; a
/// `reason` that is empty or over 1024 bytes is 400 `invalid_body`.
#[utoipa::path(
    tag = "recovery",
    operation_id = "quarantine",
    params(KeyPath),
    request_body = QuarantineBody,
    responses(
        (status = 200, description = "The record, now `quarantined`, with its `quarantine_reason`.", body = RecordView),
        QuarantineProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Owner>()))),
)]
#[post("/quarantine")]
pub async fn quarantine(
    state: web::Data<AppState>,
    KeyCaller { key: k, .. }: KeyCaller<Owner>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body: QuarantineBody = read_json(payload, SMALL_LIMIT).await?;
    if body.reason.is_empty() || body.reason.len() > REF_LIMIT {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidBody,
            "reason must be 1-1024 bytes",
        ));
    }
    let call = OwnerCall {
        token: &body.owner_token,
    };
    let record = state.engine.quarantine(&k, &call, &body.reason).await?;
    Ok(record_response(&state, &k, &record))
}

/// Exactly one of `outcome` and `"release": true`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ResolveRequest)]
pub struct ResolveBody {
    /// Required unless the caller is an admin.
    owner_token: Option<String>,
    /// Complete the key with this outcome.
    #[schema(value_type = Option<crate::domain::outcome::Shape>)]
    outcome: Option<Box<RawValue>>,
    /// `true`: release the key.
    #[serde(default)]
    release: bool,
    /// At most 1024 bytes; kept with a release.
    reason: Option<String>,
}

crate::problems!(
    /// What a resolve can refuse with.
    ResolveProblems: InvalidOperation, InvalidKey, InvalidJson, InvalidBody, InvalidOutcome,
    Unauthorized, Forbidden, NotFound, NotQuarantined, AlreadyCompleted, LeaseLost,
    PayloadTooLarge, OutcomeTooLarge, RateLimited, Unavailable
);

/// Finish a quarantined (or stuck) key
///
/// Roles: `admin` — any quarantined key of its tenant, and any in-progress
/// key whose lease has run out; or `client` with the current `owner_token`
/// — its own quarantined key. A `viewer` gets 403; a client without
/// `owner_token` 400 `invalid_body`; a wrong token 409 `lease_lost`.
///
/// Send exactly one of `outcome` (the key becomes `completed`; the answer is
/// the record) and `"release": true` (the record is removed; the answer is
/// `{"status": "released"}`). Resolving again with the same outcome answers
/// 200; with another, 409 `already_completed`. A key in progress with a
/// live lease is 409 `not_quarantined`. The history event records who
/// resolved (`admin` or `owner`, then `:` and the token's `sub`).
#[utoipa::path(
    tag = "recovery",
    operation_id = "resolve",
    params(KeyPath),
    request_body(content = ResolveBody, examples(
        ("complete" = (value = json!({
            "outcome": {"status_code": 201, "body": {"charge": "ch_9"}},
            "reason": "found ch_9 at the provider"
        }))),
        ("release" = (value = json!({"release": true, "reason": "provider has no record of it"}))),
    )),
    responses(
        (status = 200, description = "The record (resolved with an outcome), or `{\"status\":\"released\"}`.", body = Resolved),
        ResolveProblems,
    ),
    extensions(("x-roles" = json!(role_names::<caller::Resolver>()))),
)]
#[post("/resolve")]
pub async fn resolve(
    state: web::Data<AppState>,
    // The role before the body: a caller who may not resolve at all is
    // refused by the extractor before up to 8 MiB of body is read.
    KeyCaller { caller, key: k }: KeyCaller<caller::Resolver>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let body: ResolveBody = read_json(payload, OUTCOME_LIMIT).await?;
    let by = resolver(&caller, body.owner_token.as_deref())?;
    if body.reason.as_ref().is_some_and(|r| r.len() > REF_LIMIT) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidBody,
            "reason must be at most 1024 bytes",
        ));
    }
    match (body.outcome, body.release) {
        (Some(outcome), false) => {
            let policy = state.engine.policy(&k.tenant, &k.operation).await?;
            let outcome =
                Outcome::parse(&outcome, policy.max_outcome_bytes).map_err(outcome_error)?;
            let record = state.engine.resolve_complete(&k, &by, &outcome).await?;
            Ok(record_response(&state, &k, &record))
        }
        (None, true) => {
            state
                .engine
                .resolve_release(&k, &by, body.reason.as_deref())
                .await?;
            state.usage.count(&k, UsageEvent::Released);
            Ok(released())
        }
        _ => Err(ApiError::bad_request(
            ErrorCode::InvalidBody,
            "send either an `outcome` or `\"release\": true`",
        )),
    }
}

/// An admin resolves any quarantined key of its tenant; otherwise a client
/// must present the owner token of the attempt that holds the key.
fn resolver(
    caller: &caller::Caller<caller::Resolver>,
    owner_token: Option<&str>,
) -> Result<Resolver, ApiError> {
    let subject = caller.principal.subject.as_deref();
    let named = |role: &str| match subject {
        Some(sub) => format!("{role}:{sub}"),
        None => role.to_owned(),
    };
    if caller.has(Role::Admin) {
        return Ok(Resolver {
            owner: None,
            actor: named("admin"),
        });
    }
    // Not an admin, so a client (the extractor let nobody else in).
    let token = owner_token.ok_or_else(|| {
        ApiError::bad_request(
            ErrorCode::InvalidBody,
            "owner_token is required unless the caller is an admin",
        )
    })?;
    Ok(Resolver {
        owner: Some(crate::domain::OwnerTokenHash::of(token)),
        actor: named("owner"),
    })
}
