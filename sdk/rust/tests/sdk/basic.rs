//! The plain cases: a new key, a replay, a business failure, a reused key,
//! a quarantined key, and the key helper.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idemkey_client::{
    is_uuid_v7, key_timestamp_ms, new_key, rerun_effect, Claim, EffectError, Error, KeyState, Once,
    Outcome, Policy, Protected,
};
use serde_json::{json, Value};

use crate::support::TestServer;

fn request() -> Value {
    json!({"amount": "25.00", "currency": "EUR", "customer": "cus_42"})
}

/// An effect that counts its runs and answers `outcome`.
fn counted(
    runs: &Arc<AtomicUsize>,
    outcome: Outcome,
) -> impl FnOnce(idemkey_client::EffectContext) -> std::future::Ready<Result<Outcome, EffectError>>
{
    let runs = runs.clone();
    move |_ctx| {
        runs.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(outcome))
    }
}

#[tokio::test]
async fn claimed_runs_effect_once() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let seen = Arc::new(Mutex::new(Vec::new()));

    let seen_in = seen.clone();
    let result = client
        .once(
            Once::new("charges.create", key.clone(), request()),
            |ctx| async move {
                seen_in.lock().expect("seen").push((
                    ctx.effect_id().to_owned(),
                    ctx.attempt(),
                    ctx.recovering(),
                ));
                Ok(Outcome::new(201)
                    .body(json!({"charge": "ch_1"}))
                    .header("Location", "/charges/ch_1")
                    .resource_id("ch_1"))
            },
            rerun_effect,
        )
        .await
        .expect("once");

    let seen = seen.lock().expect("seen").clone();
    assert_eq!(seen.len(), 1);
    let (effect_id, attempt, recovering) = &seen[0];
    assert!(
        effect_id.starts_with("eff_") && effect_id.len() == 36,
        "{effect_id}"
    );
    assert_eq!((*attempt, *recovering), (1, false));
    assert!(!result.replayed);
    assert_eq!(result.via, idemkey_client::Via::Effect);
    assert_eq!(&result.effect_id, effect_id);
    assert_eq!(result.attempt, 1);
    assert_eq!(result.outcome.status_code, 201);
    assert_eq!(result.outcome.body, Some(json!({"charge": "ch_1"})));
    assert_eq!(result.outcome.resource_id.as_deref(), Some("ch_1"));
    let record = client
        .lookup("charges.create", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!(record.state, KeyState::Completed);
    assert_eq!(record.outcome, Some(result.outcome));
}

#[tokio::test]
async fn completed_replays_without_effect() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let runs = Arc::new(AtomicUsize::new(0));
    let outcome = Outcome::new(201).body(json!({"charge": "ch_2"}));

    let first = client
        .once(
            Once::new("charges.create", key.clone(), request()),
            counted(&runs, outcome.clone()),
            rerun_effect,
        )
        .await
        .expect("first");
    // The same request, its fields in another order.
    let reordered = json!({"customer": "cus_42", "currency": "EUR", "amount": "25.00"});
    let second = client
        .once(
            Once::new("charges.create", key, reordered),
            counted(&runs, Outcome::new(500)),
            rerun_effect,
        )
        .await
        .expect("second");

    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(!first.replayed);
    assert!(second.replayed);
    assert_eq!(second.via, idemkey_client::Via::Replay);
    assert_eq!(second.outcome, outcome);
    assert_eq!(second.effect_id, first.effect_id);
    assert!(second.expires_at > chrono::Utc::now());
}

#[tokio::test]
async fn business_failure_is_final() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let runs = Arc::new(AtomicUsize::new(0));
    let declined = Outcome::new(402).body(json!({"error": "card_declined"}));

    let first = client
        .once(
            Once::new("charges.create", key.clone(), request()),
            counted(&runs, declined.clone()),
            rerun_effect,
        )
        .await
        .expect("first");
    let second = client
        .once(
            Once::new("charges.create", key, request()),
            counted(&runs, Outcome::new(201)),
            rerun_effect,
        )
        .await
        .expect("second");

    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!((first.outcome.status_code, first.replayed), (402, false));
    assert!(second.replayed);
    assert_eq!(second.outcome, declined);
}

