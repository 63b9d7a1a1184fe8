//! Stuck keys: expired leases, quarantined keys and long-running claims,
//! and one key's details (the same record lookup shows, with its steps and
//! history).

use std::collections::HashSet;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::domain::duration::{format_duration, parse_duration};
use idemkey_api::domain::{IdempotencyKey, OperationName, RecordState, ScopedKey};
use idemkey_api::routes::{view, AppState};
use idemkey_api::store::{HotState, KeyRecord, ListQuery, ListState};
use serde::Deserialize;
use serde_json::Value;

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
    done: Option<String>,
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

struct KeyRow {
    operation: String,
    key: String,
    href: String,
    state: &'static str,
    state_label: &'static str,
    attempt: i32,
    age: String,
    note: String,
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

fn row(k: &ScopedKey, r: &KeyRecord) -> KeyRow {
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

/// The scoped key of a `/dashboard/keys/{operation}/{key}` path, under the
/// session's tenant.
pub fn scoped(session: &Session, path: &(String, String)) -> Result<ScopedKey, PageError> {
    Ok(ScopedKey {
        tenant: session.tenant.clone(),
        operation: OperationName::parse(&path.0)
            .map_err(|e| PageError::BadRequest(e.to_string()))?,
        key: IdempotencyKey::parse(&path.1).map_err(|e| PageError::BadRequest(e.to_string()))?,
    })
}

#[derive(Template)]
#[template(path = "key.html")]
pub struct KeyPage {
    layout: Layout,
    notice: Option<&'static str>,
    operation: String,
    key: String,
    state: &'static str,
    state_label: &'static str,
    fields: Vec<(&'static str, String)>,
    outcome: Option<String>,
    steps: Vec<StepRow>,
    history: Vec<HistoryRow>,
    actions: Actions,
}

struct StepRow {
    name: String,
    provider_ref: String,
    effect_id: String,
    done_at: String,
}

struct HistoryRow {
    at: String,
    event: String,
    attempt: String,
    details: String,
}

/// The resolve forms, as this page shows them.
pub struct Actions {
    /// The key can be resolved (quarantined, or its lease ran out).
    pub resolvable: bool,
    pub is_admin: bool,
    pub form_action: String,
    pub outcome: String,
    pub reason: String,
    /// A validation error from the last submission, shown by its form.
    pub outcome_error: Option<String>,
    pub release_error: Option<String>,
}

/// `GET /dashboard/keys/{operation}/{key}`.
pub async fn detail(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<(String, String)>,
    q: web::Query<ListParams>,
) -> Result<HttpResponse, PageError> {
    let k = scoped(&session, &path)?;
    // `lookup`: a tiered key's outcome is read through its routing entry.
    let record = state.engine.lookup(&k).await?;
    let notice = match q.done.as_deref() {
        Some("resolved") => {
            Some("The key was resolved: its outcome is stored and replays from now on.")
        }
        _ => None,
    };
    let actions = Actions::blank(&session, &k, &record);
    let page = key_page(&req, &state, &session, &k, &record, actions, notice);
    Ok(render(StatusCode::OK, &page))
}

impl Actions {
    pub fn blank(session: &Session, k: &ScopedKey, r: &KeyRecord) -> Self {
        Self {
            resolvable: r.state == RecordState::Quarantined
                || (r.state == RecordState::InProgress && r.lease_expires_at <= r.observed_at),
            is_admin: session.is_admin(),
            form_action: format!("{}/resolve", key_url(k.operation.as_str(), k.key.as_str())),
            outcome: String::new(),
            reason: String::new(),
            outcome_error: None,
            release_error: None,
        }
    }
}

pub fn key_page(
    req: &HttpRequest,
    state: &AppState,
    session: &Session,
    k: &ScopedKey,
    r: &KeyRecord,
    actions: Actions,
    notice: Option<&'static str>,
) -> KeyPage {
    let now = r.observed_at;
    let row = row(k, r);
    let mut fields = vec![
        ("Attempt", r.attempt.to_string()),
        ("Effect id", state.engine.effect_id(k)),
        ("Fingerprint", r.fingerprint.to_hex()),
        (
            "First claimed",
            format!(
                "{} ({} ago)",
                format::when(r.created_at),
                format::age_at(r.created_at, now)
            ),
        ),
        ("Current attempt claimed", format::when(r.claimed_at)),
    ];
    if r.state == RecordState::InProgress {
        fields.push((
            "Lease",
            format!("{} — {}", format::when(r.lease_expires_at), row.note),
        ));
    }
    if let Some(t) = r.completed_at {
        fields.push(("Completed", format::when(t)));
    }
    if let Some(reason) = &r.quarantine_reason {
        fields.push(("Quarantine reason", reason.clone()));
    }
    fields.push(("Replay protection ends", format::when(r.protected_until())));
    let tier = match &r.routing {
        Some(at) => format!(
            "archived (segment {}, since {})",
            at.segment,
            format::when(at.tiered_at)
        ),
        None => "hot (in the database)".to_owned(),
    };
    fields.push(("Tier", tier));
    let steps = view::steps(&state.engine, k, &r.steps)
        .into_iter()
        .map(|(name, s)| StepRow {
            name,
            provider_ref: s.provider_ref,
            effect_id: s.effect_id,
            done_at: s.done_at,
        })
        .collect();
    KeyPage {
        layout: Layout::new(
            format!("Key {}", k.key.as_str()),
            "keys",
            session,
            &Keys::of(req),
        ),
        notice,
        operation: k.operation.as_str().to_owned(),
        key: k.key.as_str().to_owned(),
        state: row.state,
        state_label: row.state_label,
        fields,
        outcome: r.outcome.clone(),
        steps,
        history: history(&r.history),
        actions,
    }
}

fn history(json: &str) -> Vec<HistoryRow> {
    let events: Vec<serde_json::Map<String, Value>> =
        serde_json::from_str(json).unwrap_or_default();
    events
        .into_iter()
        .rev() // newest first
        .map(|mut e| {
            let mut take = |name: &str| match e.remove(name) {
                Some(Value::String(s)) => s,
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            let at = take("at");
            let event = take("event").replace('_', " ");
            let attempt = take("attempt");
            let details = e
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}: {s}"),
                    other => format!("{k}: {other}"),
                })
                .collect::<Vec<_>>()
                .join(", ");
            HistoryRow {
                at,
                event,
                attempt,
                details,
            }
        })
        .collect()
}
