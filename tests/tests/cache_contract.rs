//! The outcome cache's contract, one set of bodies run against both
//! implementations: in-process alone, and in-process in front of a real
//! Redis. For Redis, every read is made through a second cache instance with
//! an empty in-process layer (another node), so it really comes from Redis.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use idemkey_api::cache::{FinalOutcome, OutcomeCache};
use idemkey_api::domain::{Fingerprint, IdempotencyKey, OperationName, ScopedKey, TenantId};
use idemkey_api::metrics::Metrics;
use idemkey_tests::redis::shared_redis_url;
use idemkey_tests::tokens::fresh_tenant;

/// A writer and a reader of the same cache (the same node for in-process).
struct Pair {
    writer: OutcomeCache,
    reader: OutcomeCache,
}

async fn in_process() -> Pair {
    let cache = OutcomeCache::in_process(Arc::new(Metrics::new()));
    Pair {
        writer: cache.clone(),
        reader: cache,
    }
}

async fn redis() -> Pair {
    let node = || async {
        let cache =
            OutcomeCache::redis(&shared_redis_url(), "contract", Arc::new(Metrics::new())).unwrap();
        let OutcomeCache::Redis { shared, .. } = &cache else {
            unreachable!()
        };
        assert!(
            shared.start().await,
            "Redis must answer at {}",
            shared_redis_url()
        );
        cache
    };
    Pair {
        writer: node().await,
        reader: node().await,
    }
}

fn key(tenant: &str, operation: &str, key: &str) -> ScopedKey {
    ScopedKey {
        tenant: TenantId::parse(tenant).unwrap(),
        operation: OperationName::parse(operation).unwrap(),
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

fn outcome(text: &str) -> Arc<FinalOutcome> {
    // Microseconds, as the databases keep them.
    let now = chrono::DateTime::from_timestamp_micros(Utc::now().timestamp_micros()).unwrap();
    Arc::new(FinalOutcome {
        fingerprint: Fingerprint::from_bytes([3; 32]),
        attempt: 2,
        completed_at: now,
        expires_at: now + TimeDelta::hours(24),
        outcome: Arc::from(text),
        rules_digest: Some([5; 32]),
        field_digests: Some(Arc::from(
            r#"{"f":{"/amount":"0011223344556677"},"t":false}"#,
        )),
        rendered: Default::default(),
    })
}

const MINUTE: Duration = Duration::from_secs(60);

async fn a_stored_outcome_is_read_back_exactly(c: Pair) {
    let k = key(&fresh_tenant(), "charges.create", "k/1");
    let o = outcome(r#"{"status_code":201,"body":{"amount":1.50, "n":1e2}}"#);

    c.writer.put(&k, o.clone(), MINUTE).await;

    let read = c.reader.get(&k).await.unwrap().expect("a hit");
    assert_eq!(*read, *o);
}

async fn keys_are_scoped_by_tenant_operation_and_key(c: Pair) {
    let (t1, t2) = (fresh_tenant(), fresh_tenant());
    c.writer
        .put(&key(&t1, "charges.create", "k1"), outcome("{}"), MINUTE)
        .await;

    for other in [
        key(&t2, "charges.create", "k1"),
        key(&t1, "refunds.create", "k1"),
        key(&t1, "charges.create", "k2"),
    ] {
        assert_eq!(c.reader.get(&other).await.unwrap(), None, "{other:?}");
    }
}

async fn an_evicted_outcome_is_gone_for_every_reader(c: Pair) {
    let k = key(&fresh_tenant(), "charges.create", "k1");
    c.writer.put(&k, outcome("{}"), MINUTE).await;

    c.writer.evict(&k).await.unwrap();

    assert_eq!(c.writer.local(&k), None);
    assert_eq!(c.reader.get(&k).await.unwrap(), None);
}

async fn an_entry_ends_with_its_time_to_live(c: Pair) {
    let k = key(&fresh_tenant(), "charges.create", "k1");
    c.writer
        .put(&k, outcome("{}"), Duration::from_millis(300))
        .await;

    tokio::time::sleep(Duration::from_millis(700)).await;

    assert_eq!(c.writer.local(&k), None);
    assert_eq!(c.reader.get(&k).await.unwrap(), None);
}

async fn an_outcome_past_its_expiry_is_never_served(c: Pair) {
    // Even with a generous time to live, an entry whose record has expired
    // (by this node's clock) is a miss.
    let k = key(&fresh_tenant(), "charges.create", "k1");
    let mut o = (*outcome("{}")).clone();
    o.expires_at = Utc::now();
    c.writer.put(&k, Arc::new(o), MINUTE).await;

    assert_eq!(c.writer.local(&k), None);
    assert_eq!(c.reader.get(&k).await.unwrap(), None);
}

macro_rules! on_every_cache {
    ($($name:ident),* $(,)?) => {
        mod in_process {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::in_process().await).await
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::redis().await).await
                }
            )*
        }
    };
}

on_every_cache!(
    a_stored_outcome_is_read_back_exactly,
    keys_are_scoped_by_tenant_operation_and_key,
    an_evicted_outcome_is_gone_for_every_reader,
    an_entry_ends_with_its_time_to_live,
    an_outcome_past_its_expiry_is_never_served,
);

#[tokio::test]
async fn an_unreachable_redis_answers_unavailable_then_is_skipped() {
    // Arrange: a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics = Arc::new(Metrics::new());
    let url = format!("redis://127.0.0.1:{port}");
    let cache = OutcomeCache::redis(&url, "contract", metrics.clone()).unwrap();
    let OutcomeCache::Redis { shared, .. } = &cache else {
        unreachable!()
    };
    assert!(!shared.start().await);
    let k = key(&fresh_tenant(), "charges.create", "k1");

    // Act
    let read = cache.get(&k).await;
    cache.put(&k, outcome("{}"), MINUTE).await;

    // Assert: an error (never "not found" from Redis), counted, circuit open.
    assert!(read.is_err());
    let text = metrics.encode();
    assert!(
        text.contains("idemkey_redis_fallbacks_total{reason=\"open\"} 2"),
        "{text}"
    );
    assert!(text.contains("idemkey_redis_circuit_open 1"), "{text}");
}
