//! Webhook endpoints (admins only):
//!
//! - `GET /dashboard/webhooks`: the tenant's endpoints with their deliveries
//!   by state, and a form to add one;
//! - `POST /dashboard/webhooks`: add an endpoint; the page answered shows
//!   its secret this once (never in a URL, never again);
//! - `GET /dashboard/webhooks/{id}`: an endpoint's newest deliveries —
//!   state, attempts, last answer, next try;
//! - `POST /dashboard/webhooks/{id}/delete`: remove it, with its deliveries.
//!
//! Checked in this order, each on the server: session, CSRF token, admin
//! role, then the input, which goes through the same checks as the API's
//! (`EndpointSpec::parse`) and is refused with the same words.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use idemkey_api::domain::webhook::{EndpointSpec, EventKind, RawSpec, MAX_ENDPOINTS_PER_CLASS};
use idemkey_api::domain::OperationName;
use idemkey_api::engine::NewWebhook;
use idemkey_api::routes::AppState;
use serde::Deserialize;

use crate::csrf;
use crate::error::PageError;
use crate::render::{render, see_other};
use crate::session::{Keys, Session};

mod view;

use view::{deliveries_page, list_page, Added};

const ADMIN_ONLY: &str =
    "Only an admin can see or change webhook endpoints. Sign in with an admin token.";

/// The add form, as posted. Each event is its own checkbox.
#[derive(Deserialize, Default, Clone)]
pub struct WebhookForm {
    #[serde(default)]
    pub csrf: String,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub url: String,
    pub quarantined: Option<String>,
    pub stuck: Option<String>,
    pub taken_over: Option<String>,
    pub key_reused_spike: Option<String>,
    #[serde(default)]
    pub stuck_after: String,
    #[serde(default)]
    pub spike_threshold: String,
    #[serde(default)]
    pub spike_window: String,
}

impl WebhookForm {
    fn events(&self) -> Vec<String> {
        [
            (&self.quarantined, EventKind::Quarantined),
            (&self.stuck, EventKind::Stuck),
            (&self.taken_over, EventKind::TakenOver),
            (&self.key_reused_spike, EventKind::KeyReusedSpike),
        ]
        .into_iter()
        .filter(|(on, _)| on.is_some())
        .map(|(_, kind)| kind.as_str().to_owned())
        .collect()
    }

    /// The settings, checked as the API checks them: blank fields are
    /// absent.
    fn spec(&self) -> Result<EndpointSpec, String> {
        let text = |s: &str| Some(s.trim()).filter(|s| !s.is_empty()).map(str::to_owned);
        let threshold = match text(&self.spike_threshold) {
            Some(n) => Some(
                n.parse::<u32>()
                    .map_err(|_| "spike_threshold: a whole number from 1 to 200".to_owned())?,
            ),
            None => None,
        };
        let (after, window) = (text(&self.stuck_after), text(&self.spike_window));
        EndpointSpec::parse(&RawSpec {
            url: self.url.trim(),
            events: &self.events(),
            stuck_after: after.as_deref(),
            spike_threshold: threshold,
            spike_window: window.as_deref(),
        })
        .map_err(|e| e.0)
    }
}

#[derive(Deserialize)]
pub struct Token {
    #[serde(default)]
    csrf: String,
}

/// `GET /dashboard/webhooks`.
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
) -> Result<HttpResponse, PageError> {
    admin(&session)?;
    let page = list_page(&req, &state, &session, &WebhookForm::default(), None).await?;
    Ok(render(StatusCode::OK, &page))
}

/// `POST /dashboard/webhooks`.
pub async fn add(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    form: web::Form<WebhookForm>,
) -> Result<HttpResponse, PageError> {
    allowed(&req, &session, &form.csrf)?;
    let op = match OperationName::parse(form.operation.trim()) {
        Ok(op) => op,
        Err(e) => return refused(&req, &state, &session, &form, format!("class: {e}")).await,
    };
    let spec = match form.spec() {
        Ok(spec) => spec,
        Err(e) => return refused(&req, &state, &session, &form, e).await,
    };
    match state
        .engine
        .create_webhook(&session.tenant, &op, &spec)
        .await?
    {
        NewWebhook::Created { endpoint, secret } => {
            let added = Added::Created {
                id: endpoint.id,
                secret,
            };
            let page =
                list_page(&req, &state, &session, &WebhookForm::default(), Some(added)).await?;
            Ok(render(StatusCode::CREATED, &page))
        }
        NewWebhook::ClassFull => {
            let why = format!("class: {op} already has {MAX_ENDPOINTS_PER_CLASS} endpoints");
            refused(&req, &state, &session, &form, why).await
        }
    }
}

/// The list page again, with the form as it was sent and why it was
/// refused.
async fn refused(
    req: &HttpRequest,
    state: &AppState,
    session: &Session,
    form: &WebhookForm,
    error: String,
) -> Result<HttpResponse, PageError> {
    let page = list_page(req, state, session, form, Some(Added::Refused(error))).await?;
    Ok(render(StatusCode::UNPROCESSABLE_ENTITY, &page))
}

/// `GET /dashboard/webhooks/{id}`.
pub async fn deliveries(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
) -> Result<HttpResponse, PageError> {
    admin(&session)?;
    let page = deliveries_page(&req, &state, &session, &path).await?;
    Ok(render(StatusCode::OK, &page))
}

/// `POST /dashboard/webhooks/{id}/delete`.
pub async fn delete(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<String>,
    form: web::Form<Token>,
) -> Result<HttpResponse, PageError> {
    allowed(&req, &session, &form.csrf)?;
    let engine = &state.engine;
    let Some(endpoint) = engine.webhook_by_id(&session.tenant, &path).await? else {
        return Err(PageError::NotFound);
    };
    engine
        .delete_webhook(&session.tenant, &endpoint.operation, &endpoint.id)
        .await?;
    Ok(see_other("/dashboard/webhooks?done=removed"))
}

fn admin(session: &Session) -> Result<(), PageError> {
    if session.is_admin() {
        Ok(())
    } else {
        Err(PageError::Forbidden(ADMIN_ONLY))
    }
}

/// The CSRF token, then the role.
fn allowed(req: &HttpRequest, session: &Session, token: &str) -> Result<(), PageError> {
    if !csrf::session_token_ok(&Keys::of(req), session, token) {
        return Err(PageError::Forbidden(
            "This form expired or did not come from this site. Reload the page and try again.",
        ));
    }
    admin(session)
}
