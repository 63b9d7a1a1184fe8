//! HTTP routes: thin handlers that extract, call the engine, and map the
//! answer to HTTP: `/v1/keys/…` (keys.rs) and `/v1/operation-classes/…`
//! (classes.rs). All JSON answers and problem documents are built here.
//!
//! [`ROUTES`] lists every route; `api/openapi.json` describes each one and
//! `tests/tests/openapi.rs` checks the two agree.

mod body;
mod caller;
mod classes;
mod health;
mod keys;
mod list;
mod openapi;
mod recovery;
pub mod view;

use std::sync::Arc;

use actix_web::web;

pub use caller::Caller;

use crate::auth::Verifier;
use crate::engine::Engine;
use crate::usage::Usage;

/// What every handler can reach.
pub struct AppState {
    pub engine: Engine,
    pub verifier: Arc<Verifier>,
    /// This node's usage counts, fed by the claim and release handlers.
    pub usage: Usage,
    /// The per-tenant rate limit (`IDEMKEY_TENANT_RATE_LIMIT`), if set.
    pub limiter: Option<crate::ratelimit::TenantLimiter>,
}

/// One route of the JSON API, as the OpenAPI document names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// Lower-case HTTP method: `get`, `post`, `put` or `delete`.
    pub method: &'static str,
    /// The path template; `{name}` is one path segment, in actix and OpenAPI
    /// alike.
    pub path: &'static str,
}

/// Declares the routes once: `configure` registers exactly what `ROUTES`
/// lists, so the table the OpenAPI test checks cannot drift from what is
/// served.
macro_rules! routes {
    ($($method:ident $path:literal => $handler:path,)+) => {
        /// Every route `configure` registers.
        pub const ROUTES: &[Route] = &[$(Route { method: stringify!($method), path: $path },)+];

        pub fn configure(cfg: &mut web::ServiceConfig) {
            $(cfg.route($path, web::$method().to($handler));)+
        }
    };
}

routes! {
    get "/healthz" => health::healthz,
    get "/readyz" => health::readyz,
    get "/metrics" => health::metrics,
    get "/openapi.json" => openapi::document,
    get "/v1/keys" => list::list,
    get "/v1/keys/{operation}/{key}" => keys::lookup,
    post "/v1/keys/{operation}/{key}/claim" => keys::claim,
    post "/v1/keys/{operation}/{key}/complete" => keys::complete,
    post "/v1/keys/{operation}/{key}/release" => keys::release,
    post "/v1/keys/{operation}/{key}/heartbeat" => keys::heartbeat,
    post "/v1/keys/{operation}/{key}/quarantine" => recovery::quarantine,
    post "/v1/keys/{operation}/{key}/resolve" => recovery::resolve,
    put "/v1/keys/{operation}/{key}/steps/{step}" => recovery::record_step,
    get "/v1/operation-classes/{operation}" => classes::get,
    put "/v1/operation-classes/{operation}" => classes::put,
    delete "/v1/operation-classes/{operation}" => classes::delete,
}

pub use health::not_found;
