//! Which keys a list shows: a state (or the union of the stuck ones), a
//! class, an age, and where the previous page stopped.

use std::time::Duration;

use idemkey_api::domain::duration::{format_duration, parse_duration};
use idemkey_api::domain::OperationName;
use idemkey_api::store::{ListCursor, ListQuery, ListState};

use super::ListParams;
use crate::error::PageError;
use crate::pages::segment;

/// "Long in progress" unless the page is asked for another threshold.
pub const DEFAULT_OLDER_THAN: Duration = Duration::from_secs(300);

/// The states a list can be narrowed to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// Every stuck key: lease expired, quarantined, or in progress for
    /// longer than the threshold.
    Stuck,
    LeaseExpired,
    Quarantined,
    InProgress,
    Completed,
    /// Every key, whatever its state.
    Any,
}

impl Filter {
    fn parse(s: Option<&str>) -> Option<Self> {
        match s {
            None | Some("") | Some("all") => Some(Self::Stuck),
            Some("lease_expired") => Some(Self::LeaseExpired),
            Some("quarantined") => Some(Self::Quarantined),
            Some("in_progress") => Some(Self::InProgress),
            Some("completed") => Some(Self::Completed),
            Some("any") => Some(Self::Any),
            Some(_) => None,
        }
    }

    pub fn param(self) -> &'static str {
        match self {
            Self::Stuck => "all",
            Self::LeaseExpired => "lease_expired",
            Self::Quarantined => "quarantined",
            Self::InProgress => "in_progress",
            Self::Completed => "completed",
            Self::Any => "any",
        }
    }

    /// Whether the age is a "long in progress" threshold (always set) rather
    /// than an optional "first claimed at least this long ago".
    pub fn has_threshold(self) -> bool {
        matches!(self, Self::Stuck | Self::InProgress)
    }

    /// Whether the age narrows this list at all.
    pub fn uses_age(self) -> bool {
        !matches!(self, Self::LeaseExpired | Self::Quarantined)
    }
}

/// A list as asked for, checked.
pub struct Selection {
    pub filter: Filter,
    pub operation: Option<OperationName>,
    /// The age the list uses (see [`Filter::has_threshold`]); `None`: any.
    pub older_than: Option<Duration>,
    pub after: Option<ListCursor>,
}

impl Selection {
    pub fn parse(q: &ListParams) -> Result<Self, PageError> {
        let filter = Filter::parse(q.state.as_deref()).ok_or_else(|| {
            PageError::BadRequest(
                "state must be all, lease_expired, quarantined, in_progress, completed or any"
                    .into(),
            )
        })?;
        let operation = match q
            .operation
            .as_deref()
            .map(str::trim)
            .filter(|o| !o.is_empty())
        {
            Some(o) => {
                Some(OperationName::parse(o).map_err(|e| PageError::BadRequest(e.to_string()))?)
            }
            None => None,
        };
        let asked = match q.older_than.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(
                parse_duration(s)
                    .filter(|d| *d <= ListQuery::MAX_OLDER_THAN)
                    .ok_or_else(|| {
                        PageError::BadRequest(
                            "older_than must be a duration such as 15m, at most 36500d".into(),
                        )
                    })?,
            ),
        };
        let older_than = match filter {
            f if f.has_threshold() => Some(asked.unwrap_or(DEFAULT_OLDER_THAN)),
            f if f.uses_age() => asked,
            _ => None,
        };
        let after =
            match q.cursor.as_deref().filter(|c| !c.is_empty()) {
                Some(c) => Some(ListCursor::decode(c).ok_or_else(|| {
                    PageError::BadRequest("cursor is not one this page made".into())
                })?),
                None => None,
            };
        Ok(Self {
            filter,
            operation,
            older_than,
            after,
        })
    }

    /// The listings that make up this selection, each at most `limit` rows
    /// after the cursor. Their union, in the listing's order, is the page:
    /// every listing is cut at the same position, so merging them pages
    /// exactly.
    pub fn queries(&self, limit: u32) -> Vec<ListQuery> {
        let query = |state, older_than| ListQuery {
            state,
            operation: self.operation.clone(),
            older_than,
            limit,
            after: self.after.clone(),
        };
        let long = self.older_than;
        match self.filter {
            Filter::Stuck => vec![
                query(Some(ListState::LeaseExpired), None),
                query(Some(ListState::Quarantined), None),
                query(Some(ListState::InProgress), long),
            ],
            Filter::LeaseExpired => vec![query(Some(ListState::LeaseExpired), None)],
            Filter::Quarantined => vec![query(Some(ListState::Quarantined), None)],
            Filter::InProgress => vec![query(Some(ListState::InProgress), long)],
            Filter::Completed => vec![query(Some(ListState::Completed), long)],
            Filter::Any => vec![query(None, long)],
        }
    }

    /// This page's address with another filter, age or cursor.
    pub fn href(
        &self,
        filter: Filter,
        older_than: Option<Duration>,
        cursor: Option<&str>,
    ) -> String {
        let mut href = format!("/dashboard/keys?state={}", filter.param());
        if let Some(op) = &self.operation {
            href.push_str(&format!("&operation={}", segment(op.as_str())));
        }
        if let Some(d) = older_than {
            href.push_str(&format!("&older_than={}", format_duration(d)));
        }
        if let Some(c) = cursor {
            href.push_str(&format!("&cursor={c}"));
        }
        href
    }
}
