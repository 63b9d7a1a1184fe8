//! Operation classes: every class this tenant has used, with the policy the
//! engine applies to it.
//!
//! Read-only in this build: there is no store of per-class policies yet, so
//! the engine answers the defaults for every class. The edit form belongs
//! here once `PUT /v1/operation-classes/{operation}` exists.

use std::collections::BTreeSet;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use chrono::Utc;
use idemkey_api::domain::duration::format_duration;
use idemkey_api::domain::policy::LeaseExpiry;
use idemkey_api::domain::OperationName;
use idemkey_api::routes::AppState;

use super::{segment, Layout};
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};

#[derive(Template)]
#[template(path = "classes.html")]
struct ClassesPage {
    layout: Layout,
    classes: Vec<ClassRow>,
}

struct ClassRow {
    name: String,
    keys_href: String,
    replay_window: String,
    hot_retention: String,
    lease: String,
    max_lease: String,
    max_wait: String,
    max_outcome: String,
    on_lease_expiry: &'static str,
    fingerprint: String,
}

/// `GET /dashboard/classes`.
pub async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, PageError> {
    let store = &state.engine.store;
    let week_ago = Utc::now() - Duration::from_secs(7 * 86400);
    let used = store
        .usage_series(&session.tenant, week_ago, Duration::from_secs(7 * 86400))
        .await
        .map_err(|_| PageError::Unavailable)?;
    let hot = store
        .hot_counts(&session.tenant)
        .await
        .map_err(|_| PageError::Unavailable)?;
    let names: BTreeSet<&str> = used
        .iter()
        .map(|u| u.operation.as_str())
        .chain(hot.iter().map(|h| h.operation.as_str()))
        .collect();
    let mut classes = Vec::new();
    for name in names {
        let Ok(operation) = OperationName::parse(name) else {
            continue;
        };
        let p = state
            .engine
            .policy(&session.tenant, &operation)
            .await
            .map_err(|_| PageError::Unavailable)?;
        let rules = &p.fingerprint;
        let fingerprint = if rules.include.is_empty()
            && rules.exclude.is_empty()
            && rules.decimal_fields.is_empty()
        {
            "the whole request".to_owned()
        } else {
            let list = |v: &[String]| {
                if v.is_empty() {
                    "—".to_owned()
                } else {
                    v.join(" ")
                }
            };
            format!(
                "include {}; exclude {}; decimals {}",
                list(&rules.include),
                list(&rules.exclude),
                list(&rules.decimal_fields)
            )
        };
        classes.push(ClassRow {
            name: name.to_owned(),
            keys_href: format!("/dashboard/keys?operation={}", segment(name)),
            replay_window: format_duration(p.replay_window),
            hot_retention: format_duration(p.tier_after()),
            lease: format_duration(p.lease),
            max_lease: format_duration(p.max_lease),
            max_wait: format_duration(p.max_wait),
            max_outcome: format::bytes(p.max_outcome_bytes),
            on_lease_expiry: match p.on_lease_expiry {
                LeaseExpiry::Takeover => "take over",
                LeaseExpiry::Quarantine => "quarantine",
            },
            fingerprint,
        });
    }
    let page = ClassesPage {
        layout: Layout::new("Operation classes", "classes", &session, &Keys::of(&req)),
        classes,
    };
    Ok(render(StatusCode::OK, &page))
}
