//! Storage: how many records this tenant keeps, per class and state — hot
//! (outcome in the database) or archived (outcome in a segment, a routing
//! entry in the database) — and how far behind the tiering and cleanup
//! workers are for this tenant; and what it stores against the quota the
//! operator set for it.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::engine::QuotaUsage;
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
    quota: QuotaPanel,
}

/// What the tenant stores against its quota, every figure formatted.
struct QuotaPanel {
    /// "12 of 100", or "12 (no limit)".
    keys: String,
    /// The same for outcome bytes, database and archive together.
    bytes: String,
    /// "measured 2026-…", or why there is no figure.
    measured: String,
    /// New keys are refused now.
    refused: bool,
}

fn quota_panel(q: &QuotaUsage) -> QuotaPanel {
    let against = |stored: Option<String>, limit: Option<u64>, unit: fn(u64) -> String| {
        let stored = stored.unwrap_or_else(|| "not measured".to_owned());
        match limit {
            Some(l) => format!("{stored} of {}", unit(l)),
            None => format!("{stored} (no limit)"),
        }
    };
    let count = |n: u64| format::count(i64::try_from(n).unwrap_or(i64::MAX));
    let bytes = |n: u64| format::bytes(usize::try_from(n).unwrap_or(usize::MAX));
    let measured = match (q.measured_at, q.limits.is_unlimited()) {
        (Some(t), _) => format!("Measured {}.", format::when(t)),
        (None, true) => "No quota applies to this tenant, so its storage is not measured.".into(),
        (None, false) => "Not measured yet: the quota worker measures on its next pass.".into(),
    };
    QuotaPanel {
        keys: against(q.stored.map(|s| count(s.keys)), q.limits.max_keys, count),
        bytes: against(
            q.stored.map(|s| bytes(s.total_bytes())),
            q.limits.max_outcome_bytes,
            bytes,
        ),
        measured,
        refused: q.refused,
    }
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
    let quota = state.engine.quota_usage(&session.tenant).await?;
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
        quota: quota_panel(&quota),
    };
    Ok(render(StatusCode::OK, &page))
}
