//! The authenticated caller: a verified token turned into a tenant and roles,
//! checked against the roles the call needs before the handler runs.
//!
//! A handler names what it needs in its signature — `Caller<Admin>` for a
//! class policy, `KeyCaller<Owner>` for an owner's call on a key — and the
//! extractor refuses everyone else (401 without a valid token, 403 without
//! a role the call takes) before the handler reads a byte of the body. No
//! handler can forget a check: without an extractor it has no tenant.
//!
//! The tenant comes from the token and nowhere else; every scoped key a
//! handler builds starts from it.

use std::future::{ready, Ready};
use std::marker::PhantomData;

use actix_web::dev::Payload;
use actix_web::http::header::AUTHORIZATION;
use actix_web::{web, FromRequest, HttpRequest};

use super::AppState;
use crate::auth::{Principal, Role, RoleSet};
use crate::domain::{IdempotencyKey, OperationName, ScopedKey};
use crate::error::{ApiError, ErrorCode};

/// Which roles may make a call (admin may make every call).
pub trait Access {
    const ROLES: &'static [Role];
}

/// The owner's calls and claims: `client`.
pub enum Owner {}
/// Reading keys: `client` or `viewer`.
pub enum Reader {}
/// Operation-class policies: `admin`.
pub enum Admin {}
/// Resolving a quarantined key: `admin`, or `client` with the owner token.
pub enum Resolver {}
/// Scraping `/metrics` on the API listener: `metrics`.
pub enum Scraper {}

impl Access for Owner {
    const ROLES: &'static [Role] = &[Role::Client];
}
impl Access for Reader {
    const ROLES: &'static [Role] = &[Role::Client, Role::Viewer];
}
impl Access for Admin {
    const ROLES: &'static [Role] = &[Role::Admin];
}
impl Access for Resolver {
    const ROLES: &'static [Role] = &[Role::Admin, Role::Client];
}
impl Access for Scraper {
    const ROLES: &'static [Role] = &[Role::Metrics];
}

/// A caller whose token carries one of `A`'s roles.
pub struct Caller<A: Access> {
    pub principal: Principal,
    access: PhantomData<A>,
}

impl<A: Access> FromRequest for Caller<A> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authorize(req))
    }
}

/// A [`Caller`] of a `/v1/keys/{operation}/{key}/…` route, with the path's
/// scoped key under the caller's tenant.
pub struct KeyCaller<A: Access> {
    pub caller: Caller<A>,
    pub key: ScopedKey,
}

impl<A: Access> FromRequest for KeyCaller<A> {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(authorize(req).and_then(|caller: Caller<A>| {
            // Decoded as `web::Path` decodes: percent-escapes included.
            let path: KeyPath = req.match_info().load().map_err(|e| {
                ApiError::bad_request(ErrorCode::InvalidKey, format!("the path: {e}"))
            })?;
            let key = caller.scoped(&path.operation, &path.key)?;
            Ok(Self { caller, key })
        }))
    }
}

/// The path segments of a key's routes, as the handlers read them and the
/// document describes them.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct KeyPath {
    /// The operation class, such as `charges.create`.
    #[param(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$", example = "charges.create")]
    operation: String,
    /// The idempotency key, percent-encoded as one path segment (leave only
    /// `A–Z a–z 0–9 - . _ ~` unencoded; `/` is `%2F`). After decoding: 1–255
    /// characters from 0x21 to 0x7E.
    #[param(
        min_length = 1,
        max_length = 255,
        pattern = "^[!-~]{1,255}$",
        example = "order-1042"
    )]
    key: String,
}

/// The path segment of `/v1/operation-classes/{operation}`.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ClassPath {
    /// The operation class, such as `charges.create`.
    #[param(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$", example = "charges.create")]
    pub operation: String,
}

/// The names of the roles whose tokens may make a call that needs `A`: the
/// document's `x-roles`.
pub fn role_names<A: Access>() -> Vec<&'static str> {
    Role::ALL
        .into_iter()
        .filter(|role| RoleSet::from_iter([*role]).can(A::ROLES))
        .map(|role| role.as_str())
        .collect()
}

fn authorize<A: Access>(req: &HttpRequest) -> Result<Caller<A>, ApiError> {
    let principal = authenticate(req)?;
    if !principal.can(A::ROLES) {
        return Err(ApiError::Forbidden);
    }
    Ok(Caller {
        principal,
        access: PhantomData,
    })
}

fn authenticate(req: &HttpRequest) -> Result<Principal, ApiError> {
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
    crate::telemetry::record_tenant(&principal.tenant);
    if let Some(limiter) = &state.limiter {
        limiter.check(&principal.tenant).map_err(|wait| {
            state.engine.metrics.rate_limited.inc();
            ApiError::RateLimited { retry_after: wait }
        })?;
    }
    Ok(principal)
}

impl<A: Access> Caller<A> {
    /// Whether the token also carries `role` (admin carries all).
    pub fn has(&self, role: Role) -> bool {
        self.principal.can(&[role])
    }

    /// The scoped key of a `/keys/{operation}/{key}` path, under this caller's
    /// tenant.
    fn scoped(&self, operation: &str, key: &str) -> Result<ScopedKey, ApiError> {
        Ok(ScopedKey {
            tenant: self.principal.tenant.clone(),
            operation: OperationName::parse(operation)
                .map_err(|e| ApiError::bad_request(ErrorCode::InvalidOperation, e.to_string()))?,
            key: IdempotencyKey::parse(key)
                .map_err(|e| ApiError::bad_request(ErrorCode::InvalidKey, e.to_string()))?,
        })
    }
}
