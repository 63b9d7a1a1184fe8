//! The one error type at the HTTP edge, and the list of every problem `code`.
//!
//! Every error is answered as `application/problem+json` (RFC 9457) with the
//! numeric `status`, a `title`, a stable `code` clients may match on, and
//! where useful a `detail`. Internal causes are logged, never sent.
//!
//! [`ErrorCode`] is the single list of codes: the answers take their status
//! and title from it, and the OpenAPI document's `ErrorCode` schema is
//! generated from it, so a code cannot be answered without being documented.

use std::time::Duration;

use actix_web::http::{header, StatusCode};
use actix_web::{HttpResponse, ResponseError};
use serde_json::{json, Map, Value};

use crate::domain::time::rfc3339;
use crate::engine::Refusal;
use crate::store::StoreError;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $status:ident, $title:expr, $when:literal;)+) => {
        /// Every stable problem `code` the API answers with.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }

        impl ErrorCode {
            /// Every code, in the order the documentation lists them.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The code as it appears in a problem document.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $code,)+ }
            }

            pub fn status(self) -> StatusCode {
                match self { $(Self::$variant => StatusCode::$status,)+ }
            }

            /// The problem's `title`: the same for every answer with the code.
            pub fn title(self) -> &'static str {
                match self { $(Self::$variant => $title,)+ }
            }

            /// When the code is answered, for the documentation.
            pub fn when(self) -> &'static str {
                match self { $(Self::$variant => $when,)+ }
            }
        }
    };
}

const NOT_VALID: &str = "The request is not valid";
const TOO_LARGE: &str = "The payload is too large";

error_codes! {
    InvalidJson = "invalid_json", BAD_REQUEST, NOT_VALID,
        "The body is not JSON (syntax error, empty body).";
    InvalidBody = "invalid_body", BAD_REQUEST, NOT_VALID,
        "JSON but not an object, or of the wrong shape: unknown or duplicate member, wrong type, missing member, both or neither of two alternatives, a value out of its documented range; or the body could not be read.";
    InvalidPolicy = "invalid_policy", BAD_REQUEST, NOT_VALID,
        "A policy value out of range, of the wrong type, or an unknown member.";
    InvalidKey = "invalid_key", BAD_REQUEST, NOT_VALID,
        "The decoded key is not 1–255 visible ASCII characters.";
    InvalidOperation = "invalid_operation", BAD_REQUEST, NOT_VALID,
        "The operation does not match its pattern.";
    InvalidStep = "invalid_step", BAD_REQUEST, NOT_VALID,
        "The step name does not match its pattern.";
    InvalidFingerprint = "invalid_fingerprint", BAD_REQUEST, NOT_VALID,
        "`fingerprint` is not 64 lowercase hex characters.";
    NumberOutOfRange = "number_out_of_range", BAD_REQUEST, NOT_VALID,
        "A number in `request` that an IEEE double cannot carry exactly; send it as a string.";
    InvalidRequest = "invalid_request", BAD_REQUEST, NOT_VALID,
        "`request` cannot be canonicalised (too deeply nested, invalid escape).";
    InvalidLease = "invalid_lease", BAD_REQUEST, NOT_VALID,
        "`lease_ms` outside 1000 to the class's `max_lease`.";
    InvalidOutcome = "invalid_outcome", BAD_REQUEST, NOT_VALID,
        "The outcome is not an object of the documented shape.";
    InvalidQuery = "invalid_query", BAD_REQUEST, NOT_VALID,
        "A list parameter is unknown or out of range.";
    InvalidWebhook = "invalid_webhook", BAD_REQUEST, NOT_VALID,
        "A webhook endpoint's settings are not valid (the `detail` names the field), or its class already has 10 endpoints.";
    Unauthorized = "unauthorized", UNAUTHORIZED, "A valid bearer token is required",
        "Missing or invalid bearer token.";
    Forbidden = "forbidden", FORBIDDEN, "The token's roles do not allow this call",
        "The token's roles do not allow this call.";
    NotFound = "not_found", NOT_FOUND, "No such key",
        "No live record of this key for this tenant.";
    NoRoute = "no_route", NOT_FOUND, "No such endpoint",
        "No such endpoint or method.";
    WebhookNotFound = "webhook_not_found", NOT_FOUND, "No such webhook endpoint",
        "The tenant has no webhook endpoint of this id in this class.";
    InProgress = "in_progress", CONFLICT, "Another attempt is in progress",
        "Another attempt holds a live lease (`Retry-After`).";
    Quarantined = "quarantined", CONFLICT, "The key is quarantined until it is resolved",
        "The key is quarantined until it is resolved.";
    LeaseLost = "lease_lost", CONFLICT, "This owner token is not the key's current owner",
        "The owner token is not the current attempt's.";
    AlreadyCompleted = "already_completed", CONFLICT,
        "The key was already completed with a different outcome",
        "The key is completed (with a different outcome).";
    StepConflict = "step_conflict", CONFLICT,
        "The step was already recorded with another provider reference",
        "The step was recorded with another `provider_ref`.";
    TooManySteps = "too_many_steps", CONFLICT,
        "The operation already has the most steps it may record",
        "The key already has 64 steps.";
    NotQuarantined = "not_quarantined", CONFLICT,
        "Only a quarantined key (or, for an admin, one whose lease ran out) can be resolved",
        "Resolve of a key that is neither quarantined nor (for an admin) stuck with an expired lease.";
    PayloadTooLarge = "payload_too_large", PAYLOAD_TOO_LARGE, TOO_LARGE,
        "The body is over the call's limit.";
    OutcomeTooLarge = "outcome_too_large", PAYLOAD_TOO_LARGE, TOO_LARGE,
        "The outcome is over the class's `max_outcome_bytes`.";
    KeyReused = "key_reused", UNPROCESSABLE_ENTITY, "The key was used with a different request",
        "Same key, different fingerprint.";
    RateLimited = "rate_limited", TOO_MANY_REQUESTS,
        "Too many calls for this tenant; retry after the delay",
        "The tenant sent more calls per second than this server allows it (`Retry-After`, whole seconds).";
    Unavailable = "unavailable", SERVICE_UNAVAILABLE, "The store cannot answer right now; retry",
        "The store cannot answer (`Retry-After: 1`); never \"not found\".";
    QuotaExceeded = "quota_exceeded", INSUFFICIENT_STORAGE,
        "The tenant reached its storage quota; new keys are refused",
        "A claim of a key with no live record from a tenant whose stored keys or outcome bytes reached the quota the operator set. Replays, takeovers and owner calls on existing keys are never refused for it. No `Retry-After`: it lifts only when keys expire or the quota is raised.";
}

