//! `/healthz`: the process answers. `/readyz`: the database answers too.
//! (`/metrics` is in metrics.rs.)

use actix_web::{web, HttpResponse};

use super::AppState;
use crate::engine::Refusal;
use crate::error::ApiError;

pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"status": "ok"}))
}

/// `/readyz` answers within this, ready or not: a readiness probe's
/// default timeout is one second, and a database that takes longer than
/// this to answer `select 1` is not one to send traffic to.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_millis(900);

pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match tokio::time::timeout(READY_WITHIN, state.engine.store.ping()).await {
        Ok(answer) => answer?,
        Err(_) => {
            tracing::warn!("the database did not answer /readyz's ping in {READY_WITHIN:?}");
            return Err(Refusal::Unavailable.into());
        }
    }
    Ok(HttpResponse::Ok().json(serde_json::json!({"status": "ready"})))
}

pub async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NoRoute)
}
