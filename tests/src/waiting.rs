//! Waiting for a claim to be waiting: what a test of `wait_ms` must see
//! before it acts, so the path it names is the one it takes.

use std::future::Future;
use std::time::Duration;

use crate::app::Metrics;

/// Waits until `metrics` shows `n` claims waiting (bounded: 10 s).
pub async fn until_waiting<F, Fut>(metrics: F, n: f64)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Metrics>,
{
    for _ in 0..1000 {
        if metrics().await.get("idemkey_claim_waiters") == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never saw {n} waiting claims");
}
