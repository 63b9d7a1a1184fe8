//! Recent rejections: the tenant's newest claims refused as `key_reused`
//! (the key was first used with a different request), per class, each with
//! the fields that differed — JSON pointers, never values. Every node adds
//! its refusals with its usage counts, so a refusal shows up here within a
//! flush (a few seconds).

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::domain::OperationName;
use idemkey_api::routes::AppState;
use idemkey_api::store::{Rejection, REJECTIONS_KEPT_PER_CLASS};
use serde::Deserialize;

use super::{key_url, segment, Layout, Tab};
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};

/// Rows shown (newest first).
const SHOWN: u32 = 100;

#[derive(Deserialize)]
pub struct RejectionsQuery {
    operation: Option<String>,
}

#[derive(Template)]
#[template(path = "rejections.html")]
struct RejectionsPage {
    layout: Layout,
    operation: Option<String>,
    tabs: Vec<Tab>,
    rows: Vec<RejectionRow>,
    /// How many refusals are kept per class.
    kept: u32,
}

struct RejectionRow {
    at: String,
    operation: String,
    key: String,
    href: String,
    /// The differing pointers, in order.
    fields: Vec<String>,
    /// More fields differ than are named.
    more: bool,
}

/// `GET /dashboard/rejections`.
pub async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    q: web::Query<RejectionsQuery>,
) -> Result<HttpResponse, PageError> {
    let operation = match q.operation.as_deref().filter(|o| !o.is_empty()) {
        Some(o) => Some(OperationName::parse(o).map_err(|e| PageError::BadRequest(e.to_string()))?),
        None => None,
    };
    let engine = &state.engine;
    let all = engine
        .recent_rejections(&session.tenant, None, SHOWN)
        .await?;
    let shown = match &operation {
        Some(op) => (engine.recent_rejections(&session.tenant, Some(op), SHOWN)).await?,
        None => all.clone(),
    };
    let mut classes: Vec<String> = all.iter().map(|r| r.operation.to_string()).collect();
    classes.extend(operation.iter().map(|o| o.to_string()));
    classes.sort();
    classes.dedup();
    let selected = operation.as_ref().map(|o| o.to_string());
    let tabs = std::iter::once(Tab {
        label: "All classes".to_owned(),
        href: "/dashboard/rejections".to_owned(),
        current: selected.is_none(),
    })
    .chain(classes.into_iter().map(|c| Tab {
        href: format!("/dashboard/rejections?operation={}", segment(&c)),
        current: selected.as_deref() == Some(c.as_str()),
        label: c,
    }))
    .collect();
    let page = RejectionsPage {
        layout: Layout::new("Rejected reuse", "rejections", &session, &Keys::of(&req)),
        operation: selected,
        tabs,
        rows: shown.iter().map(row).collect(),
        kept: REJECTIONS_KEPT_PER_CLASS,
    };
    Ok(render(StatusCode::OK, &page))
}

fn row(r: &Rejection) -> RejectionRow {
    let (fields, more) = match &r.mismatch {
        Some(m) => (m.pointers.clone(), m.truncated),
        None => (Vec::new(), false),
    };
    RejectionRow {
        at: format::when(r.at),
        operation: r.operation.to_string(),
        key: r.key.clone(),
        href: key_url(r.operation.as_str(), &r.key),
        fields,
        more,
    }
}
