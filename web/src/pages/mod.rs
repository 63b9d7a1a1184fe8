//! The dashboard's pages. Each handler reads as a few steps: the session
//! (the tenant comes from it and nothing else), a query through the engine
//! or store, a view model computed in Rust, and a template that only lays it
//! out.

mod chart;
mod class_policy;
mod classes;
mod key;
mod keys;
mod line_chart;
mod lookup;
mod overview;
mod rejections;
mod resolve;
mod sign_in;
mod storage;
mod webhooks;

use actix_web::web;

use crate::assets;
use crate::csrf;
use crate::session::{Keys, Session};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.route("", web::get().to(overview::page))
        .route("/", web::get().to(overview::page))
        .route("/sign-in", web::get().to(sign_in::form))
        .route("/sign-in", web::post().to(sign_in::submit))
        .route("/sign-out", web::post().to(sign_in::sign_out))
        .route("/keys", web::get().to(keys::list))
        .route("/keys", web::post().to(lookup::narrow))
        .route("/lookup", web::post().to(lookup::go))
        .route("/keys/{operation}/{key}", web::get().to(key::detail))
        .service(
            web::resource("/keys/{operation}/{key}/resolve")
                // An outcome may be as large as the API allows (8 MiB at most).
                .app_data(web::FormConfig::default().limit(9 * 1024 * 1024))
                .route(web::post().to(resolve::submit)),
        )
        .route("/classes", web::get().to(classes::page))
        .route("/classes", web::post().to(class_policy::create))
        // Before `{operation}`: `_` cannot start an operation name.
        .route("/classes/_new", web::get().to(class_policy::new))
        .route("/classes/{operation}", web::get().to(class_policy::edit))
        .route("/classes/{operation}", web::post().to(class_policy::submit))
        .route("/rejections", web::get().to(rejections::page))
        .route("/storage", web::get().to(storage::page))
        .route("/webhooks", web::get().to(webhooks::list))
        .route("/webhooks", web::post().to(webhooks::add))
        .route("/webhooks/{id}", web::get().to(webhooks::deliveries))
        .route("/webhooks/{id}/delete", web::post().to(webhooks::delete));
}

/// What the shared layout (`base.html`) shows around every page.
pub struct Layout {
    pub title: String,
    /// Which navigation entry is the current page (`""` for none).
    pub active: &'static str,
    pub user: Option<User>,
    pub css: String,
    pub icon: String,
}

/// A link in a row of tabs (a filter or a time range).
pub struct Tab {
    pub label: String,
    pub href: String,
    pub current: bool,
}

/// The signed-in user, as the header shows them.
pub struct User {
    pub tenant: String,
    pub role: &'static str,
    /// The CSRF token of this session's forms (sign-out is one).
    pub csrf: String,
}

impl Layout {
    /// The layout of a page inside a session.
    pub fn new(
        title: impl Into<String>,
        active: &'static str,
        session: &Session,
        keys: &Keys,
    ) -> Self {
        Self {
            user: Some(User {
                tenant: session.tenant.as_str().to_owned(),
                role: session.role_label(),
                csrf: csrf::session_token(keys, session),
            }),
            ..Self::bare(title)
        }
        .active(active)
    }

    /// The layout of a page shown without a session.
    pub fn bare(title: impl Into<String>) -> Self {
        Self {
            title: title.into(),
            active: "",
            user: None,
            css: assets::url("dashboard.css"),
            icon: assets::url("favicon.svg"),
        }
    }

    fn active(mut self, active: &'static str) -> Self {
        self.active = active;
        self
    }

    /// The session's CSRF token, for a page's own forms.
    pub fn csrf(&self) -> &str {
        self.user.as_ref().map(|u| u.csrf.as_str()).unwrap_or("")
    }
}

/// Percent-encodes a key (or class) for one path segment.
pub fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The dashboard URL of a key's detail page.
pub fn key_url(operation: &str, key: &str) -> String {
    format!("/dashboard/keys/{}/{}", segment(operation), segment(key))
}
