//! Operation-class policy (SPEC section 6): how long a key is protected, how
//! long leases run and how long a duplicate may wait.
//!
//! A record's expiry is computed from the policy when the record is first
//! written and stored with it, so a later policy change never shortens a
//! promise already made. The JSON form of a policy, and the checks on its
//! values, live in [`document`].

pub mod document;

use std::time::Duration;

use super::fingerprint::FingerprintRules;

pub use document::{InvalidPolicy, PolicyDocument};

pub const MIN_LEASE: Duration = Duration::from_millis(1_000);
pub const MAX_OUTCOME_BYTES_CEILING: usize = 8 * 1024 * 1024;

/// What happens to an in-progress key whose lease ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseExpiry {
    /// The next claim takes over and answers `recovering`.
    Takeover,
    /// The key is quarantined: no automatic retry at all.
    Quarantine,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub replay_window: Duration,
    pub hot_retention: Duration,
    pub lease: Duration,
    pub max_lease: Duration,
    pub max_wait: Duration,
    pub max_outcome_bytes: usize,
    pub on_lease_expiry: LeaseExpiry,
    pub fingerprint: FingerprintRules,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            replay_window: Duration::from_secs(24 * 3600),
            hot_retention: Duration::from_secs(3600),
            lease: Duration::from_secs(30),
            max_lease: Duration::from_secs(3600),
            max_wait: Duration::from_secs(10),
            max_outcome_bytes: 1024 * 1024,
            on_lease_expiry: LeaseExpiry::Takeover,
            fingerprint: FingerprintRules::default(),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub struct LeaseOutOfRange {
    pub max_ms: u64,
}

impl Policy {
    /// The lease an attempt gets: its own `lease_ms` if it asked (1 s up to
    /// the class's maximum), otherwise the class's lease.
    pub fn lease_for(&self, requested_ms: Option<u64>) -> Result<Duration, LeaseOutOfRange> {
        match requested_ms {
            None => Ok(self.lease),
            Some(ms) => {
                let d = Duration::from_millis(ms);
                if (MIN_LEASE..=self.max_lease).contains(&d) {
                    Ok(d)
                } else {
                    Err(LeaseOutOfRange {
                        max_ms: self.max_lease.as_millis() as u64,
                    })
                }
            }
        }
    }

    /// How long a duplicate may wait for the owner: what it asked for, capped.
    pub fn wait_for(&self, requested_ms: Option<u64>) -> Duration {
        Duration::from_millis(requested_ms.unwrap_or(0)).min(self.max_wait)
    }

    /// Tiering happens after the hot retention, never after the window ends.
    pub fn tier_after(&self) -> Duration {
        self.hot_retention.min(self.replay_window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_default_to_the_class_lease_and_stay_in_bounds() {
        let p = Policy::default();
        assert_eq!(p.lease_for(None), Ok(Duration::from_secs(30)));
        assert_eq!(p.lease_for(Some(1_000)), Ok(Duration::from_secs(1)));
        assert_eq!(p.lease_for(Some(3_600_000)), Ok(Duration::from_secs(3600)));
        assert!(p.lease_for(Some(999)).is_err());
        assert!(p.lease_for(Some(3_600_001)).is_err());
    }

    #[test]
    fn waits_are_capped_by_the_class_maximum() {
        let p = Policy::default();
        assert_eq!(p.wait_for(None), Duration::ZERO);
        assert_eq!(p.wait_for(Some(250)), Duration::from_millis(250));
        assert_eq!(p.wait_for(Some(60_000)), Duration::from_secs(10));
    }
}
