//! `/v1/keys/{operation}/{key}/steps/{step}`, `/quarantine`, `/resolve`:
//! what a client needs when an outcome is ambiguous.

use actix_web::{web, HttpResponse};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::body::{read_json, OUTCOME_LIMIT, SMALL_LIMIT};
use super::caller::{self, KeyCaller, Owner};
use super::keys::{outcome_error, record_response, released};
use super::AppState;
use crate::auth::Role;
use crate::domain::usage::UsageEvent;
use crate::domain::{OperationName, Outcome};
use crate::engine::OwnerCall;
use crate::error::{ApiError, ErrorCode};
use crate::store::Resolver;

const REF_LIMIT: usize = 1024;

/// The step's segment of `…/steps/{step}` (the key's are the extractor's).
#[derive(Deserialize)]
pub struct StepPath {
    step: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepBody {
    owner_token: String,
    provider_ref: String,
}

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuarantineBody {
    owner_token: String,
    reason: String,
}

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    owner_token: Option<String>,
    outcome: Option<Box<RawValue>>,
    #[serde(default)]
    release: bool,
    reason: Option<String>,
}

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
