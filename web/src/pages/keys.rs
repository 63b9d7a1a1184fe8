//! The list of stuck keys: expired leases, quarantined keys and
//! long-running claims, filtered by state, class and age. One key's page is
//! in `key.rs`.

use std::collections::HashSet;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::domain::duration::{format_duration, parse_duration};
use idemkey_api::domain::{OperationName, RecordState, ScopedKey};
use idemkey_api::routes::AppState;
use idemkey_api::store::{HotState, KeyRecord, ListQuery, ListState};
use serde::Deserialize;

use super::{key_url, segment, Layout, Tab};
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};

/// Rows shown per list (newest first).
const SHOWN: u32 = 100;
/// "Long in progress" unless the page is asked for another threshold.
const DEFAULT_OLDER_THAN: Duration = Duration::from_secs(300);

#[derive(Deserialize)]
pub struct ListParams {
    state: Option<String>,
    operation: Option<String>,
    older_than: Option<String>,
    pub(super) done: Option<String>,
}

#[derive(Template)]
#[template(path = "keys.html")]
struct KeysPage {
    layout: Layout,
    notice: Option<&'static str>,
    operation: Option<String>,
    tabs: Vec<Tab>,
    thresholds: Vec<Tab>,
    show_thresholds: bool,
    older_than: String,
    rows: Vec<KeyRow>,
    truncated: bool,
}

pub(super) struct KeyRow {
    operation: String,
    key: String,
    href: String,
    pub(super) state: &'static str,
    pub(super) state_label: &'static str,
    attempt: i32,
    age: String,
    pub(super) note: String,
}

/// Which stuck keys a list shows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Filter {
    All,
    LeaseExpired,
    Quarantined,
    InProgress,
}

impl Filter {
    fn parse(s: Option<&str>) -> Option<Self> {
        match s {
            None | Some("") | Some("all") => Some(Self::All),
            Some("lease_expired") => Some(Self::LeaseExpired),
            Some("quarantined") => Some(Self::Quarantined),
            Some("in_progress") => Some(Self::InProgress),
            Some(_) => None,
        }
    }

    fn param(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::LeaseExpired => "lease_expired",
            Self::Quarantined => "quarantined",
            Self::InProgress => "in_progress",
        }
    }

    /// The listings that make up this filter.
    fn queries(self, older_than: Duration) -> Vec<(ListState, Option<Duration>)> {
        let expired = (ListState::LeaseExpired, None);
        let quarantined = (ListState::Quarantined, None);
        let long = (ListState::InProgress, Some(older_than));
        match self {
            Self::All => vec![expired, quarantined, long],
            Self::LeaseExpired => vec![expired],
            Self::Quarantined => vec![quarantined],
            Self::InProgress => vec![long],
        }
    }
}

/// `GET /dashboard/keys`.
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    q: web::Query<ListParams>,
) -> Result<HttpResponse, PageError> {
    let filter = Filter::parse(q.state.as_deref()).ok_or_else(|| {
        PageError::BadRequest("state must be all, lease_expired, quarantined or in_progress".into())
    })?;
    let operation = match q.operation.as_deref().filter(|o| !o.is_empty()) {
        Some(o) => Some(OperationName::parse(o).map_err(|e| PageError::BadRequest(e.to_string()))?),
        None => None,
    };
    let older_than = match q.older_than.as_deref() {
        None => DEFAULT_OLDER_THAN,
        Some(s) => parse_duration(s)
            .filter(|d| *d <= ListQuery::MAX_OLDER_THAN)
            .ok_or_else(|| {
                PageError::BadRequest(
                    "older_than must be a duration such as 15m, at most 36500d".into(),
                )
            })?,
    };

    let mut seen = HashSet::new();
    let mut found: Vec<(ScopedKey, KeyRecord)> = Vec::new();
    for (list_state, older) in filter.queries(older_than) {
        let query = ListQuery {
            state: Some(list_state),
            operation: operation.clone(),
            older_than: older,
            limit: SHOWN,
            after: None,
        };
        for (k, r) in state.engine.list(&session.tenant, &query).await? {
            if seen.insert((k.operation.as_str().to_owned(), k.key.as_str().to_owned())) {
                found.push((k, r));
            }
        }
    }
    found.sort_by_key(|(_, r)| std::cmp::Reverse(r.created_at));
    let truncated = found.len() > SHOWN as usize;
    found.truncate(SHOWN as usize);
    let rows = found.iter().map(|(k, r)| row(k, r)).collect();

    let hot = state.engine.hot_counts(&session.tenant).await?;
    let count = |s: HotState| -> i64 {
        hot.iter()
            .filter(|h| h.state == s)
            .filter(|h| operation.as_ref().is_none_or(|o| o.as_str() == h.operation))
            .map(|h| h.count)
            .sum()
    };
    let op_param = operation
        .as_ref()
        .map(|o| format!("&operation={}", segment(o.as_str())))
        .unwrap_or_default();
    let older = format_duration(older_than);
    let tab = |f: Filter, label: String| Tab {
        label,
        href: format!(
            "/dashboard/keys?state={}{op_param}&older_than={older}",
            f.param()
        ),
        current: f == filter,
    };
    let tabs = vec![
        tab(Filter::All, "All stuck".into()),
        tab(
            Filter::LeaseExpired,
            format!("Lease expired ({})", count(HotState::LeaseExpired)),
        ),
        tab(
            Filter::Quarantined,
            format!("Quarantined ({})", count(HotState::Quarantined)),
        ),
        tab(Filter::InProgress, format!("In progress over {older}")),
    ];
    let thresholds = ["1m", "5m", "15m", "1h", "1d"]
        .into_iter()
        .map(|t| Tab {
            label: t.to_owned(),
            href: format!(
                "/dashboard/keys?state={}{op_param}&older_than={t}",
                filter.param()
            ),
            current: parse_duration(t) == Some(older_than),
        })
        .collect();
    let notice = match q.done.as_deref() {
        Some("released") => Some("The key was released: the next claim of it starts afresh."),
        _ => None,
    };
    let page = KeysPage {
        layout: Layout::new("Stuck keys", "keys", &session, &Keys::of(&req)),
        notice,
        operation: operation.map(|o| o.as_str().to_owned()),
        tabs,
        thresholds,
        show_thresholds: matches!(filter, Filter::All | Filter::InProgress),
        older_than: older,
        rows,
        truncated,
    };
    Ok(render(StatusCode::OK, &page))
}

/// A key's row in the list; its page shows the same state and note.
pub(super) fn row(k: &ScopedKey, r: &KeyRecord) -> KeyRow {
    let now = r.observed_at;
    let (state, state_label, note) = match r.state {
        RecordState::Quarantined => (
            "quarantined",
            "Quarantined",
            r.quarantine_reason.clone().unwrap_or_default(),
        ),
        RecordState::InProgress if r.lease_expires_at <= now => (
            "lease_expired",
            "Lease expired",
            format!(
                "lease ran out {} ago",
                format::age_at(r.lease_expires_at, now)
            ),
        ),
        RecordState::InProgress => (
            "in_progress",
            "In progress",
            format!("lease ends in {}", format::age_at(now, r.lease_expires_at)),
        ),
        RecordState::Completed => ("completed", "Completed", String::new()),
    };
    KeyRow {
        operation: k.operation.as_str().to_owned(),
        key: k.key.as_str().to_owned(),
        href: key_url(k.operation.as_str(), k.key.as_str()),
        state,
        state_label,
        attempt: r.attempt,
        age: format::age_at(r.created_at, now),
        note,
    }
}