impl ErrorCode {
    /// Whether answers with this code carry `Retry-After` (for the
    /// documentation; `ApiError::retry_after` gives the value).
    pub fn sends_retry_after(self) -> bool {
        matches!(
            self,
            Self::InProgress | Self::RateLimited | Self::Unavailable
        )
    }

    /// The code of an engine refusal.
    pub fn of_refusal(r: &Refusal) -> Self {
        match r {
            Refusal::Unavailable => Self::Unavailable,
            Refusal::NotFound => Self::NotFound,
            Refusal::KeyReused(_) => Self::KeyReused,
            Refusal::Quarantined => Self::Quarantined,
            Refusal::InProgress(_) => Self::InProgress,
            Refusal::LeaseLost => Self::LeaseLost,
            Refusal::AlreadyCompleted => Self::AlreadyCompleted,
            Refusal::StepConflict => Self::StepConflict,
            Refusal::TooManySteps => Self::TooManySteps,
            Refusal::NotResolvable => Self::NotQuarantined,
            Refusal::QuotaExceeded(_) => Self::QuotaExceeded,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// Input the caller must change, with the code saying which rule it broke.
    #[error("{1}")]
    BadRequest(ErrorCode, String),
    #[error("unauthorized")]
    Unauthorized,
    #[error("forbidden")]
    Forbidden,
    #[error("no such route")]
    NoRoute,
    #[error("{code:?}: over {limit} bytes")]
    TooLarge { code: ErrorCode, limit: usize },
    /// The tenant is over its rate limit on this node.
    #[error("rate limited")]
    RateLimited { retry_after: Duration },
    /// What the engine refused, for a reason of the key's state or the
    /// store's health.
    #[error(transparent)]
    Refused(#[from] Refusal),
}

impl ApiError {
    pub fn bad_request(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self::BadRequest(code, detail.into())
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Self::BadRequest(code, _) => *code,
            Self::Unauthorized => ErrorCode::Unauthorized,
            Self::Forbidden => ErrorCode::Forbidden,
            Self::NoRoute => ErrorCode::NoRoute,
            Self::TooLarge { code, .. } => *code,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::Refused(r) => ErrorCode::of_refusal(r),
        }
    }

    fn detail(&self) -> Option<String> {
        match self {
            Self::BadRequest(_, detail) => Some(detail.clone()),
            Self::TooLarge { limit, .. } => Some(format!("the limit is {limit} bytes")),
            Self::Refused(r @ Refusal::QuotaExceeded(_)) => Some(r.to_string()),
            _ => None,
        }
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Refused(Refusal::InProgress(busy)) => Some(busy.retry_after),
            Self::Refused(Refusal::Unavailable) => Some(Duration::from_secs(1)),
            // Whole seconds, rounded up: never invite a retry too early.
            Self::RateLimited { retry_after } => {
                Some(Duration::from_secs(retry_after.as_secs_f64().ceil() as u64))
            }
            _ => None,
        }
    }

    /// Members beyond RFC 9457's that the problem carries.
    fn extra(&self) -> Map<String, Value> {
        let mut extra = Map::new();
        if let Self::Refused(Refusal::InProgress(busy)) = self {
            extra.insert("attempt".into(), busy.attempt.into());
            extra.insert(
                "lease_expires_at".into(),
                rfc3339(busy.lease_expires_at).into(),
            );
            extra.insert("expires_at".into(), rfc3339(busy.expires_at).into());
        }
        if let Self::Refused(Refusal::KeyReused(Some(mismatch))) = self {
            extra.insert("mismatched".into(), json!(mismatch.pointers));
            if mismatch.truncated {
                extra.insert("mismatched_truncated".into(), json!(true));
            }
        }
        extra
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        self.code().status()
    }

    fn error_response(&self) -> HttpResponse {
        let code = self.code();
        let mut body = self.extra();
        body.insert("type".into(), json!("about:blank"));
        body.insert("status".into(), json!(code.status().as_u16()));
        body.insert("title".into(), json!(code.title()));
        body.insert("code".into(), json!(code.as_str()));
        if let Some(detail) = self.detail() {
            body.insert("detail".into(), json!(detail));
        }
        debug_assert_eq!(self.retry_after().is_some(), code.sends_retry_after());
        let mut response = HttpResponse::build(code.status());
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
        Self::Refused(e.into())
    }
}
