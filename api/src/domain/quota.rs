//! Per-tenant quotas: how much a tenant may keep stored, and the one rule
//! that says when a claim is refused for it.
//!
//! - A quota limits two figures: the tenant's **keys** (live records, hot
//!   or archived) and its **outcome bytes** (the stored outcomes' text, in
//!   the database and in the archive together, so waiting for tiering does
//!   not free a tenant from its limit).
//! - Each limit comes from the operator: a server-wide default, which a
//!   per-tenant override replaces (`Limit::Default` follows the default,
//!   `Limit::Unlimited` exempts the tenant from it).
//! - The figures are *measured* by a worker, not counted per claim, so a
//!   quota is a soft limit: a tenant can pass it by what it stores between
//!   two measurements.
//! - Only a claim that would create a record is ever refused ([`refuses`]):
//!   a replay, a takeover, a completion or anything else on a record that
//!   exists goes on, because its effect may already have happened.

use std::fmt;

/// One limit as an override row holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Follow the server's default.
    Default,
    /// No limit for this tenant, whatever the default.
    Unlimited,
    /// At most this much.
    At(u64),
}

impl Limit {
    /// The stored form: null follows the default, -1 is no limit.
    pub fn to_column(self) -> Option<i64> {
        match self {
            Self::Default => None,
            Self::Unlimited => Some(-1),
            Self::At(n) => Some(i64::try_from(n).unwrap_or(i64::MAX)),
        }
    }

    /// Reads the stored form; `None` for a value the schema forbids.
    pub fn from_column(v: Option<i64>) -> Option<Self> {
        match v {
            None => Some(Self::Default),
            Some(-1) => Some(Self::Unlimited),
            Some(n) => u64::try_from(n).ok().map(Self::At),
        }
    }

    /// `default`, `unlimited` or a whole number (bytes may carry a `KiB`,
    /// `MiB` or `GiB` suffix).
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "default" => Some(Self::Default),
            "unlimited" => Some(Self::Unlimited),
            other => parse_size(other).map(Self::At),
        }
    }

    /// This limit with `default` standing for [`Limit::Default`].
    pub fn or(self, default: Option<u64>) -> Option<u64> {
        match self {
            Self::Default => default,
            Self::Unlimited => None,
            Self::At(n) => Some(n),
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Unlimited => f.write_str("unlimited"),
            Self::At(n) => write!(f, "{n}"),
        }
    }
}

/// A whole number, optionally with a binary-unit suffix.
pub fn parse_size(s: &str) -> Option<u64> {
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match unit.trim() {
        "" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// The limits in force for one tenant; `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub max_keys: Option<u64>,
    pub max_outcome_bytes: Option<u64>,
}

impl Limits {
    /// The limits of a tenant whose override row says `keys` and `bytes`,
    /// under the server's `defaults`.
    pub fn resolve(defaults: Limits, keys: Limit, bytes: Limit) -> Self {
        Self {
            max_keys: keys.or(defaults.max_keys),
            max_outcome_bytes: bytes.or(defaults.max_outcome_bytes),
        }
    }

    pub fn is_unlimited(&self) -> bool {
        self.max_keys.is_none() && self.max_outcome_bytes.is_none()
    }
}

/// What a tenant stores, as last measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stored {
    /// Live records, hot rows and routing entries alike.
    pub keys: u64,
    /// Outcome bytes still in the database.
    pub outcome_bytes: u64,
    /// Outcome bytes moved to the archive.
    pub archived_bytes: u64,
}

impl Stored {
    /// The bytes a quota counts: wherever the outcomes live.
    pub fn total_bytes(&self) -> u64 {
        self.outcome_bytes.saturating_add(self.archived_bytes)
    }
}

/// Which limit a tenant reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Keys { stored: u64, limit: u64 },
    OutcomeBytes { stored: u64, limit: u64 },
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Keys { stored, limit } => write!(
                f,
                "the tenant stores {stored} keys and its quota is {limit}; \
                 new keys are refused until keys expire or the quota is raised"
            ),
            Self::OutcomeBytes { stored, limit } => write!(
                f,
                "the tenant stores {stored} outcome bytes and its quota is {limit}; \
                 new keys are refused until keys expire or the quota is raised"
            ),
        }
    }
}

/// Whether a tenant storing `stored` under `limits` may create no new
/// record: it is refused once a figure has *reached* its limit, so a limit
/// of 0 admits nothing and a limit of 10 keys admits the tenth but not the
/// eleventh (as measured).
pub fn refuses(stored: &Stored, limits: &Limits) -> Option<Exceeded> {
    if let Some(limit) = limits.max_keys.filter(|l| stored.keys >= *l) {
        return Some(Exceeded::Keys {
            stored: stored.keys,
            limit,
        });
    }
    let bytes = stored.total_bytes();
    limits
        .max_outcome_bytes
        .filter(|l| bytes >= *l)
        .map(|limit| Exceeded::OutcomeBytes {
            stored: bytes,
            limit,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOME: Stored = Stored {
        keys: 10,
        outcome_bytes: 600,
        archived_bytes: 400,
    };

    fn limits(keys: Option<u64>, bytes: Option<u64>) -> Limits {
        Limits {
            max_keys: keys,
            max_outcome_bytes: bytes,
        }
    }

    #[test]
    fn a_tenant_is_refused_once_a_figure_reaches_its_limit() {
        let cases = [
            (limits(None, None), None),
            (limits(Some(11), None), None),
            (limits(Some(10), None), Some("keys")),
            (limits(Some(0), None), Some("keys")),
            (limits(None, Some(1001)), None),
            // Archived bytes count as much as hot ones.
            (limits(None, Some(1000)), Some("bytes")),
            (limits(Some(10), Some(1000)), Some("keys")),
        ];
        for (l, expected) in cases {
            let got = refuses(&SOME, &l).map(|e| match e {
                Exceeded::Keys { .. } => "keys",
                Exceeded::OutcomeBytes { .. } => "bytes",
            });
            assert_eq!(got, expected, "{l:?}");
        }
    }

    #[test]
    fn an_override_replaces_the_default_limit_by_limit() {
        let defaults = limits(Some(100), Some(1 << 20));
        let both = Limits::resolve(defaults, Limit::Default, Limit::Default);
        assert_eq!(both, defaults);
        let mixed = Limits::resolve(defaults, Limit::At(5), Limit::Unlimited);
        assert_eq!(mixed, limits(Some(5), None));
        assert!(Limits::resolve(Limits::default(), Limit::Default, Limit::Default).is_unlimited());
    }

    #[test]
    fn limits_parse_and_round_trip_through_their_column() {
        for (text, limit) in [
            ("default", Limit::Default),
            ("unlimited", Limit::Unlimited),
            ("0", Limit::At(0)),
            ("1500", Limit::At(1500)),
            ("2KiB", Limit::At(2048)),
            ("1 GiB", Limit::At(1 << 30)),
        ] {
            assert_eq!(Limit::parse(text), Some(limit), "{text}");
            assert_eq!(Limit::from_column(limit.to_column()), Some(limit));
        }
        for bad in ["", "-1", "1.5", "10kb", "lots", "99999999999999999999GiB"] {
            assert_eq!(Limit::parse(bad), None, "{bad}");
        }
        assert_eq!(Limit::from_column(Some(-2)), None);
    }
}
