//! The store's half of tiering and cleanup, called directly on both
//! backends with made-up segments (no archive): what a batch routes, what
//! its guard refuses, what a dropped batch leaves, and when cleanup
//! condemns and forgets a segment. The end-to-end runs, with a real object
//! store and killed workers, are `tiering.rs` and `tiering_crashes.rs`.

use std::time::Duration;

use idemkey_api::domain::ScopedKey;
use idemkey_api::store::{Placement, SealedSegment, Store, TierBatch};
use idemkey_tests::db::Backend;
use idemkey_tests::stores::{advance, claim, cleanup, fresh_key, row, Outcome};

const HOUR: Duration = Duration::from_secs(3600);

idemkey_tests::on_both_stores!(
    a_batch_routes_each_packed_row_and_cleanup_forgets_its_segment_after_the_last_record,
    a_dropped_batch_keeps_every_outcome_and_its_pending_segment_is_condemned,
);

/// A completed key due for tiering at once, with outcome `n`.
async fn completed_due(store: &Store, n: u8) -> ScopedKey {
    let k = fresh_key("pay");
    let (mut c, owner) = claim(n, Duration::from_secs(30), HOUR);
    c.tier_after = Duration::ZERO;
    store.insert_claim(&k, &c).await.unwrap().expect("new key");
    let outcome = Outcome::numbered(n.into());
    store
        .complete(&k, &outcome.by(&owner))
        .await
        .unwrap()
        .expect("completed");
    k
}

/// Every candidate of `batch`, placed one after the other.
fn place_all(batch: &TierBatch) -> Vec<Placement> {
    (0..batch.candidates().len())
        .map(|index| Placement {
            index,
            offset: 100 * index as u64,
            len: 50,
            sha256: [index as u8; 32],
        })
        .collect()
}

fn segment(name: &str) -> SealedSegment<'_> {
    SealedSegment {
        name,
        len: 1_000,
        sha256: [9; 32],
    }
}

async fn due_batch(store: &Store) -> TierBatch {
    // `tier_at` is the completion's moment: let the clock pass it.
    tokio::time::sleep(Duration::from_millis(20)).await;
    store
        .begin_tiering(500)
        .await
        .unwrap()
        .expect("rows are due")
}

async fn a_batch_routes_each_packed_row_and_cleanup_forgets_its_segment_after_the_last_record(
    store: Store,
) {
    let k = completed_due(&store, 1).await;
    let mut batch = due_batch(&store).await;
    let placed = place_all(&batch);
    let i = batch
        .candidates()
        .iter()
        .position(|c| c.key == k)
        .expect("k is due");

    batch.reserve("seg-a").await.unwrap();
    let slimmed = batch.slim(segment("seg-a"), &placed).await.unwrap();
    batch.commit().await.unwrap();

    assert_eq!(slimmed, Some(1));
    let tiered = row(&store, &k).await;
    let routing = tiered.routing.expect("a routing entry");
    assert_eq!(routing.segment, "seg-a");
    assert_eq!(
        (routing.offset, routing.len, routing.sha256),
        (placed[i].offset, 50, placed[i].sha256)
    );
    assert!(tiered.outcome.is_none());
    assert!(tiered.history.contains("\"tiered\""), "{}", tiered.history);
    let lag = store.archive_lag().await.unwrap();
    assert_eq!(
        (lag.segments, lag.segment_records, lag.segment_bytes),
        (1, 1, 1_000)
    );
    assert!(lag.tiering_due_since.is_none());
    assert!(
        store.condemn_segments(10).await.unwrap().is_empty(),
        "in use"
    );

    advance(&store, &k, 2 * HOUR).await;
    assert_eq!(cleanup(&store).await, 1);
    assert_eq!(store.condemn_segments(10).await.unwrap(), ["seg-a"]);
    assert!(store.forget_segment("seg-a").await.unwrap());
    assert_eq!(store.archive_lag().await.unwrap().segments, 0);
}

/// SQLite only: on Postgres the batch holds its rows (`for update`), so a
/// rewrite waits for the batch to end and the guard is never the one that
/// refuses.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slimming_routes_only_rows_that_still_hold_the_packed_outcome() {
    let store = idemkey_tests::stores::fresh(Backend::Sqlite).await;
    let kept = completed_due(&store, 1).await;
    let rewritten = completed_due(&store, 2).await;
    let mut batch = due_batch(&store).await;
    let placed = place_all(&batch);
    batch.reserve("seg-b").await.unwrap();
    // Meanwhile `rewritten` leaves its window and is claimed anew: the
    // packed outcome is no longer its own.
    advance(&store, &rewritten, 2 * HOUR).await;
    let (renewal, _) = claim(3, Duration::from_secs(30), HOUR);
    store
        .renew_expired(&rewritten, &renewal)
        .await
        .unwrap()
        .expect("renewed");

    let slimmed = batch.slim(segment("seg-b"), &placed).await.unwrap();
    batch.commit().await.unwrap();

    assert_eq!(slimmed, Some(1));
    assert!(row(&store, &kept).await.routing.is_some());
    let renewed = row(&store, &rewritten).await;
    assert!(renewed.routing.is_none());
    assert_eq!(renewed.attempt, 1);
}

async fn a_dropped_batch_keeps_every_outcome_and_its_pending_segment_is_condemned(store: Store) {
    let k = completed_due(&store, 1).await;
    let mut batch = due_batch(&store).await;
    let placed = place_all(&batch);
    batch.reserve("seg-c").await.unwrap();
    batch.slim(segment("seg-c"), &placed).await.unwrap();

    drop(batch);

    let kept = row(&store, &k).await;
    assert!(kept.routing.is_none());
    assert_eq!(
        kept.outcome.as_deref(),
        Some(Outcome::numbered(1).json.as_str())
    );
    // The writer's lock (Postgres) goes with its rolled-back transaction.
    let mut condemned = Vec::new();
    for _ in 0..50 {
        condemned = store.condemn_segments(10).await.unwrap();
        if !condemned.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(condemned, ["seg-c"]);
    assert!(store.forget_segment("seg-c").await.unwrap());
}
