//! Pure domain: names, fingerprints, tokens, policy and the claim decision.
//! Nothing here touches the network, the database or the clock.

pub mod claim;
pub mod duration;
pub mod effect;
pub mod fingerprint;
pub mod names;
pub mod outcome;
pub mod owner;
pub mod policy;
pub mod quota;
pub mod time;
pub mod top_keys;
pub mod usage;
pub mod webhook;

pub use claim::{
    decide, decide_completed, judged_fingerprint, needs_record_rules, protected_until, Decision,
    RecordState, Seen,
};
pub use effect::EffectSecret;
pub use fingerprint::Fingerprint;
pub use names::{IdempotencyKey, KeyHash, NameError, OperationName, ScopedKey, TenantId};
pub use outcome::Outcome;
pub use owner::{OwnerToken, OwnerTokenHash};
pub use policy::Policy;
