//! `GET /v1/keys`: a tenant's keys, newest first, one page at a time — how
//! stuck keys (expired leases, long in progress, quarantined) are found.
//!
//! Pages follow a keyset cursor on (first claim time, operation, key), so
//! paging stays stable while keys change: new keys land before the first
//! page, never inside a page already read.

use actix_web::{get, web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::caller::{role_names, Caller, Reader};
use super::openapi::schemas::{EffectId, Timestamp};
use super::view::{rfc3339, RecordStateWord};
use super::AppState;
use crate::domain::duration::parse_duration;
use crate::domain::duration::DurationText;
use crate::domain::{OperationName, ScopedKey};
use crate::error::{ApiError, ErrorCode};
use crate::store::{KeyRecord, ListCursor, ListQuery, ListState};

const DEFAULT_LIMIT: u32 = 50;
const MAX_LIMIT: u32 = 500;

/// The list's query; every parameter is optional, and any other is 400
/// `invalid_query`.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct Params {
    /// `lease_expired`: in progress, lease run out, not yet taken over.
    #[param(value_type = Option<ListStateWord>, inline)]
    state: Option<String>,
    /// Only this operation class.
    #[param(pattern = "^[a-z0-9][a-z0-9._-]{0,63}$")]
    operation: Option<String>,
    /// Only keys first claimed at least this long ago (at most `36500d`).
    #[param(value_type = Option<DurationText>)]
    older_than: Option<String>,
    /// Page size.
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500, default = 50)]
    limit: Option<String>,
    /// The `next_cursor` of the previous page (opaque).
    cursor: Option<String>,
}

/// The states a list may be narrowed to.
#[derive(ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)] // a schema: `parse` reads the words
enum ListStateWord {
    InProgress,
    Completed,
    Quarantined,
    LeaseExpired,
}

/// One key of a list: its record without outcome, steps and history.
#[derive(Serialize, ToSchema)]
#[schema(as = KeyItem)]
struct Item<'a> {
    operation: &'a str,
    key: &'a str,
    #[schema(value_type = RecordStateWord, inline)]
    state: &'static str,
    attempt: i32,
    #[schema(value_type = EffectId)]
    effect_id: String,
    #[schema(value_type = Timestamp)]
    created_at: String,
    #[schema(value_type = Timestamp)]
    claimed_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Timestamp, required = false)]
    lease_expires_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Timestamp, required = false)]
    completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, required = false)]
    quarantine_reason: Option<&'a str>,
    #[schema(value_type = Timestamp)]
    expires_at: String,
}

/// One page of keys.
#[derive(Serialize, ToSchema)]
#[schema(as = KeyPage)]
struct Page<'a> {
    items: Vec<Item<'a>>,
    /// The cursor of the next page; `null` on the last page.
    #[schema(required = true)]
    next_cursor: Option<String>,
}

crate::problems!(
    /// What a list can refuse with.
    ListProblems: InvalidQuery, Unauthorized, Forbidden, RateLimited, Unavailable
);

/// List the tenant's live keys, newest first
///
/// Roles: `client`, `viewer` or `admin`. Lists keys not past their window,
/// newest first by first claim, one page at a time. Paging is stable while
/// keys change. Items leave out outcomes, steps and history. Stuck keys in
/// practice: `state=lease_expired`, `state=quarantined`,
/// `state=in_progress&older_than=1h`. Unknown parameters and bad values are
/// 400 `invalid_query`.
#[utoipa::path(
    tag = "recovery",
    operation_id = "listKeys",
    params(Params),
    responses((status = 200, description = "One page.", body = Page), ListProblems),
    extensions(("x-roles" = json!(role_names::<Reader>()))),
)]
#[get("/v1/keys")]
pub async fn list(
    state: web::Data<AppState>,
    caller: Caller<Reader>,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let query = parse(req.query_string())?;
    let rows = state.engine.list(&caller.principal.tenant, &query).await?;
    let next_cursor = (rows.len() == query.limit as usize)
        .then(|| rows.last().map(|(k, r)| ListCursor::after(k, r).encode()))
        .flatten();
    let items = rows.iter().map(|(k, r)| item(&state, k, r)).collect();
    Ok(HttpResponse::Ok().json(Page { items, next_cursor }))
}

fn item<'a>(state: &AppState, k: &'a ScopedKey, r: &'a KeyRecord) -> Item<'a> {
    Item {
        operation: k.operation.as_str(),
        key: k.key.as_str(),
        state: r.state.as_str(),
        attempt: r.attempt,
        effect_id: state.engine.effect_id(k),
        created_at: rfc3339(r.created_at),
        claimed_at: rfc3339(r.claimed_at),
        lease_expires_at: (r.state == crate::domain::RecordState::InProgress)
            .then(|| rfc3339(r.lease_expires_at)),
        completed_at: r.completed_at.map(rfc3339),
        quarantine_reason: r.quarantine_reason.as_deref(),
        expires_at: rfc3339(r.protected_until()),
    }
}

fn invalid(detail: impl Into<String>) -> ApiError {
    ApiError::bad_request(ErrorCode::InvalidQuery, detail)
}

fn parse(query: &str) -> Result<ListQuery, ApiError> {
    let p = web::Query::<Params>::from_query(query)
        .map_err(|e| invalid(e.to_string()))?
        .into_inner();
    let state = p
        .state
        .map(|s| match s.as_str() {
            "in_progress" => Ok(ListState::InProgress),
            "completed" => Ok(ListState::Completed),
            "quarantined" => Ok(ListState::Quarantined),
            "lease_expired" => Ok(ListState::LeaseExpired),
            _ => Err(invalid(
                "state must be in_progress, completed, quarantined or lease_expired",
            )),
        })
        .transpose()?;
    let operation = p
        .operation
        .map(|o| OperationName::parse(&o).map_err(|e| invalid(e.to_string())))
        .transpose()?;
    let older_than = p
        .older_than
        .map(|d| {
            parse_duration(&d)
                .ok_or_else(|| invalid("older_than must be a duration such as 15m"))
                .and_then(|d| match d <= ListQuery::MAX_OLDER_THAN {
                    true => Ok(d),
                    false => Err(invalid("older_than must be at most 36500d")),
                })
        })
        .transpose()?;
    let limit = match p.limit {
        None => DEFAULT_LIMIT,
        Some(l) => l
            .parse::<u32>()
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| invalid("limit must be 1-500"))?,
    };
    let after = p
        .cursor
        .map(|c| {
            ListCursor::decode(&c).ok_or_else(|| invalid("cursor is not one this service issued"))
        })
        .transpose()?;
    Ok(ListQuery {
        state,
        operation,
        older_than,
        limit,
        after,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_parse_with_defaults_and_bounds() {
        let q = parse("").unwrap();
        assert_eq!((q.limit, q.state, q.older_than), (50, None, None));
        let q =
            parse("state=lease_expired&older_than=15m&limit=500&operation=charges.create").unwrap();
        assert_eq!(q.state, Some(ListState::LeaseExpired));
        assert_eq!(q.older_than, Some(std::time::Duration::from_secs(900)));
        for bad in [
            "limit=0",
            "limit=501",
            "state=stuck",
            "older_than=soon",
            "operation=X",
            "page=2",
            "cursor=%%%",
            "older_than=300000000d",
            // [micros far past year 9999, "op", "k"]
            "cursor=Wzk5OTk5OTk5OTk5OTk5OTk5OSwib3AiLCJrIl0",
            // [0, "Not An Operation", "k"]
            "cursor=WzAsIk5vdCBBbiBPcGVyYXRpb24iLCJrIl0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
