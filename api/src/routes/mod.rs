//! HTTP routes: thin handlers that extract, call the engine, and map the
//! answer to HTTP. All JSON answers and problem documents are built here.

mod body;
mod caller;
mod health;
mod keys;
pub mod view;

use std::sync::Arc;

use actix_web::web;

pub use caller::Caller;

use crate::auth::Verifier;
use crate::engine::Engine;

/// What every handler can reach.
pub struct AppState {
    pub engine: Engine,
    pub verifier: Arc<Verifier>,
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
                .route("/heartbeat", web::post().to(keys::heartbeat)),
        );
}

pub use health::not_found;
