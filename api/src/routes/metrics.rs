//! `GET /metrics`: Prometheus exposition (OpenMetrics text).
//!
//! The counts span every tenant (never naming one, nor a key), so they are
//! the operator's, not a tenant's:
//!
//! - on the API listener, a token with the `metrics` role is required
//!   (401 without a token, 403 without the role; `admin` does not imply
//!   it);
//! - `IDEMKEY_METRICS_LISTEN` opens a second listener, meant for a private
//!   address (the pod network, a loopback for a sidecar), that serves
//!   `/metrics` and nothing else, without credentials. That is what
//!   Prometheus should scrape.

use actix_web::{get, web, App, HttpResponse, HttpServer};

use super::caller::{role_names, Caller, Scraper};
use super::AppState;
use crate::error::ApiError;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

crate::problems!(
    /// What `/metrics` on the API listener can refuse with.
    ScrapeProblems: Unauthorized, Forbidden, RateLimited
);

/// Prometheus metrics
///
/// Role: `metrics` (and no other: `admin` does not imply it). OpenMetrics
/// text exposition; counts only, never a tenant or a key, but across every
/// tenant, hence its own role. The operator may also open a separate
/// listener (`IDEMKEY_METRICS_LISTEN`, a private address) that serves this
/// without credentials, for Prometheus. The metrics are listed in
/// `docs/operations.md`.
#[utoipa::path(
    tag = "operations",
    operation_id = "metrics",
    responses(
        (status = 200, description = "The metrics.", content_type = "application/openmetrics-text", body = String),
        ScrapeProblems,
    ),
    extensions(("x-roles" = json!(role_names::<Scraper>()))),
)]
#[get("/metrics")]
pub async fn scrape(
    _: Caller<Scraper>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    Ok(exposition(&state))
}

/// `/metrics` on the private listener: no credentials.
async fn open(state: web::Data<AppState>) -> HttpResponse {
    exposition(&state)
}

fn exposition(state: &AppState) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(CONTENT_TYPE)
        .body(state.engine.metrics.encode())
}

/// The private listener's server: `/metrics` only (anything else is the
/// usual problem+json 404), on one worker.
pub fn private_server(
    state: web::Data<AppState>,
    listener: std::net::TcpListener,
) -> std::io::Result<actix_web::dev::Server> {
    Ok(HttpServer::new(move || {
        App::new()
            .wrap(actix_web::middleware::from_fn(
                super::request_id::middleware,
            ))
            .app_data(state.clone())
            .route("/metrics", web::get().to(open))
            .default_service(web::to(super::not_found))
    })
    .workers(1)
    .listen(listener)?
    .run())
}
