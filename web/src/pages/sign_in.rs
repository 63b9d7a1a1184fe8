//! Signing in (a pasted viewer or admin token, checked by the API's own
//! verifier, exchanged for a session cookie) and signing out.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::auth::Role;
use idemkey_api::routes::AppState;
use serde::Deserialize;

use super::Layout;
use crate::csrf;
use crate::error::PageError;
use crate::render::{render, see_other};
use crate::session::{token_expiry, Keys, Session};

#[derive(Template)]
#[template(path = "sign_in.html")]
struct SignInPage {
    layout: Layout,
    csrf: String,
    error: Option<&'static str>,
    notice: Option<&'static str>,
}

#[derive(Deserialize)]
pub struct SignInQuery {
    signed_out: Option<String>,
}

/// `GET /dashboard/sign-in`.
pub async fn form(req: HttpRequest, q: web::Query<SignInQuery>) -> HttpResponse {
    let notice = q
        .signed_out
        .is_some()
        .then_some("You are signed out. Paste a token to sign in again.");
    page(&req, StatusCode::OK, None, notice)
}

fn page(
    req: &HttpRequest,
    status: StatusCode,
    error: Option<&'static str>,
    notice: Option<&'static str>,
) -> HttpResponse {
    let keys = Keys::of(req);
    let (nonce, cookie) = csrf::sign_in_nonce(req);
    let mut response = render(
        status,
        &SignInPage {
            layout: Layout::bare("Sign in"),
            csrf: csrf::sign_in_token(&keys, &nonce),
            error,
            notice,
        },
    );
    if let Some(cookie) = cookie {
        // A fresh cookie always goes out on a freshly rendered form.
        let _ = response.add_cookie(&cookie);
    }
    response
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    token: String,
}

/// `POST /dashboard/sign-in`: a valid viewer or admin token starts a session.
pub async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: web::Form<SignInForm>,
) -> HttpResponse {
    let keys = Keys::of(&req);
    if !csrf::sign_in_token_ok(&keys, &req, &form.csrf) {
        return page(
            &req,
            StatusCode::FORBIDDEN,
            Some("This sign-in form expired or did not come from this site. Try again."),
            None,
        );
    }
    let token = form.token.trim();
    if token.is_empty() {
        return page(
            &req,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("Paste a token to sign in."),
            None,
        );
    }
    let principal = match state.verifier.verify(token) {
        Ok(p) => p,
        Err(e) => {
            tracing::debug!(reason = %e, "dashboard sign-in refused");
            return page(
                &req,
                StatusCode::UNAUTHORIZED,
                Some("That token was not accepted: it is malformed, expired, or not signed by a key this server trusts."),
                None,
            );
        }
    };
    if !principal.can(&[Role::Viewer]) {
        return page(
            &req,
            StatusCode::FORBIDDEN,
            Some("That token has neither the viewer nor the admin role. Mint one with --roles viewer (or admin)."),
            None,
        );
    }
    let Some(exp) = token_expiry(token) else {
        return page(
            &req,
            StatusCode::UNAUTHORIZED,
            Some("That token has no expiry."),
            None,
        );
    };
    let session = Session::start(&principal, exp);
    if session.expires_at <= chrono::Utc::now().timestamp() {
        return page(
            &req,
            StatusCode::UNAUTHORIZED,
            Some("That token has expired."),
            None,
        );
    }
    let mut response = see_other("/dashboard");
    let _ = response.add_cookie(&session.cookie(&keys, &req));
    let _ = response.add_cookie(&csrf::sign_in_cookie_removal(&req));
    response
}

#[derive(Deserialize)]
pub struct SignOutForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /dashboard/sign-out`.
pub async fn sign_out(
    req: HttpRequest,
    session: Session,
    form: web::Form<SignOutForm>,
) -> Result<HttpResponse, PageError> {
    if !csrf::session_token_ok(&Keys::of(&req), &session, &form.csrf) {
        return Err(PageError::Forbidden(
            "This form expired or did not come from this site. Reload the page and try again.",
        ));
    }
    let mut response = see_other("/dashboard/sign-in?signed_out=1");
    let _ = response.add_cookie(&Session::removal(&req));
    Ok(response)
}
