//! Fingerprints of request texts this node canonicalised recently.
//!
//! A retry sends the very bytes the first attempt sent, and canonicalising
//! them (parse, check every number, RFC 8785, SHA-256) was the largest
//! single cost of a cached replay left after token verification, about a
//! sixth of its CPU. A fingerprint is a pure function of the request text
//! and the class's fingerprint rules, so it is remembered keyed by the
//! SHA-256 of the text and the rules' digest: two texts share an entry only
//! if SHA-256 collides. Only successes are remembered; a text that is
//! refused (invalid JSON, a number out of range) is checked again every
//! time. The memo is bounded by entry count (about 100 bytes each), a
//! quick_cache like every bounded map here (`cache::bounded`).

use std::sync::Arc;

use quick_cache::sync::Cache;
use sha2::{Digest, Sha256};

use crate::cache::bounded;
use crate::domain::fingerprint::{fingerprint_request, FingerprintError, FingerprintRules};
use crate::domain::Fingerprint;

/// Request texts remembered per node (a few MiB at most).
const CAPACITY: usize = 50_000;

/// (SHA-256 of the request text, digest of the rules or `None` for the
/// defaults).
type Key = ([u8; 32], Option<[u8; 32]>);

#[derive(Clone)]
pub struct Fingerprints {
    memo: Arc<Cache<Key, Fingerprint>>,
}

impl Default for Fingerprints {
    fn default() -> Self {
        Self {
            memo: Arc::new(bounded(CAPACITY)),
        }
    }
}

impl Fingerprints {
    /// `request_json`'s fingerprint under `rules` (whose digest is
    /// `rules_digest`), from memory when this text was fingerprinted under
    /// the same rules before.
    pub fn of(
        &self,
        request_json: &str,
        rules: &FingerprintRules,
        rules_digest: Option<[u8; 32]>,
    ) -> Result<Fingerprint, FingerprintError> {
        let key = (Sha256::digest(request_json).into(), rules_digest);
        if let Some(fingerprint) = self.memo.get(&key) {
            return Ok(fingerprint);
        }
        let fingerprint = fingerprint_request(request_json, rules)?;
        self.memo.insert(key, fingerprint);
        Ok(fingerprint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount_rules() -> FingerprintRules {
        FingerprintRules {
            include: vec!["/amount".into()],
            ..FingerprintRules::default()
        }
    }

    #[test]
    fn remembered_answers_equal_computed_ones_per_rule_set() {
        let memo = Fingerprints::default();
        let text = r#"{"amount": 25, "note": "x"}"#;
        let rules = amount_rules();
        for _ in 0..2 {
            assert_eq!(
                memo.of(text, &FingerprintRules::default(), None),
                fingerprint_request(text, &FingerprintRules::default())
            );
            // Same text, other rules: its own entry, its own answer.
            assert_eq!(
                memo.of(text, &rules, rules.digest()),
                fingerprint_request(text, &rules)
            );
        }
        assert_ne!(
            memo.of(text, &rules, rules.digest()),
            memo.of(text, &FingerprintRules::default(), None)
        );
    }

    #[test]
    fn refusals_are_not_remembered() {
        let memo = Fingerprints::default();
        let rules = FingerprintRules::default();
        for _ in 0..2 {
            assert!(matches!(
                memo.of("9007199254740993", &rules, None),
                Err(FingerprintError::NumberOutOfRange(_))
            ));
        }
        assert_eq!(memo.memo.len(), 0);
    }
}
