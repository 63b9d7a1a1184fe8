//! Owner tokens: the secret that proves an attempt owns a key.
//!
//! A token is 256 random bits, shown once to the attempt that claimed (or took
//! over) the key. Only its SHA-256 is stored, so a database dump cannot be used
//! to complete someone else's operation.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// A freshly minted owner token. Deliberately not `Debug`/`Display`: it must
/// never end up in a log line.
pub struct OwnerToken(String);

impl OwnerToken {
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(URL_SAFE_NO_PAD.encode(bytes))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> OwnerTokenHash {
        OwnerTokenHash::of(&self.0)
    }
}

/// What the store keeps and compares: SHA-256 of the token text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnerTokenHash(pub [u8; 32]);

impl OwnerTokenHash {
    /// Hash whatever the client presented. An unknown or malformed token simply
    /// hashes to something no record holds, and the compare-and-swap fails.
    pub fn of(presented: &str) -> Self {
        Self(Sha256::digest(presented.as_bytes()).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_hash_stably() {
        let a = OwnerToken::generate();
        let b = OwnerToken::generate();
        assert_eq!(a.expose().len(), 43);
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.hash(), OwnerTokenHash::of(a.expose()));
        assert_ne!(a.hash(), b.hash());
    }
}
