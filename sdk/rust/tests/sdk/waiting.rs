//! Duplicates that find another attempt holding the key: they wait (on the
//! server with `wait_ms`, or honouring `Retry-After`) and replay, or give up
//! at their deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idemkey_client::{
    new_key, rerun_effect, Claim, ClaimOptions, ClientOptions, Error, Once, Outcome, Protected,
};
use serde_json::json;
use tokio::sync::{oneshot, Notify};

use crate::support::{TestServer, Verdict};

#[tokio::test]
async fn in_progress_waits_then_replays_with_wait_ms() {
    let server = TestServer::start().await;
    let owner = server.client();
    let claim_sent = Arc::new(Notify::new());
    let notify = claim_sent.clone();
    let (waiter, seen) = server.hooked_client(Box::new(move |r| {
        if r.url.ends_with("/claim") {
            notify.notify_one();
        }
        Verdict::Pass
    }));
    let key = new_key();
    let runs = Arc::new(AtomicUsize::new(0));
    let (started_tx, started) = oneshot::channel::<()>();
    let (release_tx, release) = oneshot::channel::<()>();

    let runs_a = runs.clone();
    let a = owner.once(
        Once::new("orders.create", key.clone(), json!({"sku": "book-1"})),
        |_ctx| async move {
            runs_a.fetch_add(1, Ordering::SeqCst);
            let _ = started_tx.send(());
            let _ = release.await;
            Ok(Outcome::new(201).body(json!({"order": "o-1"})))
        },
        rerun_effect,
    );
    let runs_b = runs.clone();
    let b = async {
        started.await.expect("a started");
        waiter
            .once(
                Once::new("orders.create", key.clone(), json!({"sku": "book-1"}))
                    .deadline(Duration::from_secs(20)),
                |_ctx| async move {
                    runs_b.fetch_add(1, Ordering::SeqCst);
                    Ok(Outcome::new(500))
                },
                rerun_effect,
            )
            .await
    };
    let release_a = async {
        // The second caller's claim is on its way (it waits on the server).
        claim_sent.notified().await;
        let _ = release_tx.send(());
    };
    let (ra, rb, ()) = tokio::join!(a, b, release_a);
    let (ra, rb) = (ra.expect("a"), rb.expect("b"));

    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(!ra.replayed);
    assert!(rb.replayed);
    assert_eq!(rb.outcome, ra.outcome);
    assert_eq!(rb.effect_id, ra.effect_id);
    // The server's wait did the waiting: one claim, no polling.
    assert_eq!(seen.calls_to("/claim").len(), 1);
}

#[tokio::test]
async fn in_progress_waits_then_replays_after_retry_after_with_jitter() {
    let server = TestServer::start().await;
    let owner = server.client();
    // max_wait 0: no wait_ms, so the SDK sleeps the server's Retry-After itself.
    let options = ClientOptions {
        max_wait: Duration::ZERO,
        ..ClientOptions::default()
    };
    let (waiter, seen) = server.hooked_client_with(Box::new(|_| Verdict::Pass), options);
    let key = new_key();
    let protected = Protected::Request(json!({"sku": "book-2"}));
    let lease = ClaimOptions {
        wait: None,
        lease: Some(Duration::from_secs(2)),
    };
    let Claim::Owned(held) = owner
        .claim("orders.create", &key, &protected, &lease)
        .await
        .expect("claim")
    else {
        panic!("not owned")
    };

    let runs = Arc::new(AtomicUsize::new(0));
    let runs_w = runs.clone();
    let watch = async {
        // Complete as soon as the waiter has been told in_progress.
        seen.wait_until("an in_progress answer", |calls| {
            calls
                .iter()
                .any(|c| c.url.ends_with("/claim") && c.status == 409)
        })
        .await;
        owner
            .complete(
                "orders.create",
                &key,
                &held.owner_token,
                &Outcome::new(201).body(json!({"order": "o-2"})),
            )
            .await
            .expect("complete");
    };
    let once = waiter.once(
        Once::new("orders.create", key.clone(), json!({"sku": "book-2"}))
            .deadline(Duration::from_secs(15)),
        |_ctx| async move {
            runs_w.fetch_add(1, Ordering::SeqCst);
            Ok(Outcome::new(500))
        },
        rerun_effect,
    );
    let (result, ()) = tokio::join!(once, watch);
    let result = result.expect("once");

    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(result.replayed);
    assert_eq!(result.outcome.body, Some(json!({"order": "o-2"})));
    // One in_progress answer (Retry-After: 2), then the replay: not before Retry-After.
    let claims = seen.calls_to("/claim");
    assert_eq!(claims.len(), 2, "{claims:?}");
    let gap = claims[1].at - claims[0].at;
    assert!(gap >= Duration::from_millis(1_900), "retried after {gap:?}");
}

#[tokio::test]
async fn in_progress_deadline_gives_up_with_a_typed_timeout() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let protected = Protected::Request(json!({"sku": "book-3"}));
    let lease = ClaimOptions {
        wait: None,
        lease: Some(Duration::from_secs(60)),
    };
    let held = client
        .claim("orders.create", &key, &protected, &lease)
        .await
        .expect("claim");
    assert!(matches!(held, Claim::Owned(_)));

    let runs = Arc::new(AtomicUsize::new(0));
    let runs_in = runs.clone();
    let t0 = std::time::Instant::now();
    let err = client
        .once(
            Once::new("orders.create", key, json!({"sku": "book-3"}))
                .deadline(Duration::from_millis(1_500)),
            |_ctx| async move {
                runs_in.fetch_add(1, Ordering::SeqCst);
                Ok(Outcome::new(201))
            },
            rerun_effect,
        )
        .await
        .expect_err("timeout");
    let took = t0.elapsed();

    assert!(
        matches!(
            err,
            Error::InProgressTimeout {
                attempt: Some(1),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "in_progress_timeout");
    assert!(
        took >= Duration::from_millis(1_400) && took < Duration::from_secs(6),
        "took {took:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}
