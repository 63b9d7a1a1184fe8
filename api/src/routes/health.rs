//! `/healthz`: the process answers. `/readyz`: the database answers too.
//! `/metrics`: Prometheus exposition (OpenMetrics text), no token needed —
//! it carries counts only, never a tenant or a key.

use actix_web::{web, HttpResponse};

use super::AppState;
use crate::error::ApiError;

pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(serde_json::json!({"status": "ok"}))
}

pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    state.engine.store.ping().await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({"status": "ready"})))
}

pub async fn metrics(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(state.engine.metrics.encode())
}

pub async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NoRoute)
}
