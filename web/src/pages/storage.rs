//! Storage: how many records this tenant keeps in the database, per class
//! and state. The archive tier, tiering lag and cleanup lag are shown as not
//! built yet rather than as invented numbers.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::routes::AppState;
use idemkey_api::store::HotState;

use super::Layout;
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};

#[derive(Template)]
#[template(path = "storage.html")]
struct StoragePage {
    layout: Layout,
    headings: Vec<&'static str>,
    rows: Vec<StorageRow>,
    totals: Vec<String>,
    total: String,
    expired: String,
}

struct StorageRow {
    name: String,
    counts: Vec<String>,
    total: String,
}

fn heading(s: HotState) -> &'static str {
    match s {
        HotState::InProgress => "In progress",
        HotState::LeaseExpired => "Lease expired",
        HotState::Quarantined => "Quarantined",
        HotState::Completed => "Completed",
        HotState::Expired => "Past window",
    }
}

/// `GET /dashboard/storage`.
pub async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, PageError> {
    let hot = state
        .engine
        .store
        .hot_counts(&session.tenant)
        .await
        .map_err(|_| PageError::Unavailable)?;
    let mut by_class: BTreeMap<&str, [i64; 5]> = BTreeMap::new();
    for h in &hot {
        let column = HotState::ALL
            .iter()
            .position(|s| *s == h.state)
            .unwrap_or(0);
        by_class.entry(&h.operation).or_default()[column] += h.count;
    }
    let mut totals = [0i64; 5];
    let rows = by_class
        .into_iter()
        .map(|(name, counts)| {
            for (t, c) in totals.iter_mut().zip(counts) {
                *t += c;
            }
            StorageRow {
                name: name.to_owned(),
                counts: counts.iter().map(|c| format::count(*c)).collect(),
                total: format::count(counts.iter().sum()),
            }
        })
        .collect();
    let page = StoragePage {
        layout: Layout::new("Storage", "storage", &session, &Keys::of(&req)),
        headings: HotState::ALL.into_iter().map(heading).collect(),
        rows,
        totals: totals.iter().map(|c| format::count(*c)).collect(),
        total: format::count(totals.iter().sum()),
        expired: format::count(totals[4]),
    };
    Ok(render(StatusCode::OK, &page))
}
