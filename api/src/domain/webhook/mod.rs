//! Lifecycle webhooks, as rules without I/O: which events there are, what
//! makes an endpoint's settings valid, how long to wait before the next
//! delivery attempt, and how a delivery is signed ([`signature`]).
//!
//! An endpoint belongs to one tenant and one operation class and hears only
//! of that class's keys. Each event is named by what it is about (the key,
//! its attempt and that attempt's claim time; or a spike's window), so it
//! is queued once per endpoint however often it is seen.

pub mod signature;

use std::time::Duration;

use crate::domain::duration::parse_duration;

/// The events an endpoint can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// A key was quarantined (by its owner or the lease watch).
    Quarantined,
    /// A key has been in progress, one attempt, for longer than the
    /// endpoint's `stuck_after`.
    Stuck,
    /// A claim took over a key whose lease had run out (`recovering`).
    TakenOver,
    /// At least `threshold` claims were refused as `key_reused` within one
    /// window.
    KeyReusedSpike,
}

impl EventKind {
    pub const ALL: [EventKind; 4] = [
        Self::Quarantined,
        Self::Stuck,
        Self::TakenOver,
        Self::KeyReusedSpike,
    ];

    /// The word in the API, the database and the dashboard.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quarantined => "quarantined",
            Self::Stuck => "stuck",
            Self::TakenOver => "taken_over",
            Self::KeyReusedSpike => "key_reused_spike",
        }
    }

    /// The payload's `type`.
    pub fn event_type(self) -> &'static str {
        match self {
            Self::Quarantined => "key.quarantined",
            Self::Stuck => "key.stuck",
            Self::TakenOver => "key.taken_over",
            Self::KeyReusedSpike => "class.key_reused_spike",
        }
    }

    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == word)
    }
}

/// The shortest `stuck_after` an endpoint may ask for, and the longest.
pub const STUCK_AFTER: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(7 * 24 * 3600));
/// The spike window's bounds.
pub const SPIKE_WINDOW: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(24 * 3600));
/// The spike threshold's bounds (the store keeps at most 200 recent
/// refusals per class, so a larger threshold could never be reached).
pub const SPIKE_THRESHOLD: (u32, u32) = (1, 200);
/// Endpoints per tenant and class.
pub const MAX_ENDPOINTS_PER_CLASS: usize = 10;
/// A URL's longest length in bytes.
pub const MAX_URL_BYTES: usize = 2048;

/// An endpoint's settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    pub url: String,
    /// Sorted, without repeats, never empty.
    pub events: Vec<EventKind>,
    pub stuck_after: Option<Duration>,
    /// `(threshold, window)`.
    pub spike: Option<(u32, Duration)>,
}

/// What an endpoint's settings can get wrong; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

/// The settings as a caller sends them, before they are checked.
#[derive(Debug, Default, Clone)]
pub struct RawSpec<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub stuck_after: Option<&'a str>,
    pub spike_threshold: Option<u32>,
    pub spike_window: Option<&'a str>,
}

impl EndpointSpec {
    /// Checks the settings: an `http` or `https` URL without credentials;
    /// known events; `stuck_after` exactly when `stuck` is asked for, and
    /// the spike's threshold and window exactly when `key_reused_spike` is.
    pub fn parse(raw: &RawSpec<'_>) -> Result<Self, SpecError> {
        let url = check_url(raw.url)?;
        let mut events = Vec::new();
        for word in raw.events {
            let kind = EventKind::parse(word)
                .ok_or_else(|| SpecError(format!("events: unknown event {word:?}")))?;
            if !events.contains(&kind) {
                events.push(kind);
            }
        }
        if events.is_empty() {
            return Err(SpecError("events: name at least one event".into()));
        }
        events.sort();
        let stuck_after = match (events.contains(&EventKind::Stuck), raw.stuck_after) {
            (true, Some(text)) => Some(within("stuck_after", text, STUCK_AFTER)?),
            (true, None) => return Err(SpecError("stuck_after: required with `stuck`".into())),
            (false, Some(_)) => return Err(SpecError("stuck_after: only with `stuck`".into())),
            (false, None) => None,
        };
        let spiking = events.contains(&EventKind::KeyReusedSpike);
        let spike = match (spiking, raw.spike_threshold, raw.spike_window) {
            (true, Some(n), Some(window)) => {
                if !(SPIKE_THRESHOLD.0..=SPIKE_THRESHOLD.1).contains(&n) {
                    return Err(SpecError(format!(
                        "spike_threshold: from {} to {}",
                        SPIKE_THRESHOLD.0, SPIKE_THRESHOLD.1
                    )));
                }
                Some((n, within("spike_window", window, SPIKE_WINDOW)?))
            }
            (true, _, _) => {
                return Err(SpecError(
                    "spike_threshold and spike_window: required with `key_reused_spike`".into(),
                ))
            }
            (false, None, None) => None,
            (false, _, _) => {
                return Err(SpecError(
                    "spike_threshold and spike_window: only with `key_reused_spike`".into(),
                ))
            }
        };
        Ok(Self {
            url,
            events,
            stuck_after,
            spike,
        })
    }

    pub fn wants(&self, kind: EventKind) -> bool {
        self.events.contains(&kind)
    }
}

fn within(
    field: &str,
    text: &str,
    (min, max): (Duration, Duration),
) -> Result<Duration, SpecError> {
    parse_duration(text)
        .filter(|d| (min..=max).contains(d))
        .ok_or_else(|| {
            SpecError(format!(
                "{field}: a duration from {}s to {}s, such as \"5m\"",
                min.as_secs(),
                max.as_secs()
            ))
        })
}

fn check_url(url: &str) -> Result<String, SpecError> {
    let bad = |why: &str| Err(SpecError(format!("url: {why}")));
    if url.len() > MAX_URL_BYTES {
        return bad("too long");
    }
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return bad("must start with http:// or https://");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.is_empty() {
        return bad("has no host");
    }
    if authority.contains('@') {
        return bad("must not carry credentials");
    }
    if url.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return bad("must not contain spaces or control characters");
    }
    Ok(url.to_owned())
}

/// How long to wait after failed attempt `attempt` (1-based) before the
/// next: `base`, doubling each attempt, capped at [`MAX_BACKOFF`], then
/// spread by `jitter` (from 0 to 1: a factor from 0.75 to 1.25), so that
/// deliveries that failed together do not all come back together.
pub fn backoff(attempt: u32, base: Duration, jitter: f64) -> Duration {
    let doubled = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let capped = doubled.min(MAX_BACKOFF);
    capped.mul_f64(0.75 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(3600);

#[cfg(test)]
mod tests;
