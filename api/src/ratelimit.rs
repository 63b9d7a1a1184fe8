//! Per-tenant rate limits: `429 rate_limited` with `Retry-After` (SPEC
//! section 4) once a tenant sends more than `IDEMKEY_TENANT_RATE_LIMIT`
//! API calls per second to this node.
//!
//! The limit is per node, counted in memory with the generic cell rate
//! algorithm (`governor`): a tenant may burst up to one second's worth of
//! calls, then is held to the rate. Nothing is shared between nodes (a
//! shared counter would put a Redis round trip in front of every call), so a
//! deployment of N nodes behind a balancer admits about N times the limit;
//! set it per node accordingly. The limit is checked after the token is
//! verified (the tenant comes from the token) and before anything touches
//! the store, so a refused call changes nothing.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};

use crate::domain::TenantId;

/// How often tenants idle long enough to have a full allowance again are
/// forgotten, so the table holds only recently active tenants.
const FORGET_EVERY: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct TenantLimiter {
    limiter: Arc<DefaultKeyedRateLimiter<TenantId>>,
    clock: DefaultClock,
}

impl TenantLimiter {
    pub fn per_second(calls: NonZeroU32) -> Self {
        let limiter = Arc::new(RateLimiter::keyed(Quota::per_second(calls)));
        Self {
            limiter,
            clock: DefaultClock::default(),
        }
    }

    /// Counts one call of `tenant`: `Err` with how long to wait when the
    /// tenant is over its limit.
    pub fn check(&self, tenant: &TenantId) -> Result<(), Duration> {
        self.limiter
            .check_key(tenant)
            .map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Forgets idle tenants every minute, for as long as the process runs.
    pub fn spawn_forgetting(&self) {
        let limiter = self.limiter.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(FORGET_EVERY);
            loop {
                ticks.tick().await;
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_bursts_one_second_worth_then_waits_and_others_are_unaffected() {
        let limiter = TenantLimiter::per_second(NonZeroU32::new(3).unwrap());
        let (a, b) = (TenantId::parse("a").unwrap(), TenantId::parse("b").unwrap());
        for _ in 0..3 {
            assert_eq!(limiter.check(&a), Ok(()));
        }
        let wait = limiter.check(&a).expect_err("the fourth call is over");
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(334),
            "{wait:?}"
        );
        assert_eq!(limiter.check(&b), Ok(()));
    }
}
