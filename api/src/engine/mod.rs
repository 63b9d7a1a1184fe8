//! The claim protocol, carried out against the store.
//!
//! The domain decides what a record means; the store performs one atomic
//! statement; this layer loops between the two until a statement succeeds or
//! an answer is final. A failed compare-and-swap means somebody else changed
//! the row first, so we read again and decide again — we never act on a read
//! alone.

mod claim;
mod owner;
mod recovery;

pub use claim::{ClaimAnswer, ClaimRequest};
pub use owner::OwnerCall;
pub use recovery::MAX_STEPS;

use crate::domain::{EffectSecret, OperationName, Policy, TenantId};
use crate::store::Store;

#[derive(Clone, Debug)]
pub struct Engine {
    pub store: Store,
    pub secret: EffectSecret,
}

impl Engine {
    pub fn new(store: Store, secret: EffectSecret) -> Self {
        Self { store, secret }
    }

    /// The policy of an operation class. Every class uses the defaults until
    /// per-class policies are stored.
    pub async fn policy(&self, _tenant: &TenantId, _operation: &OperationName) -> Policy {
        Policy::default()
    }
}
