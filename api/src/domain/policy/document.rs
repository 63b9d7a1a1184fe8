//! A policy as JSON (SPEC section 6): what `PUT /v1/operation-classes/{op}`
//! accepts, what `GET` answers and what the store keeps.
//!
//! Reading takes two steps. Serde checks the shape: only known members, each
//! of the right JSON type (an error names the member by its path, such as
//! `fingerprint.include[0]`). Then [`PolicyDocument::into_policy`] checks the
//! values, fills in the defaults and produces a [`Policy`]. Every error names
//! the field it is about, first.
//!
//! Defaults: a missing member (or `null`) takes the value of
//! [`Policy::default`], except that a missing `hot_retention` is capped at the
//! window and a missing `lease` at `max_lease`, so that leaving them out never
//! makes a valid policy invalid.
//!
//! Writing ([`PolicyDocument::from_policy`]) gives the canonical form: every
//! member present, durations in their shortest exact spelling (`"24h"` comes
//! back as `"1d"`), pointer lists in the order given.

mod object_only;

use std::time::Duration;

use object_only::{object_only, ObjectOnly};
use serde::{Deserialize, Serialize};

use super::{LeaseExpiry, Policy, MAX_OUTCOME_BYTES_CEILING, MIN_LEASE};
use crate::domain::duration::{format_duration, parse_duration, DurationText};
use crate::domain::fingerprint::FingerprintRules;

/// No duration in a policy is shorter (SPEC: minimum `"1s"`).
pub const MIN_DURATION: Duration = Duration::from_secs(1);
/// The longest replay window a class may promise.
pub const MAX_REPLAY_WINDOW: Duration = Duration::from_secs(365 * 86_400);
/// The longest lease a class may allow.
pub const MAX_LEASE_CEILING: Duration = Duration::from_secs(24 * 3600);
/// The longest a duplicate may be held waiting in one request.
pub const MAX_WAIT_CEILING: Duration = Duration::from_secs(60);
/// Fingerprint pointer lists run on every claim: keep them short.
pub const MAX_POINTERS: usize = 64;
pub const MAX_POINTER_BYTES: usize = 1024;

/// A policy as JSON: every member is optional; a missing (or `null`)
/// member takes its default. No duration may be shorter than `1s`. (The
/// canonical form, [`Self::from_policy`], has every member.)
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = PolicyInput, example = json!({
    "replay_window": "48h",
    "lease": "90s",
    "fingerprint": {"exclude": ["/request_id"], "decimal_fields": ["/amount"]}
}))]
pub struct PolicyDocument {
    /// How long a key is protected from its first claim. Default `1d`;
    /// `1s`–`365d`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DurationText>)]
    pub replay_window: Option<String>,
    /// How long a completed record's outcome stays in the database before the
    /// tiering worker may move it to the archive. Default `1h`, capped at the
    /// window; at most `replay_window` (equal to it: never archived).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DurationText>)]
    pub hot_retention: Option<String>,
    /// The lease of a claim without `lease_ms`. Default `30s`, capped at
    /// `max_lease`; at most `max_lease`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DurationText>)]
    pub lease: Option<String>,
    /// The largest `lease_ms` a claim or heartbeat may ask for. Default `1h`;
    /// at most `24h`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DurationText>)]
    pub max_lease: Option<String>,
    /// The cap on a claim's `wait_ms`. Default `10s`; at most `60s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<DurationText>)]
    pub max_wait: Option<String>,
    /// The largest outcome (as sent) complete accepts. Default 1048576.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 8388608)]
    pub max_outcome_bytes: Option<u64>,
    /// What the next claim does when the owner's lease ran out: `takeover`
    /// or `quarantine`. Default `takeover`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<LeaseExpiryWord>)]
    pub on_lease_expiry: Option<String>,
    /// Which parts of `request` are protected. Default: all lists empty, the
    /// whole request is protected.
    #[serde(
        default,
        deserialize_with = "object_only",
        skip_serializing_if = "Option::is_none"
    )]
    pub fingerprint: Option<FingerprintDocument>,
    /// Read-only: whether the class has no stored policy. The API sets it on
    /// answers; input may carry it (so a policy read with `GET` can be edited
    /// and sent back) and it is ignored.
    #[serde(rename = "default", skip_serializing_if = "Option::is_none")]
    pub is_default: Option<bool>,
}

