//! `/healthz`: the process answers. `/readyz`: the database answers too.

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

pub async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NoRoute)
}
