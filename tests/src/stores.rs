//! The store on its own, for the store contract suite and the model-based
//! tests: a migrated store of either backend, records to write, and the one
//! artifice these tests need — moving a key's stored times back, which is
//! the same as moving the store's clock forward for that key.

use std::time::Duration;

use idemkey_api::domain::policy::LeaseExpiry;
use idemkey_api::domain::{
    decide, Decision, Fingerprint, IdempotencyKey, OperationName, OwnerToken, ScopedKey, TenantId,
};
use idemkey_api::store::{Completion, KeyRecord, NewClaim, Store};

use crate::db::Backend;

/// Runs each listed body (an `async fn(Store)`) once per backend, each on a
/// fresh, migrated database.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let store = $crate::stores::fresh($crate::db::Backend::Postgres).await;
                    super::$name(store).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let store = $crate::stores::fresh($crate::db::Backend::Sqlite).await;
                    super::$name(store).await
                }
            )*
        }
    };
}

/// A migrated store on a fresh database of `backend`.
pub async fn fresh(backend: Backend) -> Store {
    let url = backend.fresh().await;
    let store = Store::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
    store.migrate().await.expect("migrations apply");
    store
}

/// A scoped key no other test uses.
pub fn fresh_key(operation: &str) -> ScopedKey {
    ScopedKey {
        tenant: TenantId::parse(&format!("t{:012x}", rand::random::<u64>() >> 16)).unwrap(),
        operation: OperationName::parse(operation).unwrap(),
        key: IdempotencyKey::parse(&format!("k-{:016x}", rand::random::<u64>())).unwrap(),
    }
}

/// The fingerprint of a request numbered `n`.
pub fn fingerprint(n: u8) -> Fingerprint {
    Fingerprint::from_bytes([n; 32])
}

/// A claim for request `n` by a fresh owner, with its token.
pub fn claim(n: u8, lease: Duration, window: Duration) -> (NewClaim, OwnerToken) {
    let token = OwnerToken::generate();
    let claim = NewClaim {
        fingerprint: fingerprint(n),
        owner: token.hash(),
        lease,
        replay_window: window,
        tier_after: window,
        rules_digest: None,
        field_digests: None,
    };
    (claim, token)
}

/// An outcome text and its hash, for an owner to store.
pub struct Outcome {
    pub json: String,
    pub hash: [u8; 32],
}

impl Outcome {
    pub fn numbered(n: u32) -> Self {
        let json = format!(r#"{{"status_code":201,"body":{{"charge":"ch_{n}"}}}}"#);
        let hash = idemkey_api::domain::fingerprint::canonical_hash(&json).expect("valid JSON");
        Self { json, hash }
    }

    pub fn by<'a>(&'a self, owner: &OwnerToken) -> Completion<'a> {
        Completion {
            owner: owner.hash(),
            outcome_json: &self.json,
            outcome_hash: self.hash,
        }
    }
}

/// Moves every stored time of `k` back by `by`: for that key, the store's
/// clock has advanced by `by`.
pub async fn advance(store: &Store, k: &ScopedKey, by: Duration) {
    let ms = i64::try_from(by.as_millis()).expect("a test-sized duration");
    let columns = [
        "claimed_at",
        "lease_expires_at",
        "expires_at",
        "tier_at",
        "created_at",
        "updated_at",
    ];
    let done = match store {
        Store::Postgres(s) => {
            let set = columns
                .iter()
                .map(|c| format!("{c} = {c} - $4 * interval '1 millisecond'"))
                .collect::<Vec<_>>()
                .join(", ");
            sqlx::query(&format!(
                "update idempotency_key set {set}, \
                   completed_at = completed_at - $4 * interval '1 millisecond' \
                 where tenant = $1 and operation = $2 and key = $3"
            ))
            .bind(k.tenant.as_str())
            .bind(k.operation.as_str())
            .bind(k.key.as_str())
            .bind(ms)
            .execute(s.pool())
            .await
            .expect("advance")
            .rows_affected()
        }
        Store::Sqlite(s) => {
            let set = columns
                .iter()
                .map(|c| format!("{c} = {c} - ?4"))
                .collect::<Vec<_>>()
                .join(", ");
            sqlx::query(&format!(
                "update idempotency_key set {set}, completed_at = completed_at - ?4 \
                 where tenant = ?1 and operation = ?2 and key = ?3"
            ))
            .bind(k.tenant.as_str())
            .bind(k.operation.as_str())
            .bind(k.key.as_str())
            .bind(ms)
            .execute(s.pool())
            .await
            .expect("advance")
            .rows_affected()
        }
    };
    assert!(done <= 1, "one row per scoped key");
}

/// The record of `k`, which must exist.
pub async fn row(store: &Store, k: &ScopedKey) -> KeyRecord {
    store
        .find(k)
        .await
        .expect("the store answers")
        .expect("the record exists")
}

/// What a fresh claim of `k` with request `n` decides now (a class that
/// takes over expired leases).
pub async fn decision(store: &Store, k: &ScopedKey, n: u8) -> Decision {
    decide(
        &row(store, k).await.seen(),
        &fingerprint(n),
        LeaseExpiry::Takeover,
    )
}

/// Runs the cleanup statement once (all tenants): removes what is gone.
pub async fn cleanup(store: &Store) -> u64 {
    store.delete_expired(1_000).await.expect("cleanup runs")
}