/// The `fingerprint` member: RFC 6901 pointers (see `domain::fingerprint`),
/// at most 64 per list, each at most 1024 bytes; a list left out (or `null`)
/// is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = FingerprintRulesInput)]
pub struct FingerprintDocument {
    /// If not empty, only these values are protected.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 64)]
    pub include: Option<Vec<String>>,
    /// These values are removed before fingerprinting.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 64)]
    pub exclude: Option<Vec<String>>,
    /// Strings holding plain decimals here are normalised (`"25.00"` =
    /// `"25"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 64)]
    pub decimal_fields: Option<Vec<String>>,
}

/// The words of `on_lease_expiry`.
#[derive(utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum LeaseExpiryWord {
    Takeover,
    Quarantine,
}

/// A policy value that is not allowed. `message` starts with `field`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidPolicy {
    pub field: String,
    pub message: String,
}

impl InvalidPolicy {
    fn new(field: &str, rest: impl std::fmt::Display) -> Self {
        Self {
            field: field.to_owned(),
            message: format!("{field} {rest}"),
        }
    }
}

/// Why a policy text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyJsonError {
    /// The text is not JSON at all.
    #[error("{0}")]
    Syntax(String),
    /// JSON, but not an allowed policy.
    #[error(transparent)]
    Invalid(#[from] InvalidPolicy),
}

impl PolicyDocument {
    /// Reads the shape of a policy from JSON text; the values are checked by
    /// [`Self::into_policy`].
    pub fn from_json(json: &[u8]) -> Result<Self, PolicyJsonError> {
        let mut de = serde_json::Deserializer::from_slice(json);
        let doc = serde_path_to_error::deserialize(ObjectOnly(&mut de)).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            match inner.classify() {
                serde_json::error::Category::Data => {
                    let field = if path == "." { "policy" } else { &path };
                    InvalidPolicy::new(field, format_args!("is invalid: {inner}")).into()
                }
                _ => PolicyJsonError::Syntax(inner.to_string()),
            }
        })?;
        de.end()
            .map_err(|e| PolicyJsonError::Syntax(e.to_string()))?;
        Ok(doc)
    }

    /// Checks every value and fills in the defaults.
    pub fn into_policy(self) -> Result<Policy, InvalidPolicy> {
        let d = Policy::default();
        let replay_window = match self.replay_window {
            None => d.replay_window,
            Some(s) => duration("replay_window", &s, MAX_REPLAY_WINDOW, "")?,
        };
        let window = format!("replay_window ({})", format_duration(replay_window));
        let hot_retention = match self.hot_retention {
            None => d.hot_retention.min(replay_window),
            Some(s) => duration("hot_retention", &s, replay_window, &window)?,
        };
        let max_lease = match self.max_lease {
            None => d.max_lease,
            Some(s) => duration("max_lease", &s, MAX_LEASE_CEILING, "")?,
        };
        let max_lease_name = format!("max_lease ({})", format_duration(max_lease));
        let lease = match self.lease {
            None => d.lease.min(max_lease),
            Some(s) => duration("lease", &s, max_lease, &max_lease_name)?,
        };
        debug_assert!(lease >= MIN_LEASE);
        let max_wait = match self.max_wait {
            None => d.max_wait,
            Some(s) => duration("max_wait", &s, MAX_WAIT_CEILING, "")?,
        };
        let max_outcome_bytes = match self.max_outcome_bytes {
            None => d.max_outcome_bytes,
            Some(n) => match usize::try_from(n) {
                Ok(n) if (1..=MAX_OUTCOME_BYTES_CEILING).contains(&n) => n,
                _ => {
                    return Err(InvalidPolicy::new(
                        "max_outcome_bytes",
                        format_args!("must be from 1 to {MAX_OUTCOME_BYTES_CEILING}"),
                    ))
                }
            },
        };
        let on_lease_expiry = match self.on_lease_expiry.as_deref() {
            None => d.on_lease_expiry,
            Some("takeover") => LeaseExpiry::Takeover,
            Some("quarantine") => LeaseExpiry::Quarantine,
            Some(other) => {
                return Err(InvalidPolicy::new(
                    "on_lease_expiry",
                    format_args!("must be \"takeover\" or \"quarantine\", got {other:?}"),
                ))
            }
        };
        let fp = self.fingerprint.unwrap_or_default();
        let fingerprint = FingerprintRules {
            include: pointers("fingerprint.include", fp.include)?,
            exclude: pointers("fingerprint.exclude", fp.exclude)?,
            decimal_fields: pointers("fingerprint.decimal_fields", fp.decimal_fields)?,
        };
        Ok(Policy {
            replay_window,
            hot_retention,
            lease,
            max_lease,
            max_wait,
            max_outcome_bytes,
            on_lease_expiry,
            fingerprint,
        })
    }

    /// The canonical form of `policy`: every member present.
    pub fn from_policy(policy: &Policy) -> Self {
        let rules = &policy.fingerprint;
        Self {
            replay_window: Some(format_duration(policy.replay_window)),
            hot_retention: Some(format_duration(policy.hot_retention)),
            lease: Some(format_duration(policy.lease)),
            max_lease: Some(format_duration(policy.max_lease)),
            max_wait: Some(format_duration(policy.max_wait)),
            max_outcome_bytes: Some(policy.max_outcome_bytes as u64),
            on_lease_expiry: Some(
                match policy.on_lease_expiry {
                    LeaseExpiry::Takeover => "takeover",
                    LeaseExpiry::Quarantine => "quarantine",
                }
                .to_owned(),
            ),
            fingerprint: Some(FingerprintDocument {
                include: Some(rules.include.clone()),
                exclude: Some(rules.exclude.clone()),
                decimal_fields: Some(rules.decimal_fields.clone()),
            }),
            is_default: None,
        }
    }
}

