//! After a previous owner died (its lease ran out): reconcile first, run
//! only what is missing; and what an effect's failure does to the key.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use idemkey_client::{
    new_key, rerun_effect, Claim, ClaimOptions, Client, EffectError, Error, KeyState, Once,
    Outcome, OwnedClaim, Protected, Reconciliation,
};
use serde_json::{json, Value};

use crate::support::TestServer;

fn request() -> Value {
    json!({"amount": "9.99", "currency": "EUR"})
}

/// A fake provider that never deduplicates: it remembers charges by reference.
#[derive(Clone, Default)]
struct Provider {
    charges: Arc<Mutex<HashMap<String, String>>>,
    calls: Arc<AtomicUsize>,
}

impl Provider {
    fn charge(&self, reference: &str) -> String {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut charges = self.charges.lock().expect("charges");
        let id = format!("ch_{}", charges.len() + 1);
        charges.insert(reference.to_owned(), id.clone());
        id
    }

    fn find(&self, reference: &str) -> Option<String> {
        self.charges
            .lock()
            .expect("charges")
            .get(reference)
            .cloned()
    }
}

/// A worker that claims with a 1 s lease and then dies (never completes).
async fn claim_and_die(client: &Client, operation: &str, key: &str) -> OwnedClaim {
    let lease = ClaimOptions {
        wait: None,
        lease: Some(Duration::from_secs(1)),
    };
    match client
        .claim(operation, key, &Protected::Request(request()), &lease)
        .await
        .expect("claim")
    {
        Claim::Owned(o) => o,
        other => panic!("not owned: {other:?}"),
    }
}

fn soon(operation: &str, key: &str) -> Once {
    Once::new(operation, key, request()).deadline(Duration::from_secs(10))
}

#[tokio::test]
async fn recovering_finds_effect_done() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let provider = Provider::default();
    let dead = claim_and_die(&client, "charges.create", &key).await;
    provider.charge(&dead.effect_id); // it charged, then died before complete

    let runs = Arc::new(AtomicUsize::new(0));
    let reconciled = Arc::new(Mutex::new(Vec::new()));
    let (p1, p2, runs_in, rec_in) = (
        provider.clone(),
        provider.clone(),
        runs.clone(),
        reconciled.clone(),
    );
    let result = client
        .once(
            soon("charges.create", &key),
            |ctx| async move {
                runs_in.fetch_add(1, Ordering::SeqCst);
                Ok(Outcome::new(201).body(json!({"charge": p1.charge(ctx.effect_id())})))
            },
            |effect_id, _steps| async move {
                rec_in.lock().expect("rec").push(effect_id.clone());
                Ok(match p2.find(&effect_id) {
                    Some(id) => Reconciliation::Done(
                        Outcome::new(201)
                            .body(json!({"charge": id}))
                            .resource_id(id),
                    ),
                    None => Reconciliation::NothingDone,
                })
            },
        )
        .await
        .expect("once");

    assert_eq!(
        *reconciled.lock().expect("rec"),
        vec![dead.effect_id.clone()]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(provider.calls.load(Ordering::SeqCst), 1);
    assert_eq!(result.via, idemkey_client::Via::Reconcile);
    assert_eq!(result.attempt, 2);
    assert_eq!(result.outcome.body, Some(json!({"charge": "ch_1"})));
    let record = client
        .lookup("charges.create", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!(record.state, KeyState::Completed);
    assert_eq!(
        record.outcome.and_then(|o| o.resource_id).as_deref(),
        Some("ch_1")
    );
}

#[tokio::test]
async fn recovering_finds_nothing_done() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let dead = claim_and_die(&client, "charges.create", &key).await;

    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_in = seen.clone();
    let result = client
        .once(
            soon("charges.create", &key),
            |ctx| async move {
                seen_in.lock().expect("seen").push((
                    ctx.effect_id().to_owned(),
                    ctx.attempt(),
                    ctx.recovering(),
                ));
                Ok(Outcome::new(201))
            },
            |_effect_id, _steps| async { Ok(Reconciliation::NothingDone) },
        )
        .await
        .expect("once");

    assert_eq!(
        *seen.lock().expect("seen"),
        vec![(dead.effect_id.clone(), 2, true)]
    );
    assert!(!result.replayed);
    assert_eq!(result.effect_id, dead.effect_id);
    let record = client
        .lookup("charges.create", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!(record.state, KeyState::Completed);
}

#[tokio::test]
async fn steps_resume_after_last_recorded_step() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let dead = claim_and_die(&client, "orders.fulfil", &key).await;
    client
        .record_step("orders.fulfil", &key, &dead.owner_token, "charge", "ch_77")
        .await
        .expect("step");
    // It dies before shipping.

    let ran = Arc::new(Mutex::new(Vec::<String>::new()));
    let reconcile_saw = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
    let (ran_in, saw_in) = (ran.clone(), reconcile_saw.clone());
    let result = client
        .once(
            soon("orders.fulfil", &key),
            |ctx| async move {
                let (r1, r2) = (ran_in.clone(), ran_in);
                let charge = ctx
                    .step("charge", |id| async move {
                        r1.lock().expect("ran").push(format!("charge:{id}"));
                        Ok::<_, EffectError>("ch_new".to_owned())
                    })
                    .await?;
                let ship = ctx
                    .step("ship", |id| async move {
                        r2.lock().expect("ran").push(format!("ship:{id}"));
                        Ok::<_, EffectError>("sh_1".to_owned())
                    })
                    .await?;
                Ok(Outcome::new(201).body(json!({"charge": charge, "ship": ship})))
            },
            |_effect_id, steps| async move {
                saw_in
                    .lock()
                    .expect("saw")
                    .extend(steps.iter().map(|(n, s)| (n.clone(), s.effect_id.clone())));
                // The recorded step is done; nothing else happened at the providers.
                let done: BTreeMap<String, String> = steps
                    .into_iter()
                    .map(|(n, s)| (n, s.provider_ref))
                    .collect();
                Ok(Reconciliation::StepsDone(done))
            },
        )
        .await
        .expect("once");

    assert_eq!(
        *reconcile_saw.lock().expect("saw"),
        vec![("charge".to_owned(), format!("{}.charge", dead.effect_id))]
    );
    assert_eq!(
        *ran.lock().expect("ran"),
        vec![format!("ship:{}.ship", dead.effect_id)]
    );
    assert_eq!(
        result.outcome.body,
        Some(json!({"charge": "ch_77", "ship": "sh_1"}))
    );
    let record = client
        .lookup("orders.fulfil", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!(record.state, KeyState::Completed);
    assert_eq!(record.steps.keys().collect::<Vec<_>>(), ["charge", "ship"]);
    assert_eq!(record.steps["ship"].provider_ref, "sh_1");
}

#[tokio::test]
async fn effect_fails_before_acting_releases() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let err = client
        .once(
            Once::new("charges.create", key.clone(), request()),
            |_ctx| async {
                Err(EffectError::nothing_done(
                    "card number invalid, provider not called",
                ))
            },
            rerun_effect,
        )
        .await
        .expect_err("nothing done");
    assert!(matches!(err, Error::NothingDone { .. }), "{err:?}");
    assert!(err.to_string().contains("released"), "{err}");
    assert_eq!(
        client.lookup("charges.create", &key).await.expect("lookup"),
        None
    );

    let attempt = Arc::new(AtomicUsize::new(0));
    let attempt_in = attempt.clone();
    let result = client
        .once(
            Once::new("charges.create", key, request()),
            |ctx| async move {
                attempt_in.store(
                    usize::try_from(ctx.attempt()).expect("usize"),
                    Ordering::SeqCst,
                );
                Ok(Outcome::new(201))
            },
            rerun_effect,
        )
        .await
        .expect("once");
    assert_eq!(attempt.load(Ordering::SeqCst), 1);
    assert!(!result.replayed);
}

