//! The webhook queue's statements, called directly on both stores: finding
//! an event again queues nothing, concurrent takers never share a
//! delivery, and a result is recorded only by the attempt that took it.

use std::time::Duration;

use idemkey_api::domain::webhook::EventKind;
use idemkey_api::store::{AttemptResult, NewEndpoint, Store};
use idemkey_tests::stores::{claim, fresh_key};

const HOUR: Duration = Duration::from_secs(3600);

idemkey_tests::on_both_stores!(
    an_event_is_queued_once_however_often_it_is_found,
    concurrent_takers_never_share_a_delivery,
    only_the_attempt_that_took_a_delivery_records_its_result,
);

/// `n` keys of one class and tenant, quarantined by their owners, and an
/// endpoint of that class that wants quarantines.
async fn quarantined_keys(store: &Store, n: usize) -> String {
    let first = fresh_key("payouts.send");
    let id = format!("wh_{:020x}", rand::random::<u64>());
    let endpoint = NewEndpoint {
        id: &id,
        operation: &first.operation,
        url: "http://127.0.0.1:9/",
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        events: &[EventKind::Quarantined],
        stuck_after: None,
        spike: None,
    };
    assert!(store
        .insert_endpoint(&first.tenant, &endpoint, 10)
        .await
        .unwrap());
    for i in 0..n {
        let mut k = first.clone();
        k.key = idemkey_api::domain::IdempotencyKey::parse(&format!("k{i}")).unwrap();
        let (c, owner) = claim(1, Duration::from_secs(30), HOUR);
        store.insert_claim(&k, &c).await.unwrap().expect("new key");
        store
            .quarantine(&k, owner.hash(), "ambiguous")
            .await
            .unwrap()
            .expect("quarantined");
    }
    id
}

async fn an_event_is_queued_once_however_often_it_is_found(store: Store) {
    quarantined_keys(&store, 5).await;
    let passes: Vec<_> = (0..8)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.queue_events(100).await.unwrap() })
        })
        .collect();
    let mut queued = Vec::new();
    for pass in passes {
        queued.push(pass.await.unwrap());
    }
    println!("8 concurrent passes queued {queued:?}");
    assert_eq!(queued.iter().sum::<u64>(), 5);
    assert_eq!(store.queue_events(100).await.unwrap(), 0);
}

async fn concurrent_takers_never_share_a_delivery(store: Store) {
    quarantined_keys(&store, 30).await;
    store.queue_events(100).await.unwrap();
    let takers: Vec<_> = (0..6)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move { store.take_deliveries(Duration::from_secs(30), 7).await })
        })
        .collect();
    let mut takes = Vec::new();
    for taker in takers {
        takes.push(taker.await.unwrap().unwrap());
    }
    // What no taker got (a row another had just changed is skipped).
    takes.push(
        store
            .take_deliveries(Duration::from_secs(30), 100)
            .await
            .unwrap(),
    );
    let mut ids: Vec<i64> = Vec::new();
    let mut sizes = Vec::new();
    for taken in takes {
        sizes.push(taken.len());
        ids.extend(taken.iter().map(|d| d.id));
        assert!(taken.iter().all(|d| d.attempts == 1), "{taken:?}");
    }
    let all = ids.len();
    ids.sort();
    ids.dedup();
    println!(
        "6 takers of 7, then one of the rest, took {sizes:?}: {all} deliveries, {} distinct",
        ids.len()
    );
    assert_eq!((all, ids.len()), (30, 30));
    // Taken for 30 s: nothing is due until then.
    assert!(store
        .take_deliveries(Duration::from_secs(30), 100)
        .await
        .unwrap()
        .is_empty());
}

async fn only_the_attempt_that_took_a_delivery_records_its_result(store: Store) {
    quarantined_keys(&store, 1).await;
    store.queue_events(100).await.unwrap();
    // A lease that ends at once: the delivery is due again straight away.
    let first = store.take_deliveries(Duration::ZERO, 10).await.unwrap();
    let second = store.take_deliveries(Duration::ZERO, 10).await.unwrap();
    assert_eq!((first[0].attempts, second[0].attempts), (1, 2));
    let retry = AttemptResult {
        state: "pending",
        retry_in: Some(HOUR),
        status: Some(500),
        error: None,
    };
    assert!(
        !store.finish_delivery(&first[0], &retry).await.unwrap(),
        "stale attempt"
    );
    let done = AttemptResult {
        state: "delivered",
        retry_in: None,
        status: Some(200),
        error: None,
    };
    assert!(store.finish_delivery(&second[0], &done).await.unwrap());
    let shown = store
        .deliveries(&second[0].tenant, &second[0].endpoint_id, 10)
        .await
        .unwrap();
    assert_eq!(
        (
            shown[0].state.as_str(),
            shown[0].attempts,
            shown[0].last_status
        ),
        ("delivered", 2, Some(200))
    );
    assert!(shown[0].delivered_at.is_some());
    assert!(store
        .take_deliveries(Duration::ZERO, 10)
        .await
        .unwrap()
        .is_empty());
}
