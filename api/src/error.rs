//! The one error type at the HTTP edge.
//!
//! Every error is answered as `application/problem+json` (RFC 9457) with the
//! numeric `status`, a `title`, a stable `code` clients may match on, and
//! where useful a `detail`. Internal causes are logged, never sent.

use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde_json::{json, Map, Value};

use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(&'static str, String),
    #[error("unauthorized")]
    Unauthorized,
    #[error("forbidden")]
    Forbidden,
    #[error("not found")]
    NotFound,
    #[error("no such route")]
    NoRoute,
    #[error("{code}: over {limit} bytes")]
    TooLarge { code: &'static str, limit: usize },
    #[error("in progress")]
    InProgress {
        retry_after: Duration,
        extra: Map<String, Value>,
    },
    #[error("quarantined")]
    Quarantined,
    #[error("lease lost")]
    LeaseLost,
    #[error("already completed")]
    AlreadyCompleted,
    #[error("key reused")]
    KeyReused,
    /// Another 409, with its own stable code and title.
    #[error("{code}")]
    Conflict {
        code: &'static str,
        title: &'static str,
    },
    #[error("unavailable")]
    Unavailable,
    /// The tenant is over its rate limit on this node.
    #[error("rate limited")]
    RateLimited { retry_after: Duration },
}

impl ApiError {
    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Self::BadRequest(code, detail.into())
    }

    pub fn code(&self) -> &'static str {
        match self {
            Self::BadRequest(code, _) => code,
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::NotFound => "not_found",
            Self::NoRoute => "no_route",
            Self::TooLarge { code, .. } => code,
            Self::InProgress { .. } => "in_progress",
            Self::Quarantined => "quarantined",
            Self::LeaseLost => "lease_lost",
            Self::AlreadyCompleted => "already_completed",
            Self::KeyReused => "key_reused",
            Self::Conflict { code, .. } => code,
            Self::Unavailable => "unavailable",
            Self::RateLimited { .. } => "rate_limited",
        }
    }

    fn title(&self) -> &'static str {
        match self {
            Self::BadRequest(..) => "The request is not valid",
            Self::Unauthorized => "A valid bearer token is required",
            Self::Forbidden => "The token's roles do not allow this call",
            Self::NotFound => "No such key",
            Self::NoRoute => "No such endpoint",
            Self::TooLarge { .. } => "The payload is too large",
            Self::InProgress { .. } => "Another attempt is in progress",
            Self::Quarantined => "The key is quarantined until it is resolved",
            Self::LeaseLost => "This owner token is not the key's current owner",
            Self::AlreadyCompleted => "The key was already completed with a different outcome",
            Self::KeyReused => "The key was used with a different request",
            Self::Conflict { title, .. } => title,
            Self::Unavailable => "The store cannot answer right now; retry",
            Self::RateLimited { .. } => "Too many calls for this tenant; retry after the delay",
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            Self::BadRequest(_, detail) => Some(detail.clone()),
            Self::TooLarge { limit, .. } => Some(format!("the limit is {limit} bytes")),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::InProgress { retry_after, .. } => Some(*retry_after),
            Self::Unavailable => Some(Duration::from_secs(1)),
            // Whole seconds, rounded up: never invite a retry too early.
            Self::RateLimited { retry_after } => {
                Some(Duration::from_secs(retry_after.as_secs_f64().ceil() as u64))
            }
            _ => None,
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest(..) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden => StatusCode::FORBIDDEN,
            Self::NotFound | Self::NoRoute => StatusCode::NOT_FOUND,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::InProgress { .. }
            | Self::Quarantined
            | Self::LeaseLost
            | Self::AlreadyCompleted
            | Self::Conflict { .. } => StatusCode::CONFLICT,
            Self::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let status = self.status_code();
        let mut body = match self {
            Self::InProgress { extra, .. } => extra.clone(),
            _ => Map::new(),
        };
        body.insert("type".into(), json!("about:blank"));
        body.insert("status".into(), json!(status.as_u16()));
        body.insert("title".into(), json!(self.title()));
        body.insert("code".into(), json!(self.code()));
        if let Some(detail) = self.detail() {
            body.insert("detail".into(), json!(detail));
        }
        let mut response = HttpResponse::build(status);
        response.content_type("application/problem+json");
        if let Some(after) = self.retry_after() {
            response.insert_header((header::RETRY_AFTER, after.as_secs().max(1).to_string()));
        }
        if matches!(self, Self::Unauthorized) {
            response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
        }
        response.body(Value::Object(body).to_string())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            // Refused at once while the database is away: the breaker
            // logged when it opened; one line per refused call would flood.
            StoreError::Unreachable => tracing::debug!("store unreachable; refused at once"),
            e => tracing::error!(error = ?e, "store error"),
        }
        Self::Unavailable
    }
}
