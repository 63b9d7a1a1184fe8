//! `/healthz`: the process answers. `/readyz`: the database answers too.
//! (`/metrics` is in metrics.rs.)

use actix_web::{get, web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::openapi::schemas::{OkWord, ReadyWord};
use super::AppState;
use crate::engine::Refusal;
use crate::error::ApiError;

/// The process answers.
#[derive(Serialize, ToSchema)]
#[schema(as = Health)]
struct Healthy {
    #[schema(inline)]
    status: OkWord,
}

/// The database answers.
#[derive(Serialize, ToSchema)]
#[schema(as = Ready)]
struct Ready {
    #[schema(inline)]
    status: ReadyWord,
}

crate::problems!(
    /// What readiness answers when the database does not.
    ReadyProblems: Unavailable
);

/// Liveness
///
/// No token. Always 200 while the process answers.
#[utoipa::path(
    tag = "operations",
    operation_id = "healthz",
    security(),
    responses((status = 200, description = "The process answers.", body = Healthy)),
)]
#[get("/healthz")]
pub async fn healthz() -> HttpResponse {
    HttpResponse::Ok().json(Healthy {
        status: OkWord::Word,
    })
}

/// `/readyz` answers within this, ready or not: a readiness probe's
/// default timeout is one second, and a database that takes longer than
/// this to answer `select 1` is not one to send traffic to.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_millis(900);

/// Readiness
///
/// No token. 200 once the database answers a `select 1` within 900 ms;
/// otherwise 503 `unavailable`.
#[utoipa::path(
    tag = "operations",
    operation_id = "readyz",
    security(),
    responses((status = 200, description = "The database answers.", body = Ready), ReadyProblems),
)]
#[get("/readyz")]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    match tokio::time::timeout(READY_WITHIN, state.engine.store.ping()).await {
        Ok(answer) => answer?,
        Err(_) => {
            tracing::warn!("the database did not answer /readyz's ping in {READY_WITHIN:?}");
            return Err(Refusal::Unavailable.into());
        }
    }
    Ok(HttpResponse::Ok().json(Ready {
        status: ReadyWord::Word,
    }))
}

pub async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NoRoute)
}
