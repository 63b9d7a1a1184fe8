//! The store's compare-and-swap contract, called directly on both backends:
//! one body per case (when a window ends: `store_windows.rs`). Leases and windows are seconds long, and time moves by
//! `stores::advance` (the key's stored times move back), so no case waits
//! on the wall clock.

use std::sync::Arc;
use std::time::Duration;

use idemkey_api::domain::policy::LeaseExpiry;
use idemkey_api::domain::{decide, Decision, OwnerToken, Policy, RecordState};
use idemkey_api::store::{Resolver, StepDone, Store};
use idemkey_tests::stores::{advance, claim, decision, fingerprint, fresh_key, row, Outcome};

const S: Duration = Duration::from_secs(1);

idemkey_tests::on_both_stores!(
    one_insert_wins_among_concurrent_claims,
    one_renewal_wins_among_concurrent_claims,
    one_takeover_wins_among_concurrent_claims,
    completion_and_takeover_race_with_one_winner,
    a_live_lease_cannot_be_taken_over,
    a_stale_attempt_cannot_take_over,
    a_wrong_owner_changes_nothing,
    a_takeover_seen_before_a_release_cannot_take_the_next_record,
    the_lease_watch_quarantines_only_the_version_it_saw,
    the_lease_watch_visits_quarantine_classes_fairly_across_tenants,
);

async fn one_insert_wins_among_concurrent_claims(store: Store) {
    let k = fresh_key("pay");
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, k) = (store.clone(), k.clone());
            tokio::spawn(async move {
                let (c, token) = claim(1, 30 * S, 60 * S);
                let won = store.insert_claim(&k, &c).await.expect("insert answers");
                won.map(|r| (r, token))
            })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        winners.extend(t.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "exactly one insert wins");
    let (won, token) = &winners[0];
    assert_eq!(won.attempt, 1);
    assert_eq!(row(&store, &k).await.owner_token_hash, token.hash());
}

async fn one_renewal_wins_among_concurrent_claims(store: Store) {
    let k = fresh_key("pay");
    let (c, owner) = claim(1, 5 * S, 10 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    let done = Outcome::numbered(1);
    store.complete(&k, &done.by(&owner)).await.unwrap().unwrap();
    advance(&store, &k, 11 * S).await;
    assert_eq!(decision(&store, &k, 2).await, Decision::Renew);

    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (store, k) = (store.clone(), k.clone());
            tokio::spawn(async move {
                let (c, _) = claim(2 + i, 5 * S, 10 * S);
                store.renew_expired(&k, &c).await.expect("renew answers")
            })
        })
        .collect();
    let mut renewed = 0;
    for t in tasks {
        renewed += usize::from(t.await.unwrap().is_some());
    }
    assert_eq!(renewed, 1, "exactly one renewal wins");
    let now = row(&store, &k).await;
    assert_eq!((now.state, now.attempt), (RecordState::InProgress, 1));
}

async fn one_takeover_wins_among_concurrent_claims(store: Store) {
    let k = fresh_key("pay");
    let (c, _) = claim(1, 5 * S, 60 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    advance(&store, &k, 6 * S).await;
    let seen = row(&store, &k).await.version();

    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, k) = (store.clone(), k.clone());
            tokio::spawn(async move {
                let owner = OwnerToken::generate();
                let taken = store.take_over(&k, seen, owner.hash(), 5 * S).await;
                taken.expect("takeover answers").map(|r| (r, owner))
            })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        winners.extend(t.await.unwrap());
    }
    assert_eq!(winners.len(), 1, "exactly one takeover wins");
    let now = row(&store, &k).await;
    assert_eq!(now.attempt, 2);
    assert_eq!(now.owner_token_hash, winners[0].1.hash());
}