impl Policy {
    /// Reads a policy from JSON text: shape, then values.
    pub fn from_json(json: &[u8]) -> Result<Self, PolicyJsonError> {
        Ok(PolicyDocument::from_json(json)?.into_policy()?)
    }

    /// The canonical JSON text of this policy (as the store keeps it).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&PolicyDocument::from_policy(self)).expect("policies serialise")
    }
}

/// A duration of at least 1 s and at most `max` (`max_name` names a bound
/// that is another field; empty for a fixed ceiling).
fn duration(
    field: &str,
    text: &str,
    max: Duration,
    max_name: &str,
) -> Result<Duration, InvalidPolicy> {
    let d = parse_duration(text).ok_or_else(|| {
        InvalidPolicy::new(
            field,
            format_args!(
                "must be a duration such as \"90s\", \"15m\", \"24h\" or \"7d\", got {text:?}"
            ),
        )
    })?;
    if d < MIN_DURATION {
        return Err(InvalidPolicy::new(field, "must be at least 1s"));
    }
    if d > max {
        return Err(match max_name {
            "" => InvalidPolicy::new(
                field,
                format_args!("must not exceed {}", format_duration(max)),
            ),
            bound => InvalidPolicy::new(field, format_args!("must not exceed {bound}")),
        });
    }
    Ok(d)
}

fn pointers(field: &str, list: Option<Vec<String>>) -> Result<Vec<String>, InvalidPolicy> {
    let list = list.unwrap_or_default();
    if list.len() > MAX_POINTERS {
        return Err(InvalidPolicy::new(
            field,
            format_args!("must not hold more than {MAX_POINTERS} pointers"),
        ));
    }
    for p in &list {
        let one = FingerprintRules {
            include: vec![p.clone()],
            ..FingerprintRules::default()
        };
        if p.len() > MAX_POINTER_BYTES || one.validate().is_err() {
            return Err(InvalidPolicy::new(
                field,
                format_args!(
                    "has an invalid JSON pointer {p:?} (RFC 6901: \"\" or \"/a/b\", \
                     ~ only as ~0 or ~1, at most {MAX_POINTER_BYTES} bytes)"
                ),
            ));
        }
    }
    Ok(list)
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
