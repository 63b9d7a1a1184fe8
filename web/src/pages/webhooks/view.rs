//! The webhook pages' view models: every figure formatted and every link
//! built here; the templates only lay them out.

use actix_web::HttpRequest;
use askama::Template;
use idemkey_api::domain::duration::format_duration;
use idemkey_api::domain::webhook::EventKind;
use idemkey_api::routes::AppState;
use idemkey_api::store::{Delivery, StoredEndpoint};

use super::WebhookForm;
use crate::error::PageError;
use crate::format;
use crate::pages::{key_url, segment, Layout};
use crate::session::{Keys, Session};

/// Deliveries shown on an endpoint's page, newest first.
const SHOWN: u32 = 100;

/// What the add form just did.
pub enum Added {
    Created { id: String, secret: String },
    Refused(String),
}

#[derive(Template)]
#[template(path = "webhooks.html")]
pub struct ListPage {
    layout: Layout,
    notice: Option<&'static str>,
    created: Option<(String, String)>,
    error: Option<String>,
    endpoints: Vec<EndpointRow>,
    form: WebhookForm,
}

struct EndpointRow {
    id: String,
    href: String,
    delete_action: String,
    operation: String,
    url: String,
    events: String,
    settings: String,
    delivered: String,
    pending: String,
    failed: String,
}

#[derive(Template)]
#[template(path = "webhook.html")]
pub struct DeliveriesPage {
    layout: Layout,
    endpoint: EndpointRow,
    rows: Vec<DeliveryRow>,
    shown: u32,
}

struct DeliveryRow {
    event: &'static str,
    key: Option<(String, String)>,
    occurred: String,
    state: String,
    attempts: i32,
    answer: String,
    next: String,
}

pub async fn list_page(
    req: &HttpRequest,
    state: &AppState,
    session: &Session,
    form: &WebhookForm,
    added: Option<Added>,
) -> Result<ListPage, PageError> {
    let engine = &state.engine;
    let found = engine.webhooks(&session.tenant, None).await?;
    let counts = engine.webhook_counts(&session.tenant).await?;
    let endpoints = found
        .iter()
        .map(|e| {
            let mut row = endpoint_row(e);
            if let Some(c) = counts.iter().find(|c| c.endpoint_id == e.id) {
                row.delivered = format::count(c.delivered);
                row.pending = format::count(c.pending);
                row.failed = format::count(c.failed);
            }
            row
        })
        .collect();
    let removed = req.query_string().split('&').any(|p| p == "done=removed");
    let (created, error) = match added {
        Some(Added::Created { id, secret }) => (Some((id, secret)), None),
        Some(Added::Refused(e)) => (None, Some(e)),
        None => (None, None),
    };
    Ok(ListPage {
        layout: Layout::new("Webhooks", "webhooks", session, &Keys::of(req)),
        notice: removed.then_some("The endpoint and its deliveries were removed."),
        created,
        error,
        endpoints,
        form: form.clone(),
    })
}

pub async fn deliveries_page(
    req: &HttpRequest,
    state: &AppState,
    session: &Session,
    id: &str,
) -> Result<DeliveriesPage, PageError> {
    let engine = &state.engine;
    let Some(endpoint) = engine.webhook_by_id(&session.tenant, id).await? else {
        return Err(PageError::NotFound);
    };
    let found = engine
        .webhook_deliveries(&session.tenant, &endpoint.id, SHOWN)
        .await?;
    Ok(DeliveriesPage {
        layout: Layout::new(
            format!("Webhook deliveries to {}", endpoint.url),
            "webhooks",
            session,
            &Keys::of(req),
        ),
        endpoint: endpoint_row(&endpoint),
        rows: found.iter().map(delivery_row).collect(),
        shown: SHOWN,
    })
}

fn endpoint_row(e: &StoredEndpoint) -> EndpointRow {
    let mut settings = Vec::new();
    if let Some(after) = e.stuck_after {
        settings.push(format!("stuck after {}", format_duration(after)));
    }
    if let Some((n, window)) = e.spike {
        settings.push(format!(
            "spike: {n} refusals in {}",
            format_duration(window)
        ));
    }
    EndpointRow {
        href: format!("/dashboard/webhooks/{}", segment(&e.id)),
        delete_action: format!("/dashboard/webhooks/{}/delete", segment(&e.id)),
        id: e.id.clone(),
        operation: e.operation.to_string(),
        url: e.url.clone(),
        events: e
            .events
            .iter()
            .map(|k| label(*k))
            .collect::<Vec<_>>()
            .join(", "),
        settings: settings.join("; "),
        delivered: "0".into(),
        pending: "0".into(),
        failed: "0".into(),
    }
}

fn delivery_row(d: &Delivery) -> DeliveryRow {
    let answer = match (d.last_status, &d.last_error) {
        (Some(status), _) => format!("HTTP {status}"),
        (None, Some(error)) => error.clone(),
        (None, None) => "—".into(),
    };
    DeliveryRow {
        event: label(d.kind),
        key: d
            .key
            .as_ref()
            .map(|k| (k.clone(), key_url(d.operation.as_str(), k))),
        occurred: format::when(d.occurred_at),
        state: d.state.clone(),
        attempts: d.attempts,
        answer,
        next: if d.state == "pending" {
            format::when(d.next_attempt_at)
        } else {
            "—".into()
        },
    }
}

/// An event's name as a person reads it.
fn label(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Quarantined => "quarantined",
        EventKind::Stuck => "stuck in progress",
        EventKind::TakenOver => "taken over",
        EventKind::KeyReusedSpike => "spike of key_reused",
    }
}
