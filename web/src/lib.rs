//! The tenant dashboard (SPEC section 8), served by the same `idemkey` binary
//! beside the JSON API.
//!
//! Server-rendered HTML from askama templates, one stylesheet embedded with
//! rust-embed, and no JavaScript at all, so every page and form works with
//! scripting off. What it guarantees:
//!
//! - **The tenant comes from the session only**, and the session only from a
//!   token the API's own [`Verifier`](idemkey_api::auth::Verifier) accepted
//!   (see [`session`]). No page takes a tenant from the URL or a form.
//! - **Every form is a POST carrying a CSRF token** bound to the session (or,
//!   for sign-in, to a pre-session cookie); see [`csrf`].
//! - **Admin actions are checked on the server**: a viewer who forges the
//!   resolve form gets 403, not a hidden button.
//! - **Strict headers on every page**: a Content-Security-Policy that allows
//!   only our own stylesheet, `nosniff`, no referrer, no framing, no caching
//!   of tenant data, and HSTS over TLS (see [`security`]).
//!
//! The dashboard reuses the API's application state (engine, store, usage
//! counts, verifier); `web` depends on `api`, never the reverse.

mod assets;
pub mod csrf;
mod error;
mod format;
mod pages;
mod render;
pub mod security;
pub mod session;

use actix_web::middleware::from_fn;
use actix_web::web::{self, ServiceConfig};
use idemkey_api::config::Config;
use secrecy::ExposeSecret;

/// Mounts the dashboard's routes beside the API, with its session keys
/// (`IDEMKEY_SESSION_SECRET`).
pub fn mount(cfg: &mut ServiceConfig, config: &Config) {
    let secrets: Vec<Vec<u8>> = (config.session_secrets.iter())
        .map(|secret| secret.expose_secret().to_vec())
        .collect();
    cfg.app_data(web::Data::new(session::Keys::from_secrets(&secrets)))
        .service(
            web::scope("/static")
                .wrap(security::headers())
                .wrap(from_fn(security::hsts))
                .route("/{file}", web::get().to(assets::serve)),
        )
        .service(
            web::scope("/dashboard")
                .wrap(security::headers())
                .wrap(from_fn(security::hsts))
                .configure(pages::configure),
        );
}
