//! The authenticated caller: a verified token turned into a tenant and roles.
//!
//! The tenant comes from the token and nowhere else; every scoped key a
//! handler builds starts from it.

use std::future::{ready, Ready};

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{web, FromRequest, HttpRequest};

use super::AppState;
use crate::auth::{Principal, Role};
use crate::domain::{IdempotencyKey, OperationName, ScopedKey};
use crate::error::ApiError;

pub struct Caller(pub Principal);

impl FromRequest for Caller {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authenticate(req))
    }
}

fn authenticate(req: &HttpRequest) -> Result<Caller, ApiError> {
    let state = req
        .app_data::<web::Data<AppState>>()
        .expect("AppState is registered");
    let header = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or(ApiError::Unauthorized)?;
    let token = header
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .ok_or(ApiError::Unauthorized)?;
    let principal = state.verifier.verify(token).map_err(|e| {
        tracing::debug!(reason = %e, "token refused");
        ApiError::Unauthorized
    })?;
    if let Some(limiter) = &state.limiter {
        limiter.check(&principal.tenant).map_err(|wait| {
            state.engine.metrics.rate_limited.inc();
            ApiError::RateLimited { retry_after: wait }
        })?;
    }
    Ok(Caller(principal))
}

impl Caller {
    /// Allows the call if the token carries any of `roles` (admin carries all).
    pub fn require(&self, roles: &[Role]) -> Result<(), ApiError> {
        if self.0.can(roles) {
            Ok(())
        } else {
            Err(ApiError::Forbidden)
        }
    }

    /// The scoped key of a `/keys/{operation}/{key}` path, under this caller's
    /// tenant.
    pub fn scoped(&self, operation: &str, key: &str) -> Result<ScopedKey, ApiError> {
        Ok(ScopedKey {
            tenant: self.0.tenant.clone(),
            operation: OperationName::parse(operation)
                .map_err(|e| ApiError::bad_request("invalid_operation", e.to_string()))?,
            key: IdempotencyKey::parse(key)
                .map_err(|e| ApiError::bad_request("invalid_key", e.to_string()))?,
        })
    }
}
