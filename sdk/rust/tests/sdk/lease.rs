//! Long effects: heartbeats keep the lease; a lost lease stops the owner.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idemkey_client::{
    new_key, rerun_effect, Claim, ClaimOptions, Error, KeyState, Once, Outcome, Protected,
};
use serde_json::json;
use tokio::sync::oneshot;

use crate::support::{TestServer, Verdict};

#[tokio::test]
async fn heartbeat_keeps_long_effect_alive_and_stops_on_completion() {
    let server = TestServer::start().await;
    let (client, seen) = server.hooked_client(Box::new(|_| Verdict::Pass));
    let other = server.client();
    let key = new_key();
    let protected = Protected::Request(json!({"env": "env-7"}));

    let (other_in, key_in, protected_in) = (other.clone(), key.clone(), protected.clone());
    let result = client
        .once(
            Once::new("env.provision", key.clone(), json!({"env": "env-7"})).lease(Duration::from_secs(2)),
            |_ctx| async move {
                // A 3.5 s effect under a 2 s lease; another caller keeps trying
                // to take the key over meanwhile.
                let mut answers = Vec::new();
                let until = Instant::now() + Duration::from_millis(3_500);
                while Instant::now() < until {
                    let c = other_in
                        .claim("env.provision", &key_in, &protected_in, &ClaimOptions::default())
                        .await
                        .map_err(idemkey_client::EffectError::ambiguous)?;
                    answers.push(matches!(c, Claim::InProgress(_)));
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Ok(Outcome::new(201).body(json!({"in_progress_every_time": answers.iter().all(|a| *a), "tries": answers.len()})))
            },
            rerun_effect,
        )
        .await
        .expect("once");

    assert_eq!(result.attempt, 1);
    let body = result.outcome.body.expect("body");
    assert_eq!(body["in_progress_every_time"], json!(true), "{body}");
    assert!(body["tries"].as_u64().expect("tries") >= 5, "{body}");
    let beats = seen.calls_to("/heartbeat");
    assert!(beats.len() >= 4, "only {} heartbeats", beats.len());
    let record = other
        .lookup("env.provision", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!((record.state, record.attempt), (KeyState::Completed, 1));
    // Stopped: every heartbeat was sent before the complete, and none
    // follows over two heartbeat intervals.
    let complete = seen.calls_to("/complete")[0].at;
    assert!(beats.iter().all(|b| b.at < complete));
    tokio::time::sleep(Duration::from_millis(1_400)).await;
    assert_eq!(seen.calls_to("/heartbeat").len(), beats.len());
}

#[tokio::test]
async fn lease_lost_during_long_effect() {
    let server = TestServer::start().await;
    let block = Arc::new(AtomicBool::new(true));
    let block_in = block.clone();
    // Heartbeats are lost on the way until the takeover happened.
    let (client, _seen) = server.hooked_client(Box::new(move |r| {
        if r.url.ends_with("/heartbeat") && block_in.load(Ordering::SeqCst) {
            Verdict::Fail
        } else {
            Verdict::Pass
        }
    }));
    let other = server.client();
    let key = new_key();
    let (started_tx, started) = oneshot::channel::<()>();

    let first = client.once(
        Once::new("env.provision", key.clone(), json!({"env": "env-8"}))
            .lease(Duration::from_secs(1)),
        |ctx| async move {
            let _ = started_tx.send(());
            // The long effect: it runs until the lease is lost.
            ctx.lease_signal().lost().await;
            assert!(ctx.lease_lost());
            Ok(Outcome::new(201).body(json!({"from": "first owner"})))
        },
        rerun_effect,
    );
    let takeover = async {
        started.await.expect("started");
        // Once the lease has run out, the other caller takes over.
        let wait = ClaimOptions {
            wait: Some(Duration::from_secs(5)),
            lease: None,
        };
        let c = other
            .claim(
                "env.provision",
                &key,
                &Protected::Request(json!({"env": "env-8"})),
                &wait,
            )
            .await
            .expect("claim");
        block.store(false, Ordering::SeqCst);
        c
    };
    let (first, takeover) = tokio::join!(first, takeover);

    let err = first.expect_err("lease lost");
    assert!(matches!(err, Error::LeaseLost(_)), "{err:?}");
    assert_eq!(err.code(), "lease_lost");
    let Claim::Owned(second) = takeover else {
        panic!("no takeover: {takeover:?}")
    };
    assert!(second.recovering);
    let record = other
        .lookup("env.provision", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!((record.state, record.attempt), (KeyState::InProgress, 2));
    other
        .complete(
            "env.provision",
            &key,
            &second.owner_token,
            &Outcome::new(201).body(json!({"from": "second owner"})),
        )
        .await
        .expect("complete");
    let record = other
        .lookup("env.provision", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!(
        record.outcome.and_then(|o| o.body),
        Some(json!({"from": "second owner"}))
    );
}
