//! Faults between the SDK and the server: the server killed mid-call, a
//! lost answer, 503 and 429. Every retry is the same call with the same key.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use idemkey_client::{
    new_key, rerun_effect, Claim, ClaimOptions, HttpResponse, KeyState, Once, Outcome, Protected,
};
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::json;
use tokio::sync::{Mutex, Notify};

use crate::support::{key_of, TestServer, Verdict};

/// The distinct keys of the key calls seen.
fn keys(calls: &[crate::support::Seen]) -> HashSet<String> {
    calls.iter().filter_map(|c| key_of(&c.url)).collect()
}

#[tokio::test]
async fn server_killed_mid_call_retries_the_same_key_and_the_effect_runs_once() {
    let server = Arc::new(Mutex::new(TestServer::start().await));
    let claim_sent = Arc::new(Notify::new());
    let notify = claim_sent.clone();
    let (holder, (client, seen)) = {
        let s = server.lock().await;
        let hooked = s.hooked_client(Box::new(move |r| {
            if r.url.ends_with("/claim") {
                notify.notify_one();
            }
            Verdict::Pass
        }));
        (s.client(), hooked)
    };
    let key = new_key();
    let request = json!({"amount": "12.00", "currency": "EUR"});
    // Another worker holds the key, so our claim waits on the server (wait_ms).
    let lease = ClaimOptions {
        wait: None,
        lease: Some(Duration::from_secs(60)),
    };
    let Claim::Owned(held) = holder
        .claim(
            "charges.create",
            &key,
            &Protected::Request(request.clone()),
            &lease,
        )
        .await
        .expect("claim")
    else {
        panic!("not owned")
    };

    let runs = Arc::new(AtomicUsize::new(0));
    let (runs_in, server_in) = (runs.clone(), server.clone());
    let restarted: Arc<Mutex<Option<tokio::task::JoinHandle<()>>>> = Arc::new(Mutex::new(None));
    let restarted_in = restarted.clone();
    let once = client.once(
        Once::new("charges.create", key.clone(), request.clone()).deadline(Duration::from_secs(30)),
        |_ctx| async move {
            runs_in.fetch_add(1, Ordering::SeqCst);
            // Kill the server again while the effect runs: the complete that
            // follows meets a dead server and is retried until it is back.
            server_in.lock().await.kill().await;
            let again = server_in.clone();
            *restarted_in.lock().await =
                Some(tokio::spawn(
                    async move { again.lock().await.restart().await },
                ));
            Ok(Outcome::new(201).body(json!({"charge": "ch_k"})))
        },
        rerun_effect,
    );
    let chaos = async {
        // Our claim is outstanding (waiting for the holder): kill the server under it.
        claim_sent.notified().await;
        {
            let mut s = server.lock().await;
            s.kill().await;
            s.restart().await;
        }
        // The holder gives up without acting, so the waiting caller can own the key.
        holder
            .release("charges.create", &key, &held.owner_token)
            .await
            .expect("release");
    };
    let (result, ()) = tokio::join!(once, chaos);
    let result = result.expect("once");
    if let Some(h) = restarted.lock().await.take() {
        h.await.expect("restart");
    }

    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(!result.replayed);
    assert_eq!(result.outcome.body, Some(json!({"charge": "ch_k"})));
    let calls = seen.calls();
    assert!(calls.len() >= 3, "{calls:?}");
    assert!(
        calls.iter().any(|c| c.status == 0),
        "no call met the dead server: {calls:?}"
    );
    assert_eq!(
        keys(&calls),
        HashSet::from([key.clone()]),
        "a retry used another key"
    );
    let record = holder
        .lookup("charges.create", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!((record.state, record.attempt), (KeyState::Completed, 1));
    let again = client
        .once(
            Once::new("charges.create", key, request),
            |_ctx| async { Ok(Outcome::new(500)) },
            rerun_effect,
        )
        .await
        .expect("replay");
    assert!(again.replayed);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn lost_complete_answer_is_retried_and_returns_the_stored_outcome() {
    let server = TestServer::start().await;
    let completes = Arc::new(AtomicUsize::new(0));
    let counter = completes.clone();
    let (client, seen) = server.hooked_client(Box::new(move |r| {
        // The first complete reaches the server, which stores the outcome…
        // but its answer never arrives.
        if r.url.ends_with("/complete") && counter.fetch_add(1, Ordering::SeqCst) == 0 {
            Verdict::LoseAnswer
        } else {
            Verdict::Pass
        }
    }));
    let key = new_key();
    let runs = Arc::new(AtomicUsize::new(0));
    let runs_in = runs.clone();
    let result = client
        .once(
            Once::new("charges.create", key.clone(), json!({"amount": "1.00"})),
            |_ctx| async move {
                runs_in.fetch_add(1, Ordering::SeqCst);
                Ok(Outcome::new(201).body(json!({"charge": "ch_lost"})))
            },
            rerun_effect,
        )
        .await
        .expect("once");

    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(completes.load(Ordering::SeqCst), 2);
    assert_eq!(result.outcome.body, Some(json!({"charge": "ch_lost"})));
    assert_eq!(keys(&seen.calls()), HashSet::from([key.clone()]));
    let again = client
        .once(
            Once::new("charges.create", key, json!({"amount": "1.00"})),
            |_ctx| async { Ok(Outcome::new(500)) },
            rerun_effect,
        )
        .await
        .expect("replay");
    assert!(again.replayed);
    assert_eq!(again.outcome.body, Some(json!({"charge": "ch_lost"})));
}

#[tokio::test]
async fn unavailable_is_retried_after_retry_after_with_the_same_key() {
    let server = TestServer::start().await;
    let served = Arc::new(AtomicUsize::new(0));
    let served_in = served.clone();
    let (client, seen) = server.hooked_client(Box::new(move |r| {
        if r.url.ends_with("/claim") && served_in.fetch_add(1, Ordering::SeqCst) == 0 {
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", HeaderValue::from_static("1"));
            headers.insert("content-type", HeaderValue::from_static("application/problem+json"));
            let body = json!({"code": "unavailable", "status": 503, "title": "The store cannot answer", "type": "about:blank"});
            Verdict::Answer(HttpResponse { status: 503, headers, body: body.to_string().into_bytes() })
        } else {
            Verdict::Pass
        }
    }));
    let key = new_key();
    let result = client
        .once(
            Once::new("charges.create", key.clone(), json!({"amount": "2.00"})),
            |_ctx| async { Ok(Outcome::new(201)) },
            rerun_effect,
        )
        .await
        .expect("once");

    assert!(!result.replayed);
    assert_eq!(result.attempt, 1);
    let claims = seen.calls_to("/claim");
    assert_eq!(
        claims.iter().map(|c| c.status).collect::<Vec<_>>(),
        [503, 201]
    );
    let gap = claims[1].at - claims[0].at;
    assert!(
        gap >= Duration::from_millis(1_000),
        "retried after {gap:?}, before Retry-After"
    );
    assert_eq!(keys(&claims), HashSet::from([key]));
}

#[tokio::test]
async fn unavailable_is_retried_and_so_is_a_real_429_rate_limited() {
    let server = TestServer::start_with(&[("IDEMKEY_TENANT_RATE_LIMIT", "2")]).await;
    let (client, seen) = server.hooked_client(Box::new(|_| Verdict::Pass));
    let key = new_key();
    let runs = Arc::new(AtomicUsize::new(0));
    let runs_in = runs.clone();
    // Several calls in one second: the limiter must refuse some of them.
    let result = client
        .once(
            Once::new("charges.create", key.clone(), json!({"amount": "3.00"})),
            |ctx| async move {
                runs_in.fetch_add(1, Ordering::SeqCst);
                ctx.record_step("charge", "ch_1").await?;
                ctx.record_step("charge", "ch_1").await?;
                Ok(Outcome::new(201))
            },
            rerun_effect,
        )
        .await
        .expect("once");
    let again = client
        .once(
            Once::new("charges.create", key.clone(), json!({"amount": "3.00"})),
            |_ctx| async { Ok(Outcome::new(500)) },
            rerun_effect,
        )
        .await
        .expect("replay");

    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(!result.replayed && again.replayed);
    let calls = seen.calls();
    assert!(
        calls.iter().any(|c| c.status == 429),
        "no 429 seen: {calls:?}"
    );
    assert_eq!(keys(&calls), HashSet::from([key]));
}
