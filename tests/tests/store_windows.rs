//! When a window ends, at the store on both backends: a completion keeps a
//! whole window after it, a record never completed stays a window after its
//! last lease, and cleanup follows the same rule. Time moves by
//! `stores::advance` (the key's stored times move back), so no case waits.

use std::time::Duration;

use chrono::TimeDelta;
use idemkey_api::domain::{Decision, RecordState};
use idemkey_api::store::{Resolver, Store};
use idemkey_tests::stores::{advance, claim, cleanup, decision, fresh_key, Outcome};

const S: Duration = Duration::from_secs(1);

idemkey_tests::on_both_stores!(
    a_late_completion_keeps_a_whole_window,
    an_abandoned_attempt_stays_a_window_after_its_lease,
    a_heartbeat_moves_the_end_of_protection,
    a_quarantined_record_stays_a_window_after_its_lease,
    a_resolve_with_an_outcome_keeps_a_whole_window,
);

/// The window is 20 s, the effect takes 30 s under a 100 s lease: the
/// outcome must still replay for a whole window after it was stored.
async fn a_late_completion_keeps_a_whole_window(store: Store) {
    let k = fresh_key("pay");
    let (c, owner) = claim(1, 100 * S, 20 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    advance(&store, &k, 30 * S).await;
    let done = Outcome::numbered(1);
    let completed = store.complete(&k, &done.by(&owner)).await.unwrap();
    let completed = completed.expect("the owner completes a live lease");
    let completed_at = completed.completed_at.unwrap();
    assert!(completed.expires_at >= completed_at + TimeDelta::seconds(20));
    assert_eq!(completed.protected_until(), completed.expires_at);

    assert_eq!(decision(&store, &k, 1).await, Decision::Replay);
    let (again, _) = claim(1, 100 * S, 20 * S);
    assert!(store.renew_expired(&k, &again).await.unwrap().is_none());
    assert_eq!(cleanup(&store).await, 0);
    advance(&store, &k, 19 * S).await;
    assert_eq!(decision(&store, &k, 1).await, Decision::Replay);

    advance(&store, &k, 2 * S).await;
    assert_eq!(decision(&store, &k, 2).await, Decision::Renew);
    assert_eq!(cleanup(&store).await, 1);
}

/// Never completed: past its first window and its lease, the key is still
/// taken over (`recovering`), not claimed anew, until the lease ended a
/// whole window ago.
async fn an_abandoned_attempt_stays_a_window_after_its_lease(store: Store) {
    let k = fresh_key("pay");
    let (c, _) = claim(1, 5 * S, 2 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    advance(&store, &k, 6 * S).await;
    assert_eq!(decision(&store, &k, 1).await, Decision::TakeOver);
    assert_eq!(decision(&store, &k, 2).await, Decision::KeyReused);
    let (fresh, _) = claim(1, 5 * S, 2 * S);
    assert!(store.renew_expired(&k, &fresh).await.unwrap().is_none());
    assert_eq!(cleanup(&store).await, 0);

    advance(&store, &k, Duration::from_millis(1_100)).await;
    assert_eq!(decision(&store, &k, 2).await, Decision::Renew);
    let renewed = store.renew_expired(&k, &fresh).await.unwrap();
    assert_eq!(renewed.expect("gone at last").attempt, 1);
}

async fn a_heartbeat_moves_the_end_of_protection(store: Store) {
    let k = fresh_key("pay");
    let (c, owner) = claim(1, 3 * S, 2 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    advance(&store, &k, Duration::from_millis(2_500)).await;
    let beat = store.heartbeat(&k, owner.hash(), None).await.unwrap();
    let beat = beat.expect("a live owner's heartbeat");
    assert_eq!(
        beat.protected_until(),
        beat.lease_expires_at + TimeDelta::seconds(2)
    );
    // The lease ended 1 s ago; the first window ended long before.
    advance(&store, &k, 4 * S).await;
    assert_eq!(decision(&store, &k, 1).await, Decision::TakeOver);
    // And the owner, not yet taken over, may still complete.
    let done = Outcome::numbered(1);
    assert!(store
        .complete(&k, &done.by(&owner))
        .await
        .unwrap()
        .is_some());
    assert_eq!(decision(&store, &k, 1).await, Decision::Replay);
}

async fn a_quarantined_record_stays_a_window_after_its_lease(store: Store) {
    let k = fresh_key("pay");
    let (c, owner) = claim(1, 5 * S, 2 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    let q = store
        .quarantine(&k, owner.hash(), "provider timed out")
        .await;
    assert_eq!(q.unwrap().unwrap().state, RecordState::Quarantined);
    advance(&store, &k, 6 * S).await;
    assert_eq!(decision(&store, &k, 1).await, Decision::Quarantined);
    assert_eq!(cleanup(&store).await, 0);
    advance(&store, &k, Duration::from_millis(1_100)).await;
    assert_eq!(decision(&store, &k, 1).await, Decision::Renew);
}

async fn a_resolve_with_an_outcome_keeps_a_whole_window(store: Store) {
    let k = fresh_key("pay");
    let (c, owner) = claim(1, 50 * S, 20 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    store.quarantine(&k, owner.hash(), "unsure").await.unwrap();
    advance(&store, &k, 60 * S).await;
    let admin = Resolver {
        owner: None,
        actor: "admin:test".into(),
    };
    let done = Outcome::numbered(1);
    let resolved = store.resolve_complete(&k, &admin, &done.by(&owner)).await;
    let resolved = resolved.unwrap().expect("a quarantined key resolves");
    let completed_at = resolved.completed_at.unwrap();
    assert!(resolved.expires_at >= completed_at + TimeDelta::seconds(20));
    advance(&store, &k, 19 * S).await;
    assert_eq!(decision(&store, &k, 1).await, Decision::Replay);
}
