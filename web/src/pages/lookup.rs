//! The two forms of the keys page, each a POST with the session's CSRF
//! token (as every dashboard form is) answered with a 303 to the page it
//! asks for, so the browser's address and history hold a plain GET:
//!
//! - `POST /dashboard/lookup` (operation, key): checks the class and key as
//!   the API does and sends the browser to the key's page, which shows any
//!   key of the tenant in any state (an archived one's outcome read through)
//!   or "not found";
//! - `POST /dashboard/keys` (state, older_than, operation): the keys list
//!   narrowed to one class (checked by the list itself).

use actix_web::{web, HttpRequest, HttpResponse};
use idemkey_api::domain::{IdempotencyKey, OperationName};
use serde::Deserialize;

use super::{key_url, segment};
use crate::csrf;
use crate::error::PageError;
use crate::render::see_other;
use crate::session::{Keys, Session};

#[derive(Deserialize)]
pub struct LookupForm {
    csrf: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    key: String,
}

#[derive(Deserialize)]
pub struct NarrowForm {
    csrf: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    older_than: String,
    #[serde(default)]
    operation: String,
}

fn checked(req: &HttpRequest, session: &Session, token: &str) -> Result<(), PageError> {
    if csrf::session_token_ok(&Keys::of(req), session, token) {
        Ok(())
    } else {
        Err(PageError::Forbidden(
            "This form expired or did not come from this site. Reload the page and try again.",
        ))
    }
}

/// `POST /dashboard/lookup`.
pub async fn go(
    req: HttpRequest,
    session: Session,
    form: web::Form<LookupForm>,
) -> Result<HttpResponse, PageError> {
    checked(&req, &session, &form.csrf)?;
    let bad = |e: String| PageError::BadRequest(e);
    let operation = OperationName::parse(form.operation.trim()).map_err(|e| bad(e.to_string()))?;
    // The key exactly as typed: surrounding spaces are not visible ASCII and
    // so are refused, never silently trimmed into another key.
    let key = IdempotencyKey::parse(&form.key).map_err(|e| bad(e.to_string()))?;
    Ok(see_other(&key_url(operation.as_str(), key.as_str())))
}

/// `POST /dashboard/keys`.
pub async fn narrow(
    req: HttpRequest,
    session: Session,
    form: web::Form<NarrowForm>,
) -> Result<HttpResponse, PageError> {
    checked(&req, &session, &form.csrf)?;
    let mut location = format!("/dashboard/keys?state={}", segment(&form.state));
    for (name, value) in [
        ("older_than", &form.older_than),
        ("operation", &form.operation),
    ] {
        let value = value.trim();
        if !value.is_empty() {
            location.push_str(&format!("&{name}={}", segment(value)));
        }
    }
    Ok(see_other(&location))
}
