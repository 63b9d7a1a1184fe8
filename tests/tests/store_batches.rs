//! Claims and completions gathered into batches (one statement and one
//! commit for many calls) still decide each call on its own row: the
//! primary key a claim, the owner-token guard a completion.
//!
//! The first case explores: rounds of hundreds of concurrent calls over a
//! few tenants and keys, duplicates and wrong owners among them, on both
//! backends; it prints how many batches formed and how large they were,
//! and fails if none carried more than one call. The second holds the
//! batched completion (a function in the database) to the single
//! statement: twin records in the same situations, one completed each way,
//! must end up alike. The third puts one key twice in a batch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use idemkey_api::domain::{OwnerToken, RecordState, ScopedKey};
use idemkey_api::store::{postgres_sql, KeyRecord, Store};
use idemkey_tests::stores::{advance, claim, fresh_key, row, Outcome};
use rand::seq::SliceRandom;
use rand::Rng;

const S: Duration = Duration::from_secs(1);

idemkey_tests::on_both_stores!(concurrent_calls_in_batches_each_learn_their_own_fate);

/// What one task did and was told.
enum Told {
    Lost,
    Won {
        key: usize,
        token: OwnerToken,
        completed: Option<Box<KeyRecord>>,
        wrong_owner: Option<Box<KeyRecord>>,
    },
}

