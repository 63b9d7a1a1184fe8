//! Fingerprint rules fixed per record: a policy change affects new records
//! only.
//!
//! A record stores the digest of the rules its fingerprint was computed
//! under. When a claim's fingerprint (under the class's rules today) differs
//! from a record's, and the record was written under other rules, the
//! claim's `request` is fingerprinted again under the record's rules before
//! anything is decided: if that matches, the claim is the same operation —
//! a retry across a policy change replays rather than answering
//! `key_reused`. Rule sets are content-addressed in the store
//! (`fingerprint_rules`), so this node keeps every one it has read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Refusal;
use super::{ClaimRequest, Engine};
use crate::domain::fingerprint::{fingerprint_request, FingerprintRules};
use crate::domain::{judged_fingerprint, needs_record_rules, Fingerprint};
use crate::store::StoreError;

/// Rule sets read from the store, by digest. They never change, so entries
/// never go stale; there are as many as admins ever saved.
#[derive(Default)]
pub(super) struct RuleSets(Mutex<HashMap<[u8; 32], Arc<FingerprintRules>>>);

impl Engine {
    /// Keeps `rules` under their digest before a policy using them is saved,
    /// so every record written under them can be judged by them later.
    pub(super) async fn remember_rules(&self, rules: &FingerprintRules) -> Result<(), Refusal> {
        if let Some(digest) = rules.digest() {
            self.store.remember_rules(&digest, &rules.to_json()).await?;
        }
        Ok(())
    }

    /// The fingerprint `req` is judged by against a record holding
    /// `record_fp`, written under the rules `record_rules`: the request's
    /// own, unless the record's rules differ from today's (`current`) and
    /// the request fingerprinted under them is the record's.
    pub(super) async fn judged(
        &self,
        req: &ClaimRequest,
        current: Option<[u8; 32]>,
        record_fp: Fingerprint,
        record_rules: Option<[u8; 32]>,
    ) -> Result<Fingerprint, Refusal> {
        let rejudge = needs_record_rules(
            &req.fingerprint,
            current,
            &record_fp,
            record_rules,
            req.request_json.is_some(),
        );
        let Some(json) = req.request_json.as_ref().filter(|_| rejudge) else {
            return Ok(req.fingerprint);
        };
        let rules = match record_rules {
            None => Arc::new(FingerprintRules::default()),
            Some(digest) => self.rule_set(&digest).await?,
        };
        let under_record_rules = fingerprint_request(json, &rules).ok();
        Ok(judged_fingerprint(
            req.fingerprint,
            record_fp,
            under_record_rules,
        ))
    }

    async fn rule_set(&self, digest: &[u8; 32]) -> Result<Arc<FingerprintRules>, Refusal> {
        if let Some(rules) = self.rule_sets.0.lock().expect("rule sets").get(digest) {
            return Ok(rules.clone());
        }
        let Some(json) = self.store.rules(digest).await? else {
            // Every digest a record holds was stored before its policy was:
            // a missing one is damage, and "key reused" would be a guess.
            return Err(StoreError::Corrupt(format!(
                "fingerprint rules {} are not stored",
                hex::encode(digest)
            ))
            .into());
        };
        let rules: FingerprintRules = serde_json::from_str(&json)
            .map_err(|e| StoreError::Corrupt(format!("fingerprint_rules.rules: {e}")))?;
        let rules = Arc::new(rules);
        self.rule_sets
            .0
            .lock()
            .expect("rule sets")
            .insert(*digest, rules.clone());
        Ok(rules)
    }
}