#[tokio::test]
async fn effect_fails_ambiguously_keeps_key() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = new_key();
    let err = client
        .once(
            Once::new("charges.create", key.clone(), request()).lease(Duration::from_secs(1)),
            |_ctx| async {
                let sent: Result<(), std::io::Error> = Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "provider timed out after the request was sent",
                ));
                // `?` on a provider's error: ambiguous by default.
                sent?;
                Ok(Outcome::new(201))
            },
            rerun_effect,
        )
        .await
        .expect_err("ambiguous");
    let Error::Ambiguous {
        effect_id, source, ..
    } = &err
    else {
        panic!("expected Ambiguous, got {err:?}")
    };
    assert!(source.to_string().contains("timed out"));
    assert_eq!(err.code(), "effect_ambiguous");
    assert!(
        err.to_string().contains("not released") && err.to_string().contains("lease rules"),
        "{err}"
    );
    let record = client
        .lookup("charges.create", &key)
        .await
        .expect("lookup")
        .expect("record");
    assert_eq!(record.state, KeyState::InProgress);

    let reconciled = Arc::new(Mutex::new(String::new()));
    let rec_in = reconciled.clone();
    let recovering = Arc::new(AtomicUsize::new(0));
    let recovering_in = recovering.clone();
    let result = client
        .once(
            soon("charges.create", &key),
            |ctx| async move {
                recovering_in.store(usize::from(ctx.recovering()), Ordering::SeqCst);
                Ok(Outcome::new(201))
            },
            |id, _steps| async move {
                *rec_in.lock().expect("rec") = id;
                Ok(Reconciliation::NothingDone)
            },
        )
        .await
        .expect("once");
    assert_eq!(&*reconciled.lock().expect("rec"), effect_id);
    assert_eq!(recovering.load(Ordering::SeqCst), 1);
    assert_eq!(result.attempt, 2);
}
