//! What the virtual clients send, and the matching constants the database
//! limits and bulk fills use, so both sides store rows of the same shape.

use std::time::Duration;

use idemkey_api::domain::fingerprint::{canonical_hash, fingerprint_request};
use idemkey_api::domain::Policy;
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::sql::ScriptValues;

/// The tenant every benchmark token carries.
pub const TENANT: &str = "bench";
/// Operation class of new keys (and of the growth fill, which must share
/// their index to mean anything).
pub const NEW_OPERATION: &str = "bench.new";
/// Operation class of the pre-completed keys that replays read.
pub const REPLAY_OPERATION: &str = "bench.replay";

/// The request every replay sends; the filled rows carry its fingerprint.
pub const REPLAY_REQUEST: &str =
    r#"{"amount":"25.00","currency":"EUR","customer":"cus_42","order":"ord_replay"}"#;

/// The outcome every completion stores (about the size of a real one).
pub const OUTCOME: &str = r#"{"status_code":201,"headers":{"location":"/charges/ch_3NkQ2c2eZvKYlo2C"},"body":{"id":"ch_3NkQ2c2eZvKYlo2C","amount":"25.00","currency":"EUR","status":"succeeded"},"resource_id":"ch_3NkQ2c2eZvKYlo2C"}"#;

/// A fresh random key: 32 hex characters, so inserts land all over the index.
pub fn random_key(rng: &mut impl Rng) -> String {
    format!("{:032x}", rng.random::<u128>())
}

/// The claim body for a new key.
pub fn new_key_claim_body(key: &str) -> String {
    format!(
        r#"{{"request":{{"amount":"25.00","currency":"EUR","customer":"cus_42","order":"{key}"}}}}"#
    )
}

pub fn replay_claim_body() -> String {
    format!(r#"{{"request":{REPLAY_REQUEST}}}"#)
}

pub fn complete_body(owner_token: &str) -> String {
    format!(r#"{{"owner_token":"{owner_token}","outcome":{OUTCOME}}}"#)
}

pub fn claim_path(operation: &str, key: &str) -> String {
    format!("/v1/keys/{operation}/{key}/claim")
}

pub fn complete_path(operation: &str, key: &str) -> String {
    format!("/v1/keys/{operation}/{key}/complete")
}

/// The fingerprint the server computes for [`REPLAY_REQUEST`] under the
/// default policy.
pub fn replay_fingerprint() -> [u8; 32] {
    let rules = Policy::default().fingerprint;
    *fingerprint_request(REPLAY_REQUEST, &rules)
        .expect("the replay request is valid")
        .as_bytes()
}

/// The hash the server stores beside [`OUTCOME`].
pub fn outcome_hash() -> [u8; 32] {
    canonical_hash(OUTCOME).expect("the outcome is valid JSON")
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// pgbench's constant values for `operation`: the default policy's lease,
/// window and tiering delay (what the service binds for a claim without
/// `lease_ms`), fixed fingerprint and owner hash.
pub fn script_values(operation: &str) -> ScriptValues {
    let policy = Policy::default();
    ScriptValues {
        tenant: TENANT.into(),
        operation: operation.into(),
        fingerprint_hex: hex::encode(Sha256::digest(b"bench fingerprint")),
        owner_hash_hex: hex::encode(Sha256::digest(b"bench owner token")),
        lease_ms: ms(policy.lease),
        window_ms: ms(policy.replay_window),
        tier_ms: ms(policy.tier_after()),
        outcome: OUTCOME.into(),
        outcome_hash_hex: hex::encode(outcome_hash()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_json_the_server_accepts() {
        for body in [
            new_key_claim_body("abc"),
            replay_claim_body(),
            complete_body("tok"),
        ] {
            serde_json::from_str::<serde_json::Value>(&body).unwrap();
        }
        let outcome = serde_json::value::RawValue::from_string(OUTCOME.into()).unwrap();
        idemkey_api::domain::Outcome::parse(&outcome, 1 << 20).unwrap();
    }

    #[test]
    fn random_keys_are_valid_and_distinct() {
        let mut rng = rand::rng();
        let (a, b) = (random_key(&mut rng), random_key(&mut rng));
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        idemkey_api::domain::IdempotencyKey::parse(&a).unwrap();
    }

    #[test]
    fn script_values_follow_the_default_policy() {
        let v = script_values(NEW_OPERATION);
        assert_eq!(v.lease_ms, 30_000);
        assert_eq!(v.window_ms, 24 * 3600 * 1000);
        assert!(v.tier_ms <= v.window_ms);
        assert_eq!(v.outcome_hash_hex.len(), 64);
    }
}
