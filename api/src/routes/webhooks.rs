//! `/v1/operation-classes/{operation}/webhooks`: a tenant's admin adds,
//! lists and removes the class's webhook endpoints and reads their recent
//! deliveries. The secret is answered once, by the `POST` that makes it.

use actix_web::{delete, get, post, web, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::body::{read_json, SMALL_LIMIT};
use super::caller::{role_names, Admin, Caller, ClassPath};
use super::AppState;
use crate::domain::duration::{format_duration, DurationText};
use crate::domain::time::rfc3339;
use crate::domain::webhook::{EndpointSpec, RawSpec, MAX_ENDPOINTS_PER_CLASS};
use crate::domain::OperationName;
use crate::engine::NewWebhook;
use crate::error::{ApiError, ErrorCode};
use crate::store::{Delivery, StoredEndpoint};

/// The newest deliveries one call answers.
const DELIVERIES: u32 = 100;

/// The segments of `/v1/operation-classes/{operation}/webhooks/{webhook}`.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct WebhookPath {
    /// The operation class, such as `charges.create`.
    #[param(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$", example = "charges.create")]
    operation: String,
    /// The endpoint's id, as its creation answered it.
    #[param(example = "wh_4f1c2a9b8e7d6c5b4a39")]
    webhook: String,
}

/// A new endpoint.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookRequest, example = json!({
    "url": "https://hooks.example.com/idemkey", "events": ["quarantined", "stuck"],
    "stuck_after": "5m"
}))]
pub struct WebhookBody {
    /// `http://` or `https://`, at most 2048 bytes, no credentials.
    url: String,
    /// One or more of `quarantined`, `stuck`, `taken_over`,
    /// `key_reused_spike`.
    events: Vec<String>,
    /// With `stuck` (and only then): how long a key may be in progress,
    /// one attempt, before it is reported; 1 s to 7 d.
    #[schema(value_type = Option<DurationText>)]
    stuck_after: Option<String>,
    /// With `key_reused_spike`: refusals within one window that make a
    /// spike; 1 to 200.
    #[schema(minimum = 1, maximum = 200)]
    spike_threshold: Option<u32>,
    /// With `key_reused_spike`: the window's length, 1 s to 1 d; windows
    /// are aligned to the Unix epoch.
    #[schema(value_type = Option<DurationText>)]
    spike_window: Option<String>,
}

/// An endpoint. Its secret is never shown again after creation.
#[derive(Serialize, ToSchema)]
#[schema(as = Webhook)]
pub struct WebhookView {
    /// The endpoint's id.
    id: String,
    /// The operation class whose keys it hears of.
    operation: String,
    url: String,
    events: Vec<&'static str>,
    #[schema(value_type = Option<DurationText>)]
    stuck_after: Option<String>,
    spike_threshold: Option<u32>,
    #[schema(value_type = Option<DurationText>)]
    spike_window: Option<String>,
    /// RFC 3339. Events from this moment on are reported.
    created_at: String,
    /// Only in the answer to the `POST`: `whsec_` and the base64 of the
    /// signing key (Standard Webhooks).
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

/// A class's endpoints, oldest first.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookList)]
pub struct WebhookListView {
    webhooks: Vec<WebhookView>,
}

/// One event's delivery to one endpoint.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookDelivery)]
pub struct DeliveryView {
    /// The `webhook-id` every attempt of it carries.
    event_id: String,
    /// The payload's `type`, such as `key.quarantined`.
    #[serde(rename = "type")]
    event_type: &'static str,
    key: Option<String>,
    /// RFC 3339: when the event happened.
    occurred_at: String,
    /// `pending`, `delivered` or `failed` (no attempt left).
    state: String,
    /// Attempts made so far.
    attempts: i32,
    /// RFC 3339: when a pending delivery is tried next.
    next_attempt_at: Option<String>,
    /// The last attempt's HTTP status, if it got an answer.
    last_status: Option<i32>,
    /// Why the last attempt got no answer.
    last_error: Option<String>,
    delivered_at: Option<String>,
}

/// An endpoint's newest deliveries (at most 100), newest first.
#[derive(Serialize, ToSchema)]
#[schema(as = WebhookDeliveries)]
pub struct DeliveriesView {
    deliveries: Vec<DeliveryView>,
}

crate::problems!(
    /// What adding an endpoint can refuse with.
    CreateProblems: InvalidOperation, InvalidJson, InvalidBody, InvalidWebhook, Unauthorized,
    Forbidden, PayloadTooLarge, RateLimited, Unavailable
);

crate::problems!(
    /// What listing endpoints can refuse with.
    ListProblems: InvalidOperation, Unauthorized, Forbidden, RateLimited, Unavailable
);

crate::problems!(
    /// What a call on one endpoint can refuse with.
    OneProblems: InvalidOperation, Unauthorized, Forbidden, WebhookNotFound, RateLimited,
    Unavailable
);

/// Add a webhook endpoint to a class
///
/// Role: `admin`. The endpoint hears of the class's keys from now on: each
/// event it asks for is delivered once, signed with the secret answered
/// here (and never again), retried with backoff. At most 10 endpoints per
/// class. Body at most 64 KiB.
#[utoipa::path(
    tag = "webhooks",
    operation_id = "createWebhook",
    params(ClassPath),
    request_body = WebhookBody,
    responses((status = 201, description = "The endpoint, with its secret.", body = WebhookView), CreateProblems),
    extensions(("x-roles" = json!(role_names::<Admin>()))),
)]
#[post("/webhooks")]
pub async fn create(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: web::Path<ClassPath>,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path.operation)?;
    let body: WebhookBody = read_json(payload, SMALL_LIMIT).await?;
    let spec = EndpointSpec::parse(&RawSpec {
        url: &body.url,
        events: &body.events,
        stuck_after: body.stuck_after.as_deref(),
        spike_threshold: body.spike_threshold,
        spike_window: body.spike_window.as_deref(),
    })
    .map_err(|e| ApiError::bad_request(ErrorCode::InvalidWebhook, e.0))?;
    match state
        .engine
        .create_webhook(&caller.principal.tenant, &op, &spec)
        .await?
    {
        NewWebhook::Created { endpoint, secret } => {
            let mut view = view(&endpoint);
            view.secret = Some(secret);
            Ok(HttpResponse::Created().json(view))
        }
        NewWebhook::ClassFull => Err(ApiError::bad_request(
            ErrorCode::InvalidWebhook,
            format!("the class already has {MAX_ENDPOINTS_PER_CLASS} endpoints"),
        )),
    }
}

