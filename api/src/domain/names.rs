//! Names that scope a key: the tenant (from the verified token), the
//! operation class and the client's idempotency key. Each is parsed once at the
//! edge; everything past the edge takes these types, never a bare `String`.

use std::fmt;

use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum NameError {
    #[error("tenant must be 1-128 characters of [A-Za-z0-9._:-], starting with a letter or digit")]
    Tenant,
    #[error("operation must match [a-z0-9][a-z0-9._-]{{0,63}}")]
    Operation,
    #[error("key must be 1-255 visible ASCII characters (0x21-0x7E)")]
    Key,
}

macro_rules! string_newtype {
    ($name:ident) => {
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

string_newtype!(TenantId);
string_newtype!(OperationName);
string_newtype!(IdempotencyKey);

impl TenantId {
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let ok = (1..=128).contains(&s.len())
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b));
        ok.then(|| Self(s.to_owned())).ok_or(NameError::Tenant)
    }
}

impl OperationName {
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let lower_or_digit = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        let ok = (1..=64).contains(&s.len())
            && lower_or_digit(s.as_bytes()[0])
            && s.bytes().all(|b| lower_or_digit(b) || b"._-".contains(&b));
        ok.then(|| Self(s.to_owned())).ok_or(NameError::Operation)
    }
}

impl IdempotencyKey {
    pub fn parse(s: &str) -> Result<Self, NameError> {
        let ok = (1..=255).contains(&s.len()) && s.bytes().all(|b| (0x21..=0x7e).contains(&b));
        ok.then(|| Self(s.to_owned())).ok_or(NameError::Key)
    }
}

/// (tenant, operation, key): the identity every invariant is stated over.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ScopedKey {
    pub tenant: TenantId,
    pub operation: OperationName,
    pub key: IdempotencyKey,
}

impl ScopedKey {
    /// `tenant/operation/key`. Neither a tenant nor an operation can contain
    /// `/`, so the first two slashes split it unambiguously.
    pub fn path(&self) -> String {
        format!("{}/{}/{}", self.tenant, self.operation, self.key)
    }

    /// The key's digest, as notifications between nodes name it.
    pub fn hash(&self) -> KeyHash {
        let digest = Sha256::digest(self.path().as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        KeyHash(bytes)
    }
}

/// The first 16 bytes of SHA-256(`tenant/operation/key`).
///
/// Small enough for a Postgres notification payload, and it keeps keys out
/// of it. The database computes the same digest (see the key-events
/// migration), so a payload names a key without carrying it. Whoever acts on
/// a hash alone only wakes a waiter or drops a cache entry: a collision costs
/// a re-read, never a wrong answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyHash(pub [u8; 16]);

impl KeyHash {
    pub fn to_hex(self) -> String {
        hex::encode(self.0)
    }

    pub fn parse_hex(s: &str) -> Option<Self> {
        let mut bytes = [0u8; 16];
        hex::decode_to_slice(s, &mut bytes).ok()?;
        Some(Self(bytes))
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_visible_ascii_of_bounded_length() {
        assert!(IdempotencyKey::parse("order-42/retry:1").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert_eq!(IdempotencyKey::parse(&"k".repeat(256)), Err(NameError::Key));
        assert_eq!(IdempotencyKey::parse(""), Err(NameError::Key));
        assert_eq!(IdempotencyKey::parse("a b"), Err(NameError::Key));
        assert_eq!(IdempotencyKey::parse("a\nb"), Err(NameError::Key));
        assert_eq!(IdempotencyKey::parse("caf\u{e9}"), Err(NameError::Key));
    }

    #[test]
    fn operation_names_follow_the_pattern() {
        assert!(OperationName::parse("charges.create").is_ok());
        assert!(OperationName::parse("0-a_b.c").is_ok());
        assert!(OperationName::parse(&"a".repeat(64)).is_ok());
        assert!(OperationName::parse(&"a".repeat(65)).is_err());
        assert!(OperationName::parse("Charges").is_err());
        assert!(OperationName::parse(".x").is_err());
        assert!(OperationName::parse("").is_err());
    }

    #[test]
    fn key_hashes_digest_the_slash_joined_path() {
        let k = ScopedKey {
            tenant: TenantId::parse("acme").unwrap(),
            operation: OperationName::parse("charges.create").unwrap(),
            key: IdempotencyKey::parse("order/1").unwrap(),
        };
        assert_eq!(k.path(), "acme/charges.create/order/1");
        let h = k.hash();
        assert_eq!(KeyHash::parse_hex(&h.to_hex()), Some(h));
        assert_eq!(KeyHash::parse_hex("zz"), None);
    }

    #[test]
    fn tenants_are_restricted_identifiers() {
        assert!(TenantId::parse("acme").is_ok());
        assert!(TenantId::parse("org:acme-eu.1").is_ok());
        assert!(TenantId::parse("").is_err());
        assert!(TenantId::parse("-x").is_err());
        assert!(TenantId::parse("a/b").is_err());
    }
}
