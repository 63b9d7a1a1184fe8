//! One key's page: the record as lookup shows it, with its steps and
//! history, and the resolve forms for a key that is quarantined or whose
//! lease ran out. The list of stuck keys is in `keys.rs`.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use idemkey_api::domain::{IdempotencyKey, OperationName, RecordState, ScopedKey};
use idemkey_api::routes::{view, AppState};
use idemkey_api::store::KeyRecord;
use serde_json::Value;

use super::keys::{row, ListParams};
use super::{key_url, Layout};
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};

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