async fn completion_and_takeover_race_with_one_winner(store: Store) {
    for _ in 0..10 {
        let k = fresh_key("pay");
        let (c, owner) = claim(1, 5 * S, 60 * S);
        store.insert_claim(&k, &c).await.unwrap().unwrap();
        advance(&store, &k, 6 * S).await;
        let seen = row(&store, &k).await.version();
        let done = Arc::new(Outcome::numbered(1));

        let completer = {
            let (store, k, done) = (store.clone(), k.clone(), done.clone());
            tokio::spawn(async move { store.complete(&k, &done.by(&owner)).await.unwrap() })
        };
        let takers: Vec<_> = (0..4)
            .map(|_| {
                let (store, k) = (store.clone(), k.clone());
                tokio::spawn(async move {
                    let owner = OwnerToken::generate();
                    store
                        .take_over(&k, seen, owner.hash(), 5 * S)
                        .await
                        .unwrap()
                })
            })
            .collect();
        let completed = completer.await.unwrap().is_some();
        let mut taken = 0;
        for t in takers {
            taken += usize::from(t.await.unwrap().is_some());
        }
        assert_eq!(
            usize::from(completed) + taken,
            1,
            "one of the completion and the takeovers wins"
        );
        let now = row(&store, &k).await;
        match completed {
            true => assert_eq!((now.state, now.attempt), (RecordState::Completed, 1)),
            false => assert_eq!((now.state, now.attempt), (RecordState::InProgress, 2)),
        }
    }
}

