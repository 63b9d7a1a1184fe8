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
pub mod metrics;
mod openapi;
mod recovery;
pub mod request_id;
pub mod view;

use std::sync::Arc;

use actix_web::web;

pub use caller::{Access, Admin, Caller, KeyCaller, Owner, Reader, Scraper};

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
/// The routes, grouped by path prefix so that a request is matched against
/// as few patterns with `{…}` segments as possible: actix tests such
/// patterns with a regular expression each, in registration order, which
/// showed up as a tenth of the server's CPU on cached replays when every key
/// route was its own `/v1/keys/{operation}/{key}/…` pattern. Under the
/// scope, the key routes are plain strings. [`ROUTES`] lists the same
/// routes for the OpenAPI test, which checks every one of them is served.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .route("/metrics", web::get().to(metrics::scrape))
        .route("/openapi.json", web::get().to(openapi::document))
        .route("/v1/keys", web::get().to(list::list))
        .service(
            web::scope("/v1/keys/{operation}/{key}")
                .route("", web::get().to(keys::lookup))
                .route("/claim", web::post().to(keys::claim))
                .route("/complete", web::post().to(keys::complete))
                .route("/release", web::post().to(keys::release))
                .route("/heartbeat", web::post().to(keys::heartbeat))
                .route("/quarantine", web::post().to(recovery::quarantine))
                .route("/resolve", web::post().to(recovery::resolve))
                .route("/steps/{step}", web::put().to(recovery::record_step)),
        )
        // A scope, not a resource: a method no route takes falls through to
        // the app's problem+json 404 instead of a bare 405.
        .service(
            web::scope("/v1/operation-classes/{operation}")
                .route("", web::get().to(classes::get))
                .route("", web::put().to(classes::put))
                .route("", web::delete().to(classes::delete)),
        );
}

macro_rules! routes {
    ($($method:ident $path:literal,)+) => {
        /// Every route [`configure`] registers.
        pub const ROUTES: &[Route] = &[$(Route { method: stringify!($method), path: $path },)+];
    };
}

routes! {
    get "/healthz",
    get "/readyz",
    get "/metrics",
    get "/openapi.json",
    get "/v1/keys",
    get "/v1/keys/{operation}/{key}",
    post "/v1/keys/{operation}/{key}/claim",
    post "/v1/keys/{operation}/{key}/complete",
    post "/v1/keys/{operation}/{key}/release",
    post "/v1/keys/{operation}/{key}/heartbeat",
    post "/v1/keys/{operation}/{key}/quarantine",
    post "/v1/keys/{operation}/{key}/resolve",
    put "/v1/keys/{operation}/{key}/steps/{step}",
    get "/v1/operation-classes/{operation}",
    put "/v1/operation-classes/{operation}",
    delete "/v1/operation-classes/{operation}",
}

pub use health::not_found;
