//! The keys lists: stuck keys (expired leases, quarantined keys and
//! long-running claims) by default, or the keys of one state or of every
//! state, narrowed by class and age, a page of 100 at a time (newest
//! first, paged with the API's cursor). One key's page is in `key.rs`; the
//! look-up form on this page goes through `lookup.rs`.

mod filter;

use std::collections::HashSet;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::domain::duration::{format_duration, parse_duration};
use idemkey_api::domain::{RecordState, ScopedKey};
use idemkey_api::routes::AppState;
use idemkey_api::store::{HotState, KeyRecord, ListCursor};
use serde::Deserialize;

use super::{key_url, Layout, Tab};
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};
use filter::{Filter, Selection};

/// Rows shown per page (newest first).
const SHOWN: u32 = 100;

/// The ages offered as links.
const AGES: [&str; 5] = ["1m", "5m", "15m", "1h", "1d"];

#[derive(Deserialize)]
pub struct ListParams {
    state: Option<String>,
    operation: Option<String>,
    older_than: Option<String>,
    cursor: Option<String>,
    pub(super) done: Option<String>,
}

#[derive(Template)]
#[template(path = "keys.html")]
struct KeysPage {
    layout: Layout,
    heading: &'static str,
    notice: Option<&'static str>,
    operation: Option<String>,
    state_param: &'static str,
    older_than_param: String,
    tabs: Vec<Tab>,
    /// What the age links mean, or `None` when the list has no age.
    ages_label: Option<&'static str>,
    ages: Vec<Tab>,
    /// Stuck keys: an empty list means nothing is stuck.
    stuck: bool,
    older_than: String,
    rows: Vec<KeyRow>,
    newest: Option<String>,
    next: Option<String>,
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

/// `GET /dashboard/keys`.
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    q: web::Query<ListParams>,
) -> Result<HttpResponse, PageError> {
    let selection = Selection::parse(&q)?;
    let (found, more) = page(&state, &session, &selection).await?;
    let next = more.then(|| found.last()).flatten().map(|(k, r)| {
        let cursor = ListCursor::after(k, r).encode();
        selection.href(selection.filter, selection.older_than, Some(&cursor))
    });
    let newest = selection
        .after
        .as_ref()
        .map(|_| selection.href(selection.filter, selection.older_than, None));
    let rows = found.iter().map(|(k, r)| row(k, r)).collect();
    let tabs = tabs(&state, &session, &selection).await?;
    let notice = match q.done.as_deref() {
        Some("released") => Some("The key was released: the next claim of it starts afresh."),
        _ => None,
    };
    let stuck = matches!(
        selection.filter,
        Filter::Stuck | Filter::LeaseExpired | Filter::Quarantined | Filter::InProgress
    );
    let heading = match selection.filter {
        Filter::Completed => "Completed keys",
        Filter::Any => "All keys",
        _ => "Stuck keys",
    };
    let page = KeysPage {
        layout: Layout::new(heading, "keys", &session, &Keys::of(&req)),
        heading,
        notice,
        operation: selection.operation.as_ref().map(|o| o.as_str().to_owned()),
        state_param: selection.filter.param(),
        older_than_param: selection
            .older_than
            .map(format_duration)
            .unwrap_or_default(),
        ages_label: ages_label(selection.filter),
        ages: ages(&selection),
        stuck,
        older_than: selection
            .older_than
            .map(format_duration)
            .unwrap_or_default(),
        tabs,
        rows,
        newest,
        next,
    };
    Ok(render(StatusCode::OK, &page))
}

/// One page of the selection, and whether there are more after it.
async fn page(
    state: &AppState,
    session: &Session,
    selection: &Selection,
) -> Result<(Vec<(ScopedKey, KeyRecord)>, bool), PageError> {
    let mut seen = HashSet::new();
    let mut found: Vec<(ScopedKey, KeyRecord)> = Vec::new();
    for query in selection.queries(SHOWN + 1) {
        for (k, r) in state.engine.list(&session.tenant, &query).await? {
            if seen.insert((k.operation.as_str().to_owned(), k.key.as_str().to_owned())) {
                found.push((k, r));
            }
        }
    }
    // The listing's order: newest first claim, then operation and key.
    found.sort_by(|(ka, ra), (kb, rb)| {
        (rb.created_at, kb.operation.as_str(), kb.key.as_str()).cmp(&(
            ra.created_at,
            ka.operation.as_str(),
            ka.key.as_str(),
        ))
    });
    let more = found.len() > SHOWN as usize;
    found.truncate(SHOWN as usize);
    Ok((found, more))
}

async fn tabs(
    state: &AppState,
    session: &Session,
    selection: &Selection,
) -> Result<Vec<Tab>, PageError> {
    let hot = state.engine.hot_counts(&session.tenant).await?;
    let count = |s: HotState| -> i64 {
        hot.iter()
            .filter(|h| h.state == s)
            .filter(|h| {
                selection
                    .operation
                    .as_ref()
                    .is_none_or(|o| o.as_str() == h.operation)
            })
            .map(|h| h.count)
            .sum()
    };
    // The stuck tabs keep the threshold; the others start at any age.
    let threshold = selection
        .older_than
        .filter(|_| selection.filter.has_threshold())
        .unwrap_or(filter::DEFAULT_OLDER_THAN);
    let tab = |f: Filter, label: String| Tab {
        label,
        href: selection.href(f, f.has_threshold().then_some(threshold), None),
        current: f == selection.filter,
    };
    Ok(vec![
        tab(Filter::Stuck, "All stuck".into()),
        tab(
            Filter::LeaseExpired,
            format!("Lease expired ({})", count(HotState::LeaseExpired)),
        ),
        tab(
            Filter::Quarantined,
            format!("Quarantined ({})", count(HotState::Quarantined)),
        ),
        tab(
            Filter::InProgress,
            format!("In progress over {}", format_duration(threshold)),
        ),
        tab(Filter::Completed, "Completed".into()),
        tab(Filter::Any, "All keys".into()),
    ])
}

fn ages_label(filter: Filter) -> Option<&'static str> {
    match filter {
        f if f.has_threshold() => Some("Count a key as long in progress after:"),
        f if f.uses_age() => Some("First claimed at least:"),
        _ => None,
    }
}

/// The age links (an "any age" link first where the age is optional).
fn ages(selection: &Selection) -> Vec<Tab> {
    let f = selection.filter;
    let any = (!f.has_threshold()).then(|| Tab {
        label: "any age".to_owned(),
        href: selection.href(f, None, None),
        current: selection.older_than.is_none(),
    });
    any.into_iter()
        .chain(AGES.into_iter().map(|t| {
            let d = parse_duration(t);
            Tab {
                label: t.to_owned(),
                href: selection.href(f, d, None),
                current: d == selection.older_than,
            }
        }))
        .collect()
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
