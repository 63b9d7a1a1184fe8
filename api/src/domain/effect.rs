//! Effect ids: the stable identity a client passes to downstream providers.
//!
//! An effect id is an HMAC-SHA256 of the scoped key under the server secret,
//! so it is identical for every attempt of one operation (and across nodes
//! that share `IDEMKEY_SECRET`), yet cannot be guessed from the key alone.
//!
//! A step's effect id is the operation's effect id, a dot, and the step name
//! (`eff_….database`). A client must know it *before* it calls the step's
//! provider, so it has to be computable from what the claim answer already
//! gave; and it is as unguessable as the operation's id it extends.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::ScopedKey;

/// The server secret, held as an HMAC already keyed with it: each id clones
/// the keyed state instead of hashing the key again (half the work of one).
#[derive(Clone)]
pub struct EffectSecret(Hmac<Sha256>);

impl EffectSecret {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(Hmac::<Sha256>::new_from_slice(&bytes).expect("HMAC takes any key length"))
    }

    pub fn effect_id(&self, scoped: &ScopedKey) -> String {
        self.derive("effect", scoped)
    }

    pub fn step_effect_id(&self, scoped: &ScopedKey, step: &str) -> String {
        format!("{}.{step}", self.effect_id(scoped))
    }

    /// A short tag derived from the secret, naming this deployment in shared
    /// infrastructure (its Redis keys). Every node of a deployment has the
    /// same secret, so the same tag; two deployments pointed at one Redis by
    /// mistake never read each other's outcomes.
    pub fn deployment_tag(&self) -> String {
        let mut mac = self.0.clone();
        mac.update(b"deployment-tag\0");
        hex::encode(&mac.finalize().into_bytes()[..6])
    }

    fn derive(&self, purpose: &str, scoped: &ScopedKey) -> String {
        // Names never contain NUL (they are validated), so the encoding is
        // unambiguous.
        let mut mac = self.0.clone();
        for part in [
            purpose,
            scoped.tenant.as_str(),
            scoped.operation.as_str(),
            scoped.key.as_str(),
        ] {
            mac.update(part.as_bytes());
            mac.update(&[0]);
        }
        let digest = mac.finalize().into_bytes();
        format!("eff_{}", hex::encode(&digest[..16]))
    }
}

impl std::fmt::Debug for EffectSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EffectSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{IdempotencyKey, OperationName, TenantId};

    fn scoped(tenant: &str, key: &str) -> ScopedKey {
        ScopedKey {
            tenant: TenantId::parse(tenant).unwrap(),
            operation: OperationName::parse("charges.create").unwrap(),
            key: IdempotencyKey::parse(key).unwrap(),
        }
    }

    #[test]
    fn effect_ids_are_stable_per_scoped_key_and_secret() {
        let secret = EffectSecret::new(b"s1".to_vec());
        let id = secret.effect_id(&scoped("acme", "k1"));
        assert_eq!(id, secret.effect_id(&scoped("acme", "k1")));
        assert_eq!(id.len(), 4 + 32);
        assert_ne!(id, secret.effect_id(&scoped("acme", "k2")));
        assert_ne!(id, secret.effect_id(&scoped("globex", "k1")));
        assert_ne!(
            id,
            EffectSecret::new(b"s2".to_vec()).effect_id(&scoped("acme", "k1"))
        );
    }

    #[test]
    fn step_effect_ids_differ_from_the_operation_and_each_other() {
        let secret = EffectSecret::new(b"s1".to_vec());
        let k = scoped("acme", "k1");
        let db = secret.step_effect_id(&k, "database");
        assert_ne!(db, secret.effect_id(&k));
        assert_ne!(db, secret.step_effect_id(&k, "dns"));
        assert_eq!(db, secret.step_effect_id(&k, "database"));
        assert_eq!(db, format!("{}.database", secret.effect_id(&k)));
    }
}