#[tokio::test]
async fn key_reused_raises_with_the_mismatched_pointers() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let runs = Arc::new(AtomicUsize::new(0));
    client
        .once(
            Once::new("charges.create", key.clone(), request()),
            counted(&runs, Outcome::new(201)),
            rerun_effect,
        )
        .await
        .expect("first");

    let other = json!({"amount": "30.00", "currency": "EUR", "customer": "cus_42"});
    let err = client
        .once(
            Once::new("charges.create", key, other),
            counted(&runs, Outcome::new(201)),
            rerun_effect,
        )
        .await
        .expect_err("key reused");

    match &err {
        Error::KeyReused {
            problem,
            mismatched,
            mismatched_truncated,
        } => {
            assert_eq!(problem.status, 422);
            assert_eq!(mismatched.as_deref(), Some(&["/amount".to_owned()][..]));
            assert!(!mismatched_truncated);
        }
        other => panic!("expected KeyReused, got {other:?}"),
    }
    assert_eq!(err.code(), "key_reused");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn quarantined_raises_when_the_owner_quarantined_the_key() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let protected = Protected::Request(request());
    let Claim::Owned(owned) = client
        .claim("charges.create", &key, &protected, &Default::default())
        .await
        .expect("claim")
    else {
        panic!("not owned")
    };
    let record = client
        .quarantine(
            "charges.create",
            &key,
            &owned.owner_token,
            "provider timed out",
        )
        .await
        .expect("quarantine");
    assert_eq!(record.state, KeyState::Quarantined);

    let runs = Arc::new(AtomicUsize::new(0));
    let err = client
        .once(
            Once::new("charges.create", key, request()),
            counted(&runs, Outcome::new(201)),
            rerun_effect,
        )
        .await
        .expect_err("quarantined");
    assert!(
        matches!(err, Error::Quarantined(ref p) if p.status == 409),
        "{err:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn quarantined_raises_when_the_class_quarantines_expired_leases() {
    let server = TestServer::start().await;
    let client = server.client();
    let policy = Policy {
        on_lease_expiry: Some("quarantine".into()),
        ..Policy::default()
    };
    client
        .put_operation_class("payouts.send", &policy)
        .await
        .expect("policy");
    let key = new_key();
    // An owner that dies after claiming.
    let dead = client
        .claim(
            "payouts.send",
            &key,
            &Protected::Request(request()),
            &idemkey_client::ClaimOptions {
                wait: None,
                lease: Some(Duration::from_secs(1)),
            },
        )
        .await
        .expect("claim");
    assert!(matches!(dead, Claim::Owned(_)));

    let runs = Arc::new(AtomicUsize::new(0));
    let err = client
        .once(
            Once::new("payouts.send", key.clone(), request()).deadline(Duration::from_secs(10)),
            counted(&runs, Outcome::new(201)),
            rerun_effect,
        )
        .await
        .expect_err("quarantined");
    assert!(matches!(err, Error::Quarantined(_)), "{err:?}");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    let record = client
        .lookup("payouts.send", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!(record.state, KeyState::Quarantined);
}

#[tokio::test]
async fn key_helper_uuidv7() {
    let before = chrono::Utc::now().timestamp_millis();
    let keys: Vec<String> = (0..5000).map(|_| new_key()).collect();
    let after = chrono::Utc::now().timestamp_millis();
    for k in &keys {
        assert!(is_uuid_v7(k), "{k}");
        assert_eq!(&k[14..15], "7", "version");
        let ts = i64::try_from(key_timestamp_ms(k).expect("timestamp")).expect("i64");
        // Within one millisecond the counter may carry into the next one.
        assert!(
            ts >= before && ts <= after + 1,
            "{ts} not in [{before}, {after}]"
        );
    }
    // Strictly increasing: sorting keeps the order they were made in.
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, keys);
    sorted.dedup();
    assert_eq!(sorted.len(), keys.len());
    assert!(
        !is_uuid_v7("01938a4e-7c2b-4d3e-9f10-2a3b4c5d6e7f"),
        "a v4 is not a v7"
    );
    assert_eq!(key_timestamp_ms("order-1001"), None);
}
