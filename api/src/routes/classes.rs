//! `/v1/operation-classes/{operation}`: a tenant's admin reads, sets and
//! resets the policy of one operation class (SPEC section 6). The tenant is
//! the caller's; the answer is always the class's policy in canonical form
//! with a read-only `default` member.

use actix_web::{web, HttpResponse};

use super::body::{read_object, SMALL_LIMIT};
use super::caller::{Admin, Caller};
use super::AppState;
use crate::domain::policy::document::{PolicyDocument, PolicyJsonError};
use crate::domain::{OperationName, Policy};
use crate::engine::OperationClass;
use crate::error::{ApiError, ErrorCode};

type ClassPath = web::Path<String>;

pub async fn get(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: ClassPath,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path)?;
    let class = state
        .engine
        .operation_class(&caller.principal.tenant, &op)
        .await?;
    Ok(class_response(&class))
}

pub async fn put(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: ClassPath,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path)?;
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

pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: ClassPath,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path)?;
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
    let document = PolicyDocument {
        is_default: Some(class.is_default),
        ..PolicyDocument::from_policy(&class.policy)
    };
    HttpResponse::Ok().json(document)
}
