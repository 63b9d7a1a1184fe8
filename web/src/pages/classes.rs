//! Operation classes: every class this tenant has used or holds a policy
//! for, and whether it has a policy of its own. Admins also see the policy
//! the engine applies to each, an edit link per class and a way to set a
//! policy for a class not used yet (see `class_policy`); viewers do not see
//! the settings, as the API refuses them policy reads.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use chrono::Utc;
use idemkey_api::domain::duration::format_duration;
use idemkey_api::domain::policy::LeaseExpiry;
use idemkey_api::domain::{OperationName, Policy};
use idemkey_api::routes::AppState;
use serde::Deserialize;

use super::{segment, Layout};
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};

#[derive(Template)]
#[template(path = "classes.html")]
struct ClassesPage {
    layout: Layout,
    notice: Option<String>,
    is_admin: bool,
    classes: Vec<ClassRow>,
}

struct ClassRow {
    name: String,
    keys_href: String,
    edit_href: String,
    /// True when the class has no stored policy.
    is_default: bool,
    /// When its stored policy was last set ("" for the defaults).
    updated: String,
    replay_window: String,
    hot_retention: String,
    lease: String,
    max_lease: String,
    max_wait: String,
    max_outcome: String,
    on_lease_expiry: &'static str,
    fingerprint: String,
}

#[derive(Deserialize)]
pub struct ClassesQuery {
    done: Option<String>,
    operation: Option<String>,
}

/// `GET /dashboard/classes`.
pub async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    query: web::Query<ClassesQuery>,
) -> Result<HttpResponse, PageError> {
    let engine = &state.engine;
    let week_ago = Utc::now() - Duration::from_secs(7 * 86400);
    let used =
        (engine.usage_series(&session.tenant, week_ago, Duration::from_secs(7 * 86400))).await?;
    let hot = engine.hot_counts(&session.tenant).await?;
    // Read from the store, not the node's policy cache: an admin who just
    // saved a policy sees it here at once.
    let stored: BTreeMap<String, _> = state
        .engine
        .stored_operation_classes(&session.tenant)
        .await
        .map_err(|_| PageError::Unavailable)?
        .into_iter()
        .map(|(op, class)| (op.as_str().to_owned(), class))
        .collect();
    let names: BTreeSet<&str> = used
        .iter()
        .map(|u| u.operation.as_str())
        .chain(hot.iter().map(|h| h.operation.as_str()))
        .chain(stored.keys().map(String::as_str))
        .collect();
    let defaults = Policy::default();
    let mut classes = Vec::new();
    for name in names {
        if OperationName::parse(name).is_err() {
            continue;
        }
        let class = stored.get(name);
        let p = class.map(|c| c.policy.as_ref()).unwrap_or(&defaults);
        classes.push(ClassRow {
            name: name.to_owned(),
            keys_href: format!("/dashboard/keys?operation={}", segment(name)),
            edit_href: class_url(name),
            is_default: class.is_none(),
            updated: class
                .and_then(|c| c.updated_at)
                .map(format::when)
                .unwrap_or_default(),
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
            fingerprint: fingerprint(p),
        });
    }
    let done = query
        .operation
        .as_deref()
        .and_then(|o| OperationName::parse(o).ok());
    let notice = match (query.done.as_deref(), done) {
        (Some("saved"), Some(op)) => Some(format!(
            "Saved the policy of {op}. Keys claimed from now on use it; keys already claimed keep the window they were given."
        )),
        (Some("reset"), Some(op)) => Some(format!("{op} uses the default policy again.")),
        _ => None,
    };
    let page = ClassesPage {
        layout: Layout::new("Operation classes", "classes", &session, &Keys::of(&req)),
        notice,
        is_admin: session.is_admin(),
        classes,
    };
    Ok(render(StatusCode::OK, &page))
}

/// The dashboard URL of a class's policy editor.
pub fn class_url(operation: &str) -> String {
    format!("/dashboard/classes/{}", segment(operation))
}

/// The fingerprint rules in a few words.
fn fingerprint(p: &Policy) -> String {
    let rules = &p.fingerprint;
    if rules.include.is_empty() && rules.exclude.is_empty() && rules.decimal_fields.is_empty() {
        return "the whole request".to_owned();
    }
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
}
