//! The claim protocol, carried out against the store.
//!
//! The domain decides what a record means; the store performs one atomic
//! statement; this layer loops between the two until a statement succeeds or
//! an answer is final. A failed compare-and-swap means somebody else changed
//! the row first, so we read again and decide again — we never act on a read
//! alone.

mod claim;
mod classes;
mod owner;
mod policy_cache;
mod recovery;

pub use claim::{ClaimAnswer, ClaimRequest};
pub use classes::OperationClass;
pub use owner::OwnerCall;
pub use policy_cache::POLICY_TTL;
pub use recovery::MAX_STEPS;

use crate::domain::EffectSecret;
use crate::store::Store;
use policy_cache::PolicyCache;

#[derive(Clone, Debug)]
pub struct Engine {
    pub store: Store,
    pub secret: EffectSecret,
    /// Operation-class policies recently read on this node (`Engine::policy`).
    policies: PolicyCache,
}

impl Engine {
    pub fn new(store: Store, secret: EffectSecret) -> Self {
        Self {
            store,
            secret,
            policies: PolicyCache::new(POLICY_TTL),
        }
    }
}
