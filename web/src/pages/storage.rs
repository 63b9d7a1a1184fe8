//! Storage: how many records this tenant keeps, per class and state — hot
//! (outcome in the database) or archived (outcome in a segment, a routing
//! entry in the database) — and how far behind the tiering and cleanup
//! workers are for this tenant.

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
    archived: String,
    expired: String,
    tiering_lag: String,
    cleanup_lag: String,
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
        HotState::Completed => "Completed (hot)",
        HotState::Archived => "Completed (archived)",
        HotState::Expired => "Past window",
    }
}

/// `GET /dashboard/storage`.
pub async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, PageError> {
    let hot = state.engine.hot_counts(&session.tenant).await?;
    const COLUMNS: usize = HotState::ALL.len();
    let column_of = |state: HotState| HotState::ALL.iter().position(|s| *s == state);
    let mut by_class: BTreeMap<&str, [i64; COLUMNS]> = BTreeMap::new();
    for h in &hot {
        let column = column_of(h.state).unwrap_or(0);
        by_class.entry(&h.operation).or_default()[column] += h.count;
    }
    // How long the oldest record due has waited, across classes.
    let waited =
        |since: fn(&idemkey_api::store::HotCount) -> Option<chrono::DateTime<chrono::Utc>>| {
            hot.iter()
                .filter_map(|h| since(h).map(|t| (t, h.observed_at)))
                .min()
                .map_or_else(
                    || "none waiting".to_owned(),
                    |(t, now)| format::age_at(t, now),
                )
        };
    let tiering_lag = waited(|h| h.tier_due_since);
    let cleanup_lag = waited(|h| h.expired_since);
    let mut totals = [0i64; COLUMNS];
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
        archived: format::count(column_of(HotState::Archived).map_or(0, |c| totals[c])),
        expired: format::count(column_of(HotState::Expired).map_or(0, |c| totals[c])),
        tiering_lag,
        cleanup_lag,
    };
    Ok(render(StatusCode::OK, &page))
}