async fn a_live_lease_cannot_be_taken_over(store: Store) {
    let k = fresh_key("pay");
    let (c, owner) = claim(1, 5 * S, 60 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    let seen = row(&store, &k).await.version();
    let other = OwnerToken::generate();
    assert!(store
        .take_over(&k, seen, other.hash(), 5 * S)
        .await
        .unwrap()
        .is_none());
    assert!(store.quarantine_expired(&k, seen).await.unwrap().is_none());
    assert_eq!(row(&store, &k).await.owner_token_hash, owner.hash());
}

async fn a_stale_attempt_cannot_take_over(store: Store) {
    let k = fresh_key("pay");
    let (c, _) = claim(1, 5 * S, 60 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    advance(&store, &k, 6 * S).await;
    let first = row(&store, &k).await.version();
    let second = OwnerToken::generate();
    let taken = store.take_over(&k, first, second.hash(), 5 * S).await;
    assert_eq!(taken.unwrap().expect("first takeover").attempt, 2);
    advance(&store, &k, 6 * S).await;

    // Attempt 2's lease has run out too, but a claim that saw attempt 1 may
    // not take attempt 2 over: it must read again.
    let late = OwnerToken::generate();
    let stale = store.take_over(&k, first, late.hash(), 5 * S).await;
    assert!(stale.unwrap().is_none(), "a stale attempt took over");
    assert!(store.quarantine_expired(&k, first).await.unwrap().is_none());
    let now = row(&store, &k).await;
    assert_eq!((now.attempt, now.owner_token_hash), (2, second.hash()));
}

async fn a_wrong_owner_changes_nothing(store: Store) {
    let k = fresh_key("pay");
    let (c, _owner) = claim(1, 5 * S, 60 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    let before = row(&store, &k).await;
    let stranger = OwnerToken::generate();
    let done = Outcome::numbered(9);

    assert!(store
        .complete(&k, &done.by(&stranger))
        .await
        .unwrap()
        .is_none());
    assert!(store
        .heartbeat(&k, stranger.hash(), Some(50 * S))
        .await
        .unwrap()
        .is_none());
    let step = StepDone {
        owner: stranger.hash(),
        step: "debit",
        provider_ref: "ref-1",
    };
    assert!(store.record_step(&k, &step).await.unwrap().is_none());
    assert!(store
        .quarantine(&k, stranger.hash(), "unsure")
        .await
        .unwrap()
        .is_none());
    assert!(!store.release(&k, stranger.hash()).await.unwrap());
    let by = Resolver {
        owner: Some(stranger.hash()),
        actor: "owner".into(),
    };
    assert!(store
        .resolve_complete(&k, &by, &done.by(&stranger))
        .await
        .unwrap()
        .is_none());
    assert!(!store.resolve_release(&k, &by, None).await.unwrap());

    let after = row(&store, &k).await;
    assert_eq!(after.state, before.state);
    assert_eq!(after.attempt, before.attempt);
    assert_eq!(after.lease_expires_at, before.lease_expires_at);
    assert_eq!(after.updated_at, before.updated_at);
    assert_eq!(after.steps, before.steps);
    assert_eq!(after.history, before.history);
}

/// A claim reads R1 (attempt 1, lease over) and stalls; R1 is released and
/// another request writes R2, also attempt 1, whose lease then runs out.
/// The stalled claim's takeover must not take R2.
async fn a_takeover_seen_before_a_release_cannot_take_the_next_record(store: Store) {
    let k = fresh_key("pay");
    let (c1, owner1) = claim(1, 5 * S, 60 * S);
    store.insert_claim(&k, &c1).await.unwrap().unwrap();
    advance(&store, &k, 6 * S).await;
    let seen = row(&store, &k).await;
    assert_eq!(
        decide(&seen.seen(), &fingerprint(1), LeaseExpiry::Takeover),
        Decision::TakeOver
    );

    assert!(store.release(&k, owner1.hash()).await.unwrap());
    let (c2, owner2) = claim(2, 5 * S, 60 * S);
    let r2 = store.insert_claim(&k, &c2).await.unwrap().expect("R2");
    assert_eq!(r2.attempt, seen.attempt, "the attempt number restarted");
    advance(&store, &k, 6 * S).await;

    let stalled = OwnerToken::generate();
    let taken = store.take_over(&k, seen.version(), stalled.hash(), 5 * S);
    assert!(
        taken.await.unwrap().is_none(),
        "took over another request's record"
    );
    let quarantined = store.quarantine_expired(&k, seen.version()).await;
    assert!(
        quarantined.unwrap().is_none(),
        "quarantined another request's record"
    );
    let now = row(&store, &k).await;
    assert_eq!(now.fingerprint, fingerprint(2));
    assert_eq!(now.owner_token_hash, owner2.hash());
    assert_eq!((now.state, now.attempt), (RecordState::InProgress, 1));
}

/// Makes `k`'s class one that quarantines on lease expiry.
async fn quarantining_class(store: &Store, k: &idemkey_api::domain::ScopedKey) {
    let policy = Policy::from_json(br#"{"on_lease_expiry": "quarantine"}"#).unwrap();
    store
        .put_class(&k.tenant, &k.operation, &policy.to_json())
        .await
        .unwrap();
}

async fn the_lease_watch_quarantines_only_the_version_it_saw(store: Store) {
    let k = fresh_key("pay");
    quarantining_class(&store, &k).await;
    let (c1, owner1) = claim(1, 5 * S, 60 * S);
    store.insert_claim(&k, &c1).await.unwrap().unwrap();
    advance(&store, &k, 6 * S).await;
    let listed = store.expired_leases(10_000).await.unwrap();
    let (_, seen) = listed
        .into_iter()
        .find(|(key, _)| *key == k)
        .expect("the expired lease is listed");
    assert_eq!(seen, row(&store, &k).await.version());

    assert!(store.release(&k, owner1.hash()).await.unwrap());
    let (c2, _) = claim(1, 5 * S, 60 * S);
    store.insert_claim(&k, &c2).await.unwrap().unwrap();
    advance(&store, &k, 6 * S).await;
    assert!(store.quarantine_expired(&k, seen).await.unwrap().is_none());
    assert_eq!(row(&store, &k).await.state, RecordState::InProgress);
}

/// The watch lists only what it acts on (classes that quarantine on lease
/// expiry), each tenant's oldest first: one tenant's backlog of abandoned
/// keys cannot crowd another tenant out of a batch.
async fn the_lease_watch_visits_quarantine_classes_fairly_across_tenants(store: Store) {
    let busy = fresh_key("pay");
    let quiet = fresh_key("pay");
    let takeover = fresh_key("pay");
    quarantining_class(&store, &busy).await;
    quarantining_class(&store, &quiet).await;
    let mut busy_keys = Vec::new();
    for i in 0..5 {
        let mut k = busy.clone();
        k.key = idemkey_api::domain::IdempotencyKey::parse(&format!("b{i}")).unwrap();
        busy_keys.push(k);
    }
    for k in busy_keys.iter().chain([&quiet, &takeover]) {
        store
            .insert_claim(k, &claim(1, 5 * S, 60 * S).0)
            .await
            .unwrap()
            .unwrap();
    }
    // The busy tenant's keys have waited longest.
    for k in &busy_keys {
        advance(&store, k, 60 * S).await;
    }
    advance(&store, &quiet, 6 * S).await;
    advance(&store, &takeover, 60 * S).await;

    let listed: Vec<_> = store
        .expired_leases(2)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&quiet), "{listed:?}");
    assert!(listed.iter().any(|k| busy_keys.contains(k)), "{listed:?}");
    let all = store.expired_leases(10_000).await.unwrap();
    assert!(
        all.iter().all(|(k, _)| *k != takeover),
        "a takeover class's key is left for its next claim"
    );
}