async fn concurrent_calls_in_batches_each_learn_their_own_fate(store: Store) {
    let rounds: usize = std::env::var("IDEMKEY_BATCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let (mut calls, mut keys_won) = (0, 0);
    for round in 0..rounds {
        // A few tenants, so batches are split by tenant; fewer keys than
        // tasks, so claims of one key collide, inside a batch and across.
        let tenants = 1 + round % 3;
        let tenant_of: Vec<_> = (0..tenants).map(|_| fresh_key("x").tenant).collect();
        let keys: Arc<Vec<ScopedKey>> = Arc::new(
            (0..60)
                .map(|i| ScopedKey {
                    tenant: tenant_of[i % tenants].clone(),
                    ..fresh_key("charges.create")
                })
                .collect(),
        );
        let tasks: Vec<_> = (0..240)
            .map(|_| {
                let (store, keys) = (store.clone(), keys.clone());
                tokio::spawn(async move {
                    let key = rand::rng().random_range(0..keys.len());
                    let k = &keys[key];
                    let (c, token) = claim(1, 30 * S, 60 * S);
                    let won = store.insert_claim(k, &c).await.expect("a claim answers");
                    let Some(won) = won else { return Told::Lost };
                    assert_eq!(
                        won.owner_token_hash,
                        token.hash(),
                        "a winner is told its own row"
                    );
                    // Half the winners first try to complete with a token
                    // that is not theirs, racing the other tasks' batches.
                    let wrong_owner = if rand::random::<bool>() {
                        let done = Outcome::numbered(0);
                        store
                            .complete(k, &done.by(&OwnerToken::generate()))
                            .await
                            .expect("a completion answers")
                    } else {
                        None
                    };
                    let done = Outcome::numbered(u32::try_from(key).unwrap());
                    let completed = store
                        .complete(k, &done.by(&token))
                        .await
                        .expect("a completion answers");
                    Told::Won {
                        key,
                        token,
                        completed: completed.map(Box::new),
                        wrong_owner: wrong_owner.map(Box::new),
                    }
                })
            })
            .collect();
        let mut winners: HashMap<usize, OwnerToken> = HashMap::new();
        for task in tasks {
            calls += 1;
            match task.await.expect("no task panics") {
                Told::Lost => {}
                Told::Won {
                    key,
                    token,
                    completed,
                    wrong_owner,
                } => {
                    assert!(
                        wrong_owner.is_none(),
                        "a wrong owner's completion changed a record"
                    );
                    let completed = completed.expect("the owner's completion matches its own row");
                    assert_eq!(completed.state, RecordState::Completed);
                    assert_eq!(completed.owner_token_hash, token.hash());
                    assert_eq!(
                        completed.outcome.as_deref(),
                        Some(Outcome::numbered(key as u32).json.as_str())
                    );
                    assert!(
                        winners.insert(key, token).is_none(),
                        "two claims won key {key}"
                    );
                }
            }
        }
        for (key, token) in &winners {
            let now = row(&store, &keys[*key]).await;
            assert_eq!((now.state, now.attempt), (RecordState::Completed, 1));
            assert_eq!(now.owner_token_hash, token.hash());
        }
        let claimed = keys.len() - untouched(&store, &keys).await;
        assert_eq!(
            winners.len(),
            claimed,
            "every claimed key has exactly one winner"
        );
        keys_won += winners.len();
    }
    println!(
        "{}: {rounds} rounds, {calls} claiming tasks, {keys_won} keys won",
        store.backend_name()
    );
    for (kind, sizes) in store.batch_sizes() {
        println!(
            "  {kind}: {} batches, {} calls (mean {:.1}, largest {})",
            sizes.batches,
            sizes.items,
            sizes.items as f64 / sizes.batches.max(1) as f64,
            sizes.largest
        );
        assert!(sizes.largest > 1, "no {kind} were batched: {sizes:?}");
    }
}

/// How many of `keys` have no record.
async fn untouched(store: &Store, keys: &[ScopedKey]) -> usize {
    let mut n = 0;
    for k in keys {
        n += usize::from(store.find(k).await.expect("the store answers").is_none());
    }
    n
}

/// The situations a completion meets, each set up on a fresh key.
#[derive(Debug, Clone, Copy)]
enum Situation {
    Owner,
    OwnerAfterLease,
    WrongOwner,
    Completed,
    Quarantined,
    PastWindow,
}

const SITUATIONS: [Situation; 6] = [
    Situation::Owner,
    Situation::OwnerAfterLease,
    Situation::WrongOwner,
    Situation::Completed,
    Situation::Quarantined,
    Situation::PastWindow,
];

/// A key in `s`, and the token its completion is made with.
async fn set_up(store: &Store, s: Situation) -> (ScopedKey, OwnerToken) {
    let k = fresh_key("charges.create");
    let (c, owner) = claim(1, 5 * S, 10 * S);
    store.insert_claim(&k, &c).await.unwrap().unwrap();
    match s {
        Situation::Owner => {}
        Situation::OwnerAfterLease => advance(store, &k, 6 * S).await,
        Situation::WrongOwner => return (k, OwnerToken::generate()),
        Situation::Completed => {
            store
                .complete(&k, &Outcome::numbered(9).by(&owner))
                .await
                .unwrap()
                .unwrap();
        }
        Situation::Quarantined => {
            store
                .quarantine(&k, owner.hash(), "ambiguous")
                .await
                .unwrap()
                .unwrap();
        }
        Situation::PastWindow => advance(store, &k, 30 * S).await,
    }
    (k, owner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batched_completion_leaves_the_record_a_single_one_would() {
    let store = idemkey_tests::stores::fresh(idemkey_tests::db::Backend::Postgres).await;
    let Store::Postgres(pg) = &store else {
        unreachable!()
    };
    let done = Outcome::numbered(1);
    let mut compared = 0;
    for _ in 0..4 {
        let mut situations = SITUATIONS.to_vec();
        situations.shuffle(&mut rand::rng());
        // Singly: the single completion's statement (the store sends even
        // a lone completion through the batch function).
        let mut single = Vec::new();
        for s in &situations {
            let (k, token) = set_up(&store, *s).await;
            let told = sqlx::query(postgres_sql::COMPLETE)
                .bind(k.tenant.as_str())
                .bind(k.operation.as_str())
                .bind(k.key.as_str())
                .bind(token.hash().0.to_vec())
                .bind(&done.json)
                .bind(done.hash.to_vec())
                .fetch_optional(pg.pool())
                .await
                .expect("the single completion runs");
            single.push((told, store.find(&k).await.unwrap()));
        }
        // The twins, in one call of the batch function, in random order.
        let mut twins = Vec::new();
        for s in &situations {
            twins.push(set_up(&store, *s).await);
        }
        let rows = sqlx::query(postgres_sql::COMPLETE_BATCH)
            .bind(
                twins
                    .iter()
                    .map(|(k, _)| k.tenant.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                twins
                    .iter()
                    .map(|(k, _)| k.operation.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                twins
                    .iter()
                    .map(|(k, _)| k.key.as_str().to_owned())
                    .collect::<Vec<_>>(),
            )
            .bind(
                twins
                    .iter()
                    .map(|(_, t)| t.hash().0.to_vec())
                    .collect::<Vec<_>>(),
            )
            .bind(twins.iter().map(|_| done.json.clone()).collect::<Vec<_>>())
            .bind(twins.iter().map(|_| done.hash.to_vec()).collect::<Vec<_>>())
            .fetch_all(pg.pool())
            .await
            .expect("the batch function runs");
        let matched: Vec<i32> = rows.iter().map(|r| sqlx::Row::get(r, "i")).collect();
        for (n, (s, (told, after))) in situations.iter().zip(single).enumerate() {
            let (k, _) = &twins[n];
            let twin_told = matched.contains(&(n as i32 + 1));
            assert_eq!(told.is_some(), twin_told, "{s:?}: matched differently");
            let twin_after = store.find(k).await.unwrap();
            assert_eq!(
                after.as_ref().map(shape),
                twin_after.as_ref().map(shape),
                "{s:?}: the records differ"
            );
            compared += 1;
        }
    }
    println!("{compared} completions compared, single against batched, in 6 situations");
}

/// A key twice in one batch (an owner's retry racing its first call, and a
/// stale owner before the true one): the row is completed once, by the
/// first element whose guard matches, and the other learns that nothing
/// matched, as it would have a moment later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_twice_in_one_batch_is_completed_once() {
    let store = idemkey_tests::stores::fresh(idemkey_tests::db::Backend::Postgres).await;
    let Store::Postgres(pg) = &store else {
        unreachable!()
    };
    let (first, second) = (Outcome::numbered(1), Outcome::numbered(2));
    for stale_first in [false, true] {
        let k = fresh_key("charges.create");
        let (c, owner) = claim(1, 5 * S, 10 * S);
        store.insert_claim(&k, &c).await.unwrap().unwrap();
        let stale = OwnerToken::generate();
        let (a, b) = if stale_first {
            (stale.hash(), owner.hash())
        } else {
            (owner.hash(), owner.hash())
        };
        let twice = |v: &str| vec![v.to_owned(), v.to_owned()];
        let rows = sqlx::query(postgres_sql::COMPLETE_BATCH)
            .bind(twice(k.tenant.as_str()))
            .bind(twice(k.operation.as_str()))
            .bind(twice(k.key.as_str()))
            .bind(vec![a.0.to_vec(), b.0.to_vec()])
            .bind(vec![first.json.clone(), second.json.clone()])
            .bind(vec![first.hash.to_vec(), second.hash.to_vec()])
            .fetch_all(pg.pool())
            .await
            .expect("the batch function runs");
        let matched: Vec<i32> = rows.iter().map(|r| sqlx::Row::get(r, "i")).collect();
        let after = store.find(&k).await.unwrap().expect("the record");
        println!("stale first: {stale_first}, elements matched: {matched:?}");
        assert_eq!(matched.len(), 1, "one element completes the row");
        assert_eq!(after.state, RecordState::Completed);
        let history: Vec<serde_json::Value> = serde_json::from_str(&after.history).unwrap();
        let completions = history.iter().filter(|e| e["event"] == "completed").count();
        assert_eq!(completions, 1, "one completion in the history: {history:?}");
        // Elements run in order: the first whose guard matches completes.
        let (winner, stored) = if stale_first {
            (2, &second)
        } else {
            (1, &first)
        };
        assert_eq!(matched, [winner], "the first matching element completes");
        assert_eq!(after.outcome.as_deref(), Some(stored.json.as_str()));
    }
}

/// What a completion decides about a record, without its times and key:
/// its state, attempt, outcome and its hash, whether its window
/// runs a whole window past its completion, and its events without times.
type Shape = (
    RecordState,
    i32,
    Option<String>,
    Option<[u8; 32]>,
    bool,
    Vec<String>,
);

fn shape(r: &KeyRecord) -> Shape {
    let events: Vec<serde_json::Value> = serde_json::from_str(&r.history).expect("history JSON");
    let events = events
        .into_iter()
        .map(|mut e| {
            e.as_object_mut().expect("an event").remove("at");
            e.to_string()
        })
        .collect();
    let window_from_completion = r.completed_at.is_some_and(|at| {
        r.expires_at - at >= chrono::Duration::from_std(r.replay_window).unwrap()
    });
    (
        r.state,
        r.attempt,
        r.outcome.clone(),
        r.outcome_hash,
        window_from_completion,
        events,
    )
}
