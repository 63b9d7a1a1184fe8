//! `POST /v1/keys/{operation}/{key}/claim`: claim a key, or learn what
//! became of it (SPEC section 4's table of claim answers).

use actix_web::http::StatusCode;
use actix_web::{post, web, HttpResponse};
use serde::Deserialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::body::{read_json, CLAIM_LIMIT};
use super::caller::{role_names, KeyCaller, KeyPath, Owner};
use super::keys::json;
use super::openapi::schemas::{
    ClaimedWord, CompletedWord, Fingerprint as FingerprintHex, RecoveringWord,
};
use super::view::{
    self, rfc3339, with_outcome, ClaimOk, ClaimedView, PreviousAttempt, RecoveringView, ReplayView,
};
use super::AppState;
use crate::domain::fingerprint::FingerprintError;
use crate::domain::policy::LeaseOutOfRange;
use crate::domain::{Fingerprint, ScopedKey};
use crate::engine::{ClaimAnswer, ClaimRequest};
use crate::error::{ApiError, ErrorCode};

/// A claim: exactly one of `request` and `fingerprint`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ClaimRequest)]
pub struct ClaimBody {
    /// The protected input, any JSON; the server fingerprints it (RFC 8785
    /// after the class's fingerprint rules). `null` counts as absent. A
    /// number a double cannot carry exactly is 400 `number_out_of_range`.
    #[schema(value_type = Option<serde_json::Value>)]
    request: Option<Box<RawValue>>,
    /// A precomputed fingerprint instead of `request`.
    #[schema(value_type = Option<FingerprintHex>)]
    fingerprint: Option<String>,
    /// If another attempt holds a live lease, wait up to this long (capped by
    /// the class's `max_wait`, 10 s by default) for it to finish before
    /// answering `in_progress`. Default 0.
    wait_ms: Option<u64>,
    /// The lease this attempt gets if it becomes the owner: 1000 up to the
    /// class's `max_lease` (1 h by default). Default: the class's `lease`
    /// (30 s by default). Later heartbeats reuse it.
    #[schema(minimum = 1000)]
    lease_ms: Option<u64>,
}

crate::problems!(
    /// What a claim can refuse with.
    ClaimProblems: InvalidOperation, InvalidKey, InvalidJson, InvalidBody, InvalidFingerprint,
    NumberOutOfRange, InvalidRequest, InvalidLease, Unauthorized, Forbidden, InProgress,
    Quarantined, PayloadTooLarge, KeyReused, QuotaExceeded, RateLimited, Unavailable
);

/// Claim a key, or learn what became of it
///
/// Roles: `client` (or `admin`). Body at most 1 MiB.
///
/// Send exactly one of `request` (the server fingerprints it, RFC 8785
/// after the class's fingerprint rules) and `fingerprint` (precomputed);
/// both or neither is 400 `invalid_body`.
///
/// Checks run in this order: token (401), role (403), operation and key
/// (400), body (400/413), the class's policy (503 if it cannot be read),
/// fingerprint (400), `lease_ms` (400); only then the stored key.
///
/// A 409 `in_progress` carries `Retry-After` (seconds until the current
/// lease ends, at least 1): another attempt holds a live lease, after any
/// `wait_ms`. A 409 `quarantined`: the key is quarantined, or its lease ran
/// out in a class whose `on_lease_expiry` is `quarantine`. A 507
/// `quota_exceeded`: the key has no live record and the tenant reached the
/// storage quota the operator set (existing keys are never refused for it).
#[utoipa::path(
    tag = "keys",
    operation_id = "claim",
    params(KeyPath),
    request_body(content = ClaimBody, example = json!({
        "request": {"amount": "25.00", "currency": "EUR", "customer": "cus_42"}
    })),
    responses(
        (
            status = 201,
            description = "New key (or one past its replay window); the caller owns it.",
            body = ClaimedView,
            // What the owner does next, with its token: for readers, and for
            // Schemathesis's stateful phase, which follows links.
            links(
                ("lookup" = (operation_id = "lookup", parameters(
                    ("operation" = "$request.path.operation"), ("key" = "$request.path.key")))),
                ("complete" = (operation_id = "complete", parameters(
                    ("operation" = "$request.path.operation"), ("key" = "$request.path.key")),
                    request_body = json!({
                        "owner_token": "$response.body#/owner_token",
                        "outcome": {"status_code": 201, "body": {"charge": "ch_1"}}
                    }))),
                ("heartbeat" = (operation_id = "heartbeat", parameters(
                    ("operation" = "$request.path.operation"), ("key" = "$request.path.key")),
                    request_body = json!({"owner_token": "$response.body#/owner_token"}))),
                ("release" = (operation_id = "release", parameters(
                    ("operation" = "$request.path.operation"), ("key" = "$request.path.key")),
                    request_body = json!({"owner_token": "$response.body#/owner_token"}))),
                ("quarantine" = (operation_id = "quarantine", parameters(
                    ("operation" = "$request.path.operation"), ("key" = "$request.path.key")),
                    request_body = json!({
                        "owner_token": "$response.body#/owner_token",
                        "reason": "provider timed out"
                    }))),
                ("recordStep" = (operation_id = "recordStep", parameters(
                    ("operation" = "$request.path.operation"), ("key" = "$request.path.key"),
                    ("step" = "charge")),
                    request_body = json!({
                        "owner_token": "$response.body#/owner_token",
                        "provider_ref": "ch_1"
                    }))),
            ),
        ),
        (status = 200, description = "`recovering` (a takeover) or `completed` (a replay).", body = ClaimOk),
        ClaimProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Owner>()))),
)]
#[post("/claim")]
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
            let view = ClaimedView {
                status: ClaimedWord::Word,
                owner_token: token.expose(),
                attempt: record.attempt,
                lease_expires_at: rfc3339(record.lease_expires_at),
                expires_at: rfc3339(record.protected_until()),
                effect_id: &effect_id,
            };
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
            let view = RecoveringView {
                status: RecoveringWord::Word,
                owner_token: token.expose(),
                attempt: record.attempt,
                lease_expires_at: rfc3339(record.lease_expires_at),
                expires_at: rfc3339(record.protected_until()),
                effect_id: &effect_id,
                previous_attempt: previous,
                steps,
            };
            (
                "recovering",
                json(StatusCode::OK, with_outcome(&view, None)),
            )
        }
        ClaimAnswer::Completed { replay } => {
            // Rendered once per cached copy (see `cache::Rendered`).
            let body = replay.rendered.get_or_init(|| {
                let view = ReplayView {
                    status: CompletedWord::Word,
                    replayed: true,
                    attempt: replay.attempt,
                    effect_id: &effect_id(),
                    completed_at: rfc3339(replay.completed_at),
                    expires_at: rfc3339(replay.expires_at),
                };
                with_outcome(&view, Some(&replay.outcome)).into()
            });
            ("completed", json(StatusCode::OK, body))
        }
    })
}

pub(super) fn lease_error(e: LeaseOutOfRange) -> ApiError {
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
