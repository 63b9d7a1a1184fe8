//! `POST /dashboard/keys/{operation}/{key}/resolve`: an admin finishes a
//! quarantined key (or one whose lease ran out) with an outcome, or
//! releases it. The same engine calls as `POST /v1/.../resolve`.
//!
//! Checked in this order, each on the server: session, CSRF token, admin
//! role, then the input. A viewer who forges the form gets 403 whatever it
//! carries.

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use idemkey_api::domain::outcome::OutcomeError;
use idemkey_api::domain::usage::UsageEvent;
use idemkey_api::domain::Outcome;
use idemkey_api::engine::Refusal;
use idemkey_api::routes::AppState;
use idemkey_api::store::Resolver;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::key::{key_page, scoped, Actions};
use super::key_url;
use crate::csrf;
use crate::error::PageError;
use crate::format;
use crate::render::{render, see_other};
use crate::session::{Keys, Session};

/// The longest release reason (as in the API).
const REASON_LIMIT: usize = 1024;

#[derive(Deserialize)]
pub struct ResolveForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    outcome: String,
    #[serde(default)]
    reason: String,
}

pub async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    path: web::Path<(String, String)>,
    form: web::Form<ResolveForm>,
) -> Result<HttpResponse, PageError> {
    if !csrf::session_token_ok(&Keys::of(&req), &session, &form.csrf) {
        return Err(PageError::Forbidden(
            "This form expired or did not come from this site. Reload the key's page and try again.",
        ));
    }
    if !session.is_admin() {
        return Err(PageError::Forbidden(
            "Only an admin can resolve or release a key. Sign in with an admin token.",
        ));
    }
    let k = scoped(&session, &path)?;
    let record = state.engine.current(&k).await?;
    let by = Resolver {
        owner: None,
        actor: session.actor(),
    };
    let mut actions = Actions::blank(&session, &k, &record);
    actions.outcome = form.outcome.clone();
    actions.reason = form.reason.clone();
    match form.action.as_str() {
        "complete" => match parse_outcome(&state, &k, &form.outcome).await {
            Err(why) => actions.outcome_error = Some(why),
            Ok(outcome) => match state.engine.resolve_complete(&k, &by, &outcome).await {
                Ok(_) => {
                    let url = key_url(k.operation.as_str(), k.key.as_str());
                    return Ok(see_other(&format!("{url}?done=resolved")));
                }
                Err(e) => actions.outcome_error = Some(refusal(e)?),
            },
        },
        "release" => {
            let reason = form.reason.trim();
            if reason.len() > REASON_LIMIT {
                actions.release_error =
                    Some(format!("The reason must be at most {REASON_LIMIT} bytes."));
            } else {
                let reason = (!reason.is_empty()).then_some(reason);
                match state.engine.resolve_release(&k, &by, reason).await {
                    Ok(()) => {
                        state.usage.count(&k, UsageEvent::Released);
                        return Ok(see_other("/dashboard/keys?done=released"));
                    }
                    Err(e) => actions.release_error = Some(refusal(e)?),
                }
            }
        }
        _ => {
            return Err(PageError::BadRequest(
                "action must be complete or release".into(),
            ))
        }
    }
    let page = key_page(&req, &state, &session, &k, &record, actions, None);
    Ok(render(StatusCode::UNPROCESSABLE_ENTITY, &page))
}

/// The outcome typed into the form, checked as the API checks it.
async fn parse_outcome(
    state: &AppState,
    k: &idemkey_api::domain::ScopedKey,
    text: &str,
) -> Result<Outcome, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "Enter the outcome as a JSON object, such as {\"status_code\": 201, \"body\": {}}."
                .into(),
        );
    }
    let raw = RawValue::from_string(text.to_owned())
        .map_err(|e| format!("The outcome is not valid JSON: {e}."))?;
    let policy = state
        .engine
        .policy(&k.tenant, &k.operation)
        .await
        .map_err(|_| "The class's policy could not be read; try again.".to_owned())?;
    Outcome::parse(&raw, policy.max_outcome_bytes).map_err(|e| match e {
        OutcomeError::Invalid(why) => format!("The outcome is not valid: {why}."),
        OutcomeError::TooLarge { limit } => format!(
            "The outcome is larger than this class allows ({}).",
            format::bytes(limit)
        ),
    })
}

/// A refusal the form should explain, or an error page for anything else.
fn refusal(e: Refusal) -> Result<String, PageError> {
    match e {
        Refusal::AlreadyCompleted => Ok("The key was already completed with a different outcome; its stored outcome never changes.".into()),
        e @ (Refusal::StepConflict | Refusal::TooManySteps | Refusal::NotResolvable) => {
            Ok(format!("{}.", capitalised(&e.to_string())))
        }
        Refusal::Quarantined | Refusal::LeaseLost => {
            Ok("The key changed while you were looking at it. Reload and try again.".into())
        }
        other => Err(other.into()),
    }
}

/// `text` with its first letter in upper case.
fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
