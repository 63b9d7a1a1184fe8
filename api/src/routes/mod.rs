//! HTTP routes: thin handlers that extract, call the engine, and map the
//! answer to HTTP: `/v1/keys/…` (keys.rs) and `/v1/operation-classes/…`
//! (classes.rs). All JSON answers and problem documents are built here.

mod body;
mod caller;
mod classes;
mod health;
mod keys;
mod list;
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

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("/healthz", web::get().to(health::healthz))
        .route("/readyz", web::get().to(health::readyz))
        .route("/metrics", web::get().to(health::metrics))
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
        .route("/v1/keys", web::get().to(list::list))
        .service(
            web::scope("/v1/operation-classes/{operation}")
                .route("", web::get().to(classes::get))
                .route("", web::put().to(classes::put))
                .route("", web::delete().to(classes::delete)),
        );
}

pub use health::not_found;
