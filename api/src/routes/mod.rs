//! HTTP routes: thin handlers that extract, call the engine, and map the
//! answer to HTTP: `/v1/keys/…` (keys.rs), `/v1/operation-classes/…`
//! (classes.rs) and each class's webhook endpoints (webhooks.rs). All JSON
//! answers and problem documents are built here.
//!
//! [`configure`] registers every route and thereby documents it (the
//! OpenAPI document is generated from the registration, openapi/mod.rs);
//! [`routes`] reads the list back from that document, and
//! `tests/tests/openapi.rs` checks the server serves each one.

mod body;
mod caller;
mod claim;
mod classes;
mod health;
mod keys;
mod list;
pub mod metrics;
pub mod openapi;
mod recovery;
pub mod request_id;
pub mod view;
mod webhooks;

use std::sync::Arc;

use utoipa_actix_web::scope;
use utoipa_actix_web::service_config::ServiceConfig;

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
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    /// Lower-case HTTP method: `get`, `post`, `put` or `delete`.
    pub method: &'static str,
    /// The path template; `{name}` is one path segment, in actix and OpenAPI
    /// alike.
    pub path: String,
}

/// Registers every route of the API, and so documents it: each handler is a
/// service whose `#[utoipa::path]` describes it (`.service` takes nothing
/// else; `.route` is not used here, as it would serve a route without
/// documenting it).
///
/// The routes are grouped by path prefix so that a request is matched
/// against as few patterns with `{…}` segments as possible: actix tests such
/// patterns with a regular expression each, in registration order, which
/// showed up as a tenth of the server's CPU on cached replays when every key
/// route was its own `/v1/keys/{operation}/{key}/…` pattern. Under the
/// scope, the key routes are plain strings.
pub fn configure(cfg: &mut ServiceConfig) {
    cfg.service(health::healthz)
        .service(health::readyz)
        .service(metrics::scrape)
        .service(openapi::document)
        .service(list::list)
        .service(
            scope("/v1/keys/{operation}/{key}")
                .service(keys::lookup)
                .service(claim::claim)
                .service(keys::complete)
                .service(keys::release)
                .service(keys::heartbeat)
                .service(recovery::quarantine)
                .service(recovery::resolve)
                .service(recovery::record_step),
        )
        // A scope, not a resource: a method no route takes falls through to
        // the app's problem+json 404 instead of a bare 405.
        .service(
            scope("/v1/operation-classes/{operation}")
                .service(classes::get)
                .service(classes::put)
                .service(classes::delete)
                .service(webhooks::create)
                .service(webhooks::list)
                .service(webhooks::delete)
                .service(webhooks::deliveries),
        );
}

/// Every route [`configure`] registers, read from the document it generates.
pub fn routes() -> Vec<Route> {
    let doc = openapi::generate();
    let mut routes = Vec::new();
    for (path, item) in &doc.paths.paths {
        let methods = [
            ("get", &item.get),
            ("put", &item.put),
            ("post", &item.post),
            ("delete", &item.delete),
            ("options", &item.options),
            ("head", &item.head),
            ("patch", &item.patch),
            ("trace", &item.trace),
        ];
        for (method, op) in methods {
            if op.is_some() {
                routes.push(Route {
                    method,
                    path: path.clone(),
                });
            }
        }
    }
    routes
}

pub use health::not_found;
