//! `/v1/operation-classes/{operation}`: a tenant's admin reads, sets and
//! resets the policy of one operation class (SPEC section 6). The tenant is
//! the caller's; the answer is always the class's policy in canonical form
//! with a read-only `default` member.

use actix_web::{delete, get, put, web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::body::{read_object, SMALL_LIMIT};
use super::caller::{role_names, Admin, Caller, ClassPath};
use super::AppState;
use crate::domain::duration::DurationText;
use crate::domain::policy::document::{LeaseExpiryWord, PolicyDocument, PolicyJsonError};
use crate::domain::{OperationName, Policy};
use crate::engine::OperationClass;
use crate::error::{ApiError, ErrorCode};

type Path = web::Path<ClassPath>;

/// A class's policy in canonical form; durations in their shortest exact
/// spelling (`"24h"` is `"1d"`).
#[derive(Serialize, ToSchema)]
#[schema(as = Policy, example = json!({
    "replay_window": "1d", "hot_retention": "1h", "lease": "30s", "max_lease": "1h",
    "max_wait": "10s", "max_outcome_bytes": 1048576, "on_lease_expiry": "takeover",
    "fingerprint": {"include": [], "exclude": [], "decimal_fields": []}, "default": true
}))]
pub struct PolicyView {
    #[schema(value_type = DurationText)]
    replay_window: String,
    #[schema(value_type = DurationText)]
    hot_retention: String,
    #[schema(value_type = DurationText)]
    lease: String,
    #[schema(value_type = DurationText)]
    max_lease: String,
    #[schema(value_type = DurationText)]
    max_wait: String,
    max_outcome_bytes: u64,
    #[schema(value_type = LeaseExpiryWord)]
    on_lease_expiry: String,
    fingerprint: FingerprintRulesView,
    /// True when the class has no policy of its own.
    default: bool,
}

/// RFC 6901 JSON pointers, at most 64 per list, each at most 1024 bytes.
#[derive(Serialize, ToSchema)]
#[schema(as = FingerprintRules)]
pub struct FingerprintRulesView {
    /// If not empty, only these values are protected.
    include: Vec<String>,
    /// These values are removed before fingerprinting.
    exclude: Vec<String>,
    /// Strings holding plain decimals here are normalised (`"25.00"` =
    /// `"25"`).
    decimal_fields: Vec<String>,
}

crate::problems!(
    /// What reading or resetting a class can refuse with.
    ClassProblems: InvalidOperation, Unauthorized, Forbidden, RateLimited, Unavailable
);

crate::problems!(
    /// What setting a class can refuse with.
    SetClassProblems: InvalidOperation, InvalidJson, InvalidBody, InvalidPolicy, Unauthorized,
    Forbidden, PayloadTooLarge, RateLimited, Unavailable
);

/// Read a class's policy
///
/// Role: `admin`. A class never set (or reset) answers the defaults, with
/// `"default": true`.
#[utoipa::path(
    tag = "operation-classes",
    operation_id = "getOperationClass",
    params(ClassPath),
    responses((status = 200, description = "The class's policy in canonical form.", body = PolicyView), ClassProblems),
    extensions(("x-roles" = json!(role_names::<Admin>()))),
)]
#[get("")]
pub async fn get(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: Path,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path.operation)?;
    let class = state
        .engine
        .operation_class(&caller.principal.tenant, &op)
        .await?;
    Ok(class_response(&class))
}

/// Set a class's whole policy
///
/// Role: `admin`. Sets the whole policy: a member left out (or `null`)
/// takes its default, not the value it had before. Answers with the stored
/// policy in canonical form. A record's expiry is fixed when its key is
/// first claimed, so a change affects new records only; other nodes apply a
/// change within 2 s. An invalid `PUT` changes nothing. Body at most
/// 64 KiB. An `invalid_policy` names the field first in its `detail`.
#[utoipa::path(
    tag = "operation-classes",
    operation_id = "setOperationClass",
    params(ClassPath),
    request_body = PolicyDocument,
    responses((status = 200, description = "The class's policy in canonical form.", body = PolicyView), SetClassProblems),
    extensions(("x-roles" = json!(role_names::<Admin>()))),
)]
#[put("")]
pub async fn put(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: Path,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path.operation)?;
    let body = read_object(payload, SMALL_LIMIT).await?;
    let policy = Policy::from_json(&body).map_err(|e| match e {
        PolicyJsonError::Syntax(why) => ApiError::bad_request(ErrorCode::InvalidJson, why),
        PolicyJsonError::Invalid(e) => ApiError::bad_request(ErrorCode::InvalidPolicy, e.message),
    })?;
    let class = state
        .engine
        .set_operation_class(&caller.principal.tenant, &op, &policy)
        .await?;
    Ok(class_response(&class))
}

/// Return a class to the defaults
///
/// Role: `admin`. Answers with the defaults, as `GET` would. Deleting a
/// class that has no policy is not an error.
#[utoipa::path(
    tag = "operation-classes",
    operation_id = "resetOperationClass",
    params(ClassPath),
    responses((status = 200, description = "The class's policy in canonical form.", body = PolicyView), ClassProblems),
    extensions(("x-roles" = json!(role_names::<Admin>()))),
)]
#[delete("")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: Path,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path.operation)?;
    let class = state
        .engine
        .reset_operation_class(&caller.principal.tenant, &op)
        .await?;
    Ok(class_response(&class))
}

fn operation(path: &str) -> Result<OperationName, ApiError> {
    OperationName::parse(path)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidOperation, e.to_string()))
}

fn class_response(class: &OperationClass) -> HttpResponse {
    let d = PolicyDocument::from_policy(&class.policy);
    let rules = d.fingerprint.unwrap_or_default();
    let view = PolicyView {
        replay_window: d.replay_window.unwrap_or_default(),
        hot_retention: d.hot_retention.unwrap_or_default(),
        lease: d.lease.unwrap_or_default(),
        max_lease: d.max_lease.unwrap_or_default(),
        max_wait: d.max_wait.unwrap_or_default(),
        max_outcome_bytes: d.max_outcome_bytes.unwrap_or_default(),
        on_lease_expiry: d.on_lease_expiry.unwrap_or_default(),
        fingerprint: FingerprintRulesView {
            include: rules.include.unwrap_or_default(),
            exclude: rules.exclude.unwrap_or_default(),
            decimal_fields: rules.decimal_fields.unwrap_or_default(),
        },
        default: class.is_default,
    };
    HttpResponse::Ok().json(view)
}
