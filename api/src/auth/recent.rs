//! Tokens this node verified recently.
//!
//! A client sends the same bearer token on every call until it expires, and
//! checking its signature and claims was the largest single cost of a cached
//! replay (about a sixth of the server's CPU). The verdict for one token
//! cannot change while the process runs, except through time: the keys are
//! loaded once at start-up, and `iss`, `aud`, `tenant` and `roles` are part
//! of the signed text. So a token that verified is remembered, keyed by its
//! whole text, with its `exp`; a later call with the same text gets the same
//! principal as long as `exp` (with the same leeway) still allows it. Time
//! is checked on every hit, exactly as `jsonwebtoken` checks it.
//!
//! Only successes are remembered, so a refused token is refused by the full
//! check every time. The map is bounded (a quick_cache, `cache::bounded`):
//! it holds at most [`CAPACITY`] tokens, evicting the least likely to be
//! used again (one full verification for such a token when it comes back),
//! so a caller cycling through many valid tokens costs memory no more than
//! that.

use quick_cache::sync::Cache;

use super::verify::LEEWAY_SECS;
use super::Principal;
use crate::cache::bounded;

/// Most tokens remembered at once (a few hundred bytes each).
const CAPACITY: usize = 10_000;

pub(super) struct VerifiedTokens {
    tokens: Cache<Box<str>, Verified>,
}

impl Default for VerifiedTokens {
    fn default() -> Self {
        Self {
            tokens: bounded(CAPACITY),
        }
    }
}

#[derive(Clone)]
struct Verified {
    principal: Principal,
    /// The token's `exp`, in seconds since the epoch.
    exp: u64,
}

impl VerifiedTokens {
    /// The principal of `token` if it verified before and `exp` still holds
    /// at `now` (seconds since the epoch).
    pub fn get(&self, token: &str, now: u64) -> Option<Principal> {
        let verified = self.tokens.get(token)?;
        still_valid(verified.exp, now).then_some(verified.principal)
    }

    /// Remembers a token that passed the full check.
    pub fn insert(&self, token: &str, principal: &Principal, exp: u64) {
        let principal = principal.clone();
        self.tokens
            .insert(token.into(), Verified { principal, exp });
    }
}

/// `jsonwebtoken`'s rule: a token is expired once `exp < now - leeway`.
fn still_valid(exp: u64, now: u64) -> bool {
    exp.saturating_add(LEEWAY_SECS) >= now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::RoleSet;
    use crate::domain::TenantId;

    fn principal() -> Principal {
        Principal {
            tenant: TenantId::parse("acme").unwrap(),
            roles: RoleSet::default(),
            subject: None,
        }
    }

    #[test]
    fn a_remembered_token_expires_with_the_same_leeway_as_a_full_check() {
        let tokens = VerifiedTokens::default();
        tokens.insert("t", &principal(), 1_000);
        assert_eq!(tokens.get("t", 1_000 + LEEWAY_SECS), Some(principal()));
        assert_eq!(tokens.get("t", 1_001 + LEEWAY_SECS), None);
        assert_eq!(tokens.get("other", 0), None);
    }

    #[test]
    fn a_full_map_stays_bounded_and_keeps_the_newest() {
        let tokens = VerifiedTokens::default();
        for i in 0..CAPACITY {
            tokens.insert(&i.to_string(), &principal(), u64::MAX);
        }
        tokens.insert("one more", &principal(), u64::MAX);
        assert!(tokens.tokens.len() <= CAPACITY);
        assert!(tokens.get("one more", 0).is_some());
    }
}
