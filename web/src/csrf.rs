//! CSRF tokens: every dashboard form is a POST with a hidden `csrf` field.
//!
//! - With a session, the token is `HMAC(key, "csrf", session id)`: a
//!   synchronizer token that needs no storage, because the session id is
//!   inside the signed session cookie. Another site can neither read it nor
//!   compute it.
//! - Before sign-in there is no session, so the sign-in form is protected by
//!   a signed double submit: a random nonce in an `HttpOnly`, `SameSite=Strict`
//!   cookie, and `HMAC(key, "signin", nonce)` in the form. Over TLS that
//!   cookie is `__Host-idemkey_signin` (`Secure`, `Path=/`), like the
//!   session's.
//!
//! Tokens are compared in constant time (see [`Keys::verify`]).

use actix_web::cookie::{time, Cookie, SameSite};
use actix_web::HttpRequest;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

use crate::security::is_tls;
use crate::session::{Keys, Session};

/// The form field every form carries.
pub const FIELD: &str = "csrf";
/// The pre-session cookie of the sign-in form, over plain HTTP.
pub const SIGN_IN_COOKIE: &str = "idemkey_signin";
/// The same over TLS: the `__Host-` prefix needs `Secure` and `Path=/`.
pub const SECURE_SIGN_IN_COOKIE: &str = "__Host-idemkey_signin";

/// The sign-in cookie's name and path for this request's scheme.
fn sign_in_cookie(req: &HttpRequest) -> (&'static str, &'static str) {
    if is_tls(req) {
        (SECURE_SIGN_IN_COOKIE, "/")
    } else {
        (SIGN_IN_COOKIE, "/dashboard")
    }
}

/// The token for forms shown inside `session`.
pub fn session_token(keys: &Keys, session: &Session) -> String {
    keys.tag(&["csrf", &session.id])
}

pub fn session_token_ok(keys: &Keys, session: &Session, token: &str) -> bool {
    keys.verify(&["csrf", &session.id], token)
}

/// The sign-in nonce this browser already has, or a new one and the cookie
/// that carries it.
pub fn sign_in_nonce(req: &HttpRequest) -> (String, Option<Cookie<'static>>) {
    let (name, path) = sign_in_cookie(req);
    if let Some(c) = req.cookie(name).filter(|c| valid_nonce(c.value())) {
        return (c.value().to_owned(), None);
    }
    let nonce = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let cookie = Cookie::build(name, nonce.clone())
        .path(path)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(is_tls(req))
        .max_age(time::Duration::hours(1))
        .finish();
    (nonce, Some(cookie))
}

pub fn sign_in_token(keys: &Keys, nonce: &str) -> String {
    keys.tag(&["signin", nonce])
}

/// Whether the submitted sign-in form carries the token of this browser's
/// sign-in cookie.
pub fn sign_in_token_ok(keys: &Keys, req: &HttpRequest, token: &str) -> bool {
    req.cookie(sign_in_cookie(req).0)
        .filter(|c| valid_nonce(c.value()))
        .is_some_and(|c| keys.verify(&["signin", c.value()], token))
}

/// A cookie that deletes the sign-in cookie once it is spent.
pub fn sign_in_cookie_removal(req: &HttpRequest) -> Cookie<'static> {
    let (name, path) = sign_in_cookie(req);
    let mut spent = Cookie::build(name, "")
        .path(path)
        .http_only(true)
        .same_site(SameSite::Strict)
        .secure(is_tls(req))
        .finish();
    spent.make_removal();
    spent
}

fn valid_nonce(s: &str) -> bool {
    s.len() == 22 && URL_SAFE_NO_PAD.decode(s).is_ok()
}