/// List a class's webhook endpoints
///
/// Role: `admin`. Oldest first, without their secrets.
#[utoipa::path(
    tag = "webhooks",
    operation_id = "listWebhooks",
    params(ClassPath),
    responses((status = 200, description = "The class's endpoints.", body = WebhookListView), ListProblems),
    extensions(("x-roles" = json!(role_names::<Admin>()))),
)]
#[get("/webhooks")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: web::Path<ClassPath>,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path.operation)?;
    let found = state
        .engine
        .webhooks(&caller.principal.tenant, Some(&op))
        .await?;
    Ok(HttpResponse::Ok().json(WebhookListView {
        webhooks: found.iter().map(view).collect(),
    }))
}

/// Remove a webhook endpoint
///
/// Role: `admin`. Its deliveries, pending ones included, go with it.
#[utoipa::path(
    tag = "webhooks",
    operation_id = "deleteWebhook",
    params(WebhookPath),
    responses((status = 204, description = "Removed."), OneProblems),
    extensions(("x-roles" = json!(role_names::<Admin>()))),
)]
#[delete("/webhooks/{webhook}")]
pub async fn delete(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: web::Path<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path.operation)?;
    if !state
        .engine
        .delete_webhook(&caller.principal.tenant, &op, &path.webhook)
        .await?
    {
        return Err(not_found());
    }
    Ok(HttpResponse::NoContent().finish())
}

/// Read an endpoint's recent deliveries
///
/// Role: `admin`. The newest 100, newest first, with each one's state,
/// attempts and last answer.
#[utoipa::path(
    tag = "webhooks",
    operation_id = "listWebhookDeliveries",
    params(WebhookPath),
    responses((status = 200, description = "The endpoint's newest deliveries.", body = DeliveriesView), OneProblems),
    extensions(("x-roles" = json!(role_names::<Admin>()))),
)]
#[get("/webhooks/{webhook}/deliveries")]
pub async fn deliveries(
    state: web::Data<AppState>,
    caller: Caller<Admin>,
    path: web::Path<WebhookPath>,
) -> Result<HttpResponse, ApiError> {
    let op = operation(&path.operation)?;
    let tenant = &caller.principal.tenant;
    if state
        .engine
        .webhook(tenant, &op, &path.webhook)
        .await?
        .is_none()
    {
        return Err(not_found());
    }
    let found = state
        .engine
        .webhook_deliveries(tenant, &path.webhook, DELIVERIES)
        .await?;
    Ok(HttpResponse::Ok().json(DeliveriesView {
        deliveries: found.iter().map(delivery_view).collect(),
    }))
}

fn operation(path: &str) -> Result<OperationName, ApiError> {
    OperationName::parse(path)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidOperation, e.to_string()))
}

fn not_found() -> ApiError {
    ApiError::bad_request(ErrorCode::WebhookNotFound, "no such endpoint in this class")
}

fn view(e: &StoredEndpoint) -> WebhookView {
    WebhookView {
        id: e.id.clone(),
        operation: e.operation.as_str().to_owned(),
        url: e.url.clone(),
        events: e.events.iter().map(|k| k.as_str()).collect(),
        stuck_after: e.stuck_after.map(format_duration),
        spike_threshold: e.spike.map(|(n, _)| n),
        spike_window: e.spike.map(|(_, w)| format_duration(w)),
        created_at: rfc3339(e.created_at),
        secret: None,
    }
}

fn delivery_view(d: &Delivery) -> DeliveryView {
    DeliveryView {
        event_id: crate::workers::webhooks::event_id(d),
        event_type: d.kind.event_type(),
        key: d.key.clone(),
        occurred_at: rfc3339(d.occurred_at),
        state: d.state.clone(),
        attempts: d.attempts,
        next_attempt_at: (d.state == "pending").then(|| rfc3339(d.next_attempt_at)),
        last_status: d.last_status,
        last_error: d.last_error.clone(),
        delivered_at: d.delivered_at.map(rfc3339),
    }
}
