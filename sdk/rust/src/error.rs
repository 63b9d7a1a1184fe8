//! Typed errors: one [`Error`] variant per problem `code` of
//! docs/protocol.md ("Errors"), plus the SDK's own (no answer, a deadline
//! reached waiting for another attempt, an ambiguous effect, an effect that
//! did nothing). Match on the variant, or on [`Error::code`].
//!
//! What an effect itself fails with is [`crate::EffectError`].

use std::time::Duration;

use serde_json::Value;

pub use crate::problem::Problem;

/// A boxed error from user code or the transport.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything a call to idemkey can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// 400 `invalid_json`: the body is not JSON.
    #[error("{0}")]
    InvalidJson(Problem),
    /// 400 `invalid_body`: JSON of the wrong shape.
    #[error("{0}")]
    InvalidBody(Problem),
    /// 400 `invalid_policy`: a policy value out of range (`detail` names the field).
    #[error("{0}")]
    InvalidPolicy(Problem),
    /// 400 `invalid_key`.
    #[error("{0}")]
    InvalidKey(Problem),
    /// 400 `invalid_operation`.
    #[error("{0}")]
    InvalidOperation(Problem),
    /// 400 `invalid_fingerprint`.
    #[error("{0}")]
    InvalidFingerprint(Problem),
    /// 400 `number_out_of_range`: send exact large numbers as strings.
    #[error("{0}")]
    NumberOutOfRange(Problem),
    /// 400 `invalid_request`: the request cannot be canonicalised.
    #[error("{0}")]
    InvalidRequest(Problem),
    /// 400 `invalid_lease`.
    #[error("{0}")]
    InvalidLease(Problem),
    /// 400 `invalid_outcome`.
    #[error("{0}")]
    InvalidOutcome(Problem),
    /// 400 `invalid_step`.
    #[error("{0}")]
    InvalidStep(Problem),
    /// 400 `invalid_query`.
    #[error("{0}")]
    InvalidQuery(Problem),
    /// 413 `payload_too_large`.
    #[error("{0}")]
    PayloadTooLarge(Problem),
    /// 413 `outcome_too_large`.
    #[error("{0}")]
    OutcomeTooLarge(Problem),
    /// 401 `unauthorized`.
    #[error("{0}")]
    Unauthorized(Problem),
    /// 403 `forbidden`.
    #[error("{0}")]
    Forbidden(Problem),
    /// 404 `not_found`.
    #[error("{0}")]
    NotFound(Problem),
    /// 404 `no_route`.
    #[error("{0}")]
    NoRoute(Problem),
    /// 409 `in_progress` (low-level calls other than claim; a claim answers
    /// [`crate::Claim::InProgress`] instead).
    #[error("{problem}")]
    InProgress {
        /// The problem document (`attempt`, `lease_expires_at`, `expires_at`).
        problem: Problem,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// 409 `quarantined`: the outcome is ambiguous; nothing retries until a
    /// resolve.
    #[error("{0}")]
    Quarantined(Problem),
    /// 409 `lease_lost`: another attempt owns the key. Stop; claim again to
    /// see the state. From `once`, the problem is the answer that showed the
    /// loss (a heartbeat's `lease_lost`, `quarantined`, `not_found`, …).
    #[error("the lease was lost: {0}")]
    LeaseLost(Problem),
    /// 409 `already_completed`.
    #[error("{0}")]
    AlreadyCompleted(Problem),
    /// 409 `step_conflict`: the step was recorded with another provider_ref.
    #[error("{0}")]
    StepConflict(Problem),
    /// 409 `too_many_steps`.
    #[error("{0}")]
    TooManySteps(Problem),
    /// 409 `not_quarantined`.
    #[error("{0}")]
    NotQuarantined(Problem),
    /// 422 `key_reused`: the same key with a different request. A caller
    /// bug: do not retry.
    #[error("{problem}; mismatched: {mismatched:?}")]
    KeyReused {
        /// The problem document.
        problem: Problem,
        /// JSON pointers of the fields that differ, when the server could tell.
        mismatched: Option<Vec<String>>,
        /// True when there may be more differences than `mismatched` names.
        mismatched_truncated: bool,
    },
    /// 400 `invalid_webhook`: a webhook endpoint's settings are invalid.
    #[error("{0}")]
    InvalidWebhook(Problem),
    /// 404 `webhook_not_found`: no such webhook endpoint for this tenant.
    #[error("{0}")]
    WebhookNotFound(Problem),
    /// 507 `quota_exceeded`: the tenant has reached its quota of stored
    /// keys or outcome bytes; a new key is refused until the operator
    /// raises it or records expire (not retried: waiting does not lift it).
    #[error("{0}")]
    QuotaExceeded(Problem),
    /// 429 `rate_limited` (retried by the SDK until its retry budget ends).
    #[error("{problem}")]
    RateLimited {
        /// The problem document.
        problem: Problem,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// 503 `unavailable`: never "new" (retried by the SDK until its retry
    /// budget ends).
    #[error("{problem}")]
    Unavailable {
        /// The problem document.
        problem: Problem,
        /// The server's `Retry-After`.
        retry_after: Option<Duration>,
    },
    /// An answer the SDK does not understand (an unknown problem code, a
    /// success body of the wrong shape).
    #[error("unexpected answer ({status}): {message}")]
    UnexpectedResponse {
        /// The HTTP status.
        status: u16,
        /// The problem document, when the answer was one.
        problem: Option<Problem>,
        /// What was wrong.
        message: String,
    },
    /// No answer from the server (connection error, timeout) within the
    /// retry budget. The call may or may not have been applied.
    #[error("no answer: {message}")]
    Transport {
        /// What was tried.
        message: String,
        /// The last transport error.
        #[source]
        source: BoxError,
    },
    /// `once` waited for another attempt (`in_progress`) until its deadline.
    /// The effect was not run by this call.
    #[error("still in progress at the deadline (attempt {attempt:?}); the effect was not run by this call")]
    InProgressTimeout {
        /// The attempt holding the key.
        attempt: Option<u64>,
        /// The last `in_progress` problem.
        problem: Problem,
    },
    /// The effect (or the reconcile) failed in a way that may have left an
    /// effect behind. The key was NOT released: it is left to the lease
    /// rules, so a later call after the lease ends gets `recovering` and
    /// reconciles.
    #[error("the effect for {operation}/{key} ({effect_id}) failed ambiguously; the key was not released and is left to the lease rules: after the lease ends the next call gets \"recovering\" and must reconcile")]
    Ambiguous {
        /// The operation class.
        operation: String,
        /// The key.
        key: String,
        /// The effect id the effect was given.
        effect_id: String,
        /// The effect's error.
        #[source]
        source: BoxError,
    },
    /// The effect said nothing was done; the key was released, so the next
    /// call runs afresh.
    #[error("nothing was done for {operation}/{key}; the key was released")]
    NothingDone {
        /// The operation class.
        operation: String,
        /// The key.
        key: String,
        /// Why the effect did nothing.
        #[source]
        source: BoxError,
    },
    /// The client was configured wrongly (an invalid base URL, an HTTP
    /// client that cannot be built, a claim with both request and fingerprint).
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Every problem code of docs/protocol.md's Errors table.
pub const PROBLEM_CODES: &[&str] = &[
    "invalid_json",
    "invalid_body",
    "invalid_policy",
    "invalid_key",
    "invalid_operation",
    "invalid_fingerprint",
    "number_out_of_range",
    "invalid_request",
    "invalid_lease",
    "invalid_outcome",
    "invalid_step",
    "invalid_query",
    "payload_too_large",
    "outcome_too_large",
    "unauthorized",
    "forbidden",
    "not_found",
    "no_route",
    "in_progress",
    "quarantined",
    "lease_lost",
    "already_completed",
    "step_conflict",
    "too_many_steps",
    "not_quarantined",
    "key_reused",
    "invalid_webhook",
    "webhook_not_found",
    "quota_exceeded",
    "rate_limited",
    "unavailable",
];

impl Error {
    /// The typed error of a problem answer.
    pub fn from_problem(problem: Problem, retry_after: Option<Duration>) -> Self {
        match problem.code.as_str() {
            "invalid_json" => Self::InvalidJson(problem),
            "invalid_body" => Self::InvalidBody(problem),
            "invalid_policy" => Self::InvalidPolicy(problem),
            "invalid_key" => Self::InvalidKey(problem),
            "invalid_operation" => Self::InvalidOperation(problem),
            "invalid_fingerprint" => Self::InvalidFingerprint(problem),
            "number_out_of_range" => Self::NumberOutOfRange(problem),
            "invalid_request" => Self::InvalidRequest(problem),
            "invalid_lease" => Self::InvalidLease(problem),
            "invalid_outcome" => Self::InvalidOutcome(problem),
            "invalid_step" => Self::InvalidStep(problem),
            "invalid_query" => Self::InvalidQuery(problem),
            "payload_too_large" => Self::PayloadTooLarge(problem),
            "outcome_too_large" => Self::OutcomeTooLarge(problem),
            "unauthorized" => Self::Unauthorized(problem),
            "forbidden" => Self::Forbidden(problem),
            "not_found" => Self::NotFound(problem),
            "no_route" => Self::NoRoute(problem),
            "in_progress" => Self::InProgress {
                problem,
                retry_after,
            },
            "quarantined" => Self::Quarantined(problem),
            "lease_lost" => Self::LeaseLost(problem),
            "already_completed" => Self::AlreadyCompleted(problem),
            "step_conflict" => Self::StepConflict(problem),
            "too_many_steps" => Self::TooManySteps(problem),
            "not_quarantined" => Self::NotQuarantined(problem),
            "key_reused" => {
                let mismatched = problem
                    .members
                    .get("mismatched")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    });
                let mismatched_truncated = problem
                    .members
                    .get("mismatched_truncated")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                Self::KeyReused {
                    problem,
                    mismatched,
                    mismatched_truncated,
                }
            }
            "invalid_webhook" => Self::InvalidWebhook(problem),
            "webhook_not_found" => Self::WebhookNotFound(problem),
            "quota_exceeded" => Self::QuotaExceeded(problem),
            "rate_limited" => Self::RateLimited {
                problem,
                retry_after,
            },
            "unavailable" => Self::Unavailable {
                problem,
                retry_after,
            },
            _ => Self::UnexpectedResponse {
                status: problem.status,
                message: format!("unknown problem code {:?}", problem.code),
                problem: Some(problem),
            },
        }
    }

    /// The problem document, when the error is a server answer.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            Self::InvalidJson(p)
            | Self::InvalidBody(p)
            | Self::InvalidPolicy(p)
            | Self::InvalidKey(p)
            | Self::InvalidOperation(p)
            | Self::InvalidFingerprint(p)
            | Self::NumberOutOfRange(p)
            | Self::InvalidRequest(p)
            | Self::InvalidLease(p)
            | Self::InvalidOutcome(p)
            | Self::InvalidStep(p)
            | Self::InvalidQuery(p)
            | Self::PayloadTooLarge(p)
            | Self::OutcomeTooLarge(p)
            | Self::Unauthorized(p)
            | Self::Forbidden(p)
            | Self::NotFound(p)
            | Self::NoRoute(p)
            | Self::Quarantined(p)
            | Self::LeaseLost(p)
            | Self::AlreadyCompleted(p)
            | Self::StepConflict(p)
            | Self::TooManySteps(p)
            | Self::NotQuarantined(p)
            | Self::InvalidWebhook(p)
            | Self::WebhookNotFound(p)
            | Self::QuotaExceeded(p) => Some(p),
            Self::InProgress { problem, .. }
            | Self::KeyReused { problem, .. }
            | Self::RateLimited { problem, .. }
            | Self::Unavailable { problem, .. }
            | Self::InProgressTimeout { problem, .. } => Some(problem),
            Self::UnexpectedResponse { problem, .. } => problem.as_ref(),
            Self::Transport { .. }
            | Self::Ambiguous { .. }
            | Self::NothingDone { .. }
            | Self::Config(_) => None,
        }
    }

    /// The stable code: the problem's `code` for server answers
    /// (`lease_lost` for [`Error::LeaseLost`] whatever answer showed it), or
    /// the SDK's own: `transport`, `in_progress_timeout`, `effect_ambiguous`,
    /// `nothing_done`, `config`, `unexpected_response`.
    pub fn code(&self) -> &str {
        match self {
            Self::LeaseLost(_) => "lease_lost",
            Self::Transport { .. } => "transport",
            Self::InProgressTimeout { .. } => "in_progress_timeout",
            Self::Ambiguous { .. } => "effect_ambiguous",
            Self::NothingDone { .. } => "nothing_done",
            Self::Config(_) => "config",
            Self::UnexpectedResponse {
                problem: Some(p), ..
            } => p.code.as_str(),
            Self::UnexpectedResponse { .. } => "unexpected_response",
            other => other.problem().map_or("unexpected_response", |p| &p.code),
        }
    }

    /// The HTTP status of the answer, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::UnexpectedResponse { status, .. } => Some(*status),
            other => other.problem().map(|p| p.status),
        }
    }
}
