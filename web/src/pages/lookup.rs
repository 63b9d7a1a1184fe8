//! `GET /dashboard/lookup?operation=&key=`: the look-up form of the keys
//! page. It checks the class and key as the API does and sends the browser
//! to the key's page (303), which shows any key of the tenant in any state
//! (an archived one's outcome read through) or "not found". A GET form, so
//! it needs no CSRF token: it changes nothing.

use actix_web::{web, HttpResponse};
use idemkey_api::domain::{IdempotencyKey, OperationName};
use serde::Deserialize;

use super::key_url;
use crate::error::PageError;
use crate::render::see_other;
use crate::session::Session;

#[derive(Deserialize)]
pub struct LookupParams {
    operation: Option<String>,
    key: Option<String>,
}

pub async fn go(_session: Session, q: web::Query<LookupParams>) -> Result<HttpResponse, PageError> {
    let bad = |e: String| PageError::BadRequest(e);
    let operation = q.operation.as_deref().unwrap_or_default().trim();
    let operation = OperationName::parse(operation).map_err(|e| bad(e.to_string()))?;
    // The key exactly as typed: surrounding spaces are not visible ASCII and
    // so are refused, never silently trimmed into another key.
    let key = IdempotencyKey::parse(q.key.as_deref().unwrap_or_default())
        .map_err(|e| bad(e.to_string()))?;
    Ok(see_other(&key_url(operation.as_str(), key.as_str())))
}
