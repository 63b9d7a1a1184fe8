//! Model-based tests of the store and the claim decision: random
//! interleavings of claims (split into their look and their
//! compare-and-swap, so a stale look can act late), completions, releases,
//! heartbeats, steps, quarantines, resolves, cleanup and clock advances from
//! three clients, checked after every step against a small reference model
//! of the protocol's states. On both backends.
//!
//! Time: the model's clock moves in whole 10 s steps (the store's, by moving
//! the key's stored times back), while leases (22.5 s) and the window
//! (65 s) end on quarter steps, so no boundary is ever within 2.5 s of a
//! moment the model looks at — the real time a case takes cannot tip one.
//!
//! A failure shrinks to a minimal history, printed with the mismatch.
//! `IDEMKEY_PROPTEST_CASES` sets the number of cases (a soak); the default
//! keeps the test command quick.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use idemkey_api::domain::policy::LeaseExpiry;
use idemkey_tests::db::Backend;
use idemkey_tests::store_model::{run_case, Figures, Op};
use idemkey_tests::stores;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// What an owner does after its claim: store an outcome, give the key back,
/// keep its lease, record a step, or declare the outcome ambiguous.
fn owner_call(client: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Complete { client }),
        3 => Just(Op::Release { client }),
        2 => Just(Op::Heartbeat { client }),
        2 => (0..3u8).prop_map(move |step| Op::Step { client, step }),
        1 => Just(Op::Quarantine { client }),
    ]
}

/// One client's program: claims (each a look and, some time later, its
/// act), each followed by a few owner calls.
fn client_program(client: usize) -> impl Strategy<Value = Vec<Op>> {
    // Mostly the same request, so looks find their own key, not reuse.
    let request = prop_oneof![3 => Just(1u8), 1 => Just(2u8)];
    let session = (request, proptest::collection::vec(owner_call(client), 0..3)).prop_map(
        move |(request, calls)| {
            let mut ops = vec![Op::Look { client, request }, Op::Act { client }];
            ops.extend(calls);
            ops
        },
    );
    proptest::collection::vec(session, 1..4).prop_map(|s| s.concat())
}

/// What no client does: the clock, cleanup and an admin's resolves.
fn world() -> impl Strategy<Value = Vec<Op>> {
    let event = prop_oneof![
        6 => (1..5u8).prop_map(|tens| Op::Advance { tens }),
        1 => Just(Op::Cleanup),
        1 => any::<bool>().prop_map(|complete| Op::Resolve { complete }),
    ];
    proptest::collection::vec(event, 1..10)
}

/// Three client programs and the world, interleaved by a random schedule:
/// each schedule entry picks which of the streams still running moves next.
fn history() -> impl Strategy<Value = Vec<Op>> {
    let streams = (
        client_program(0),
        client_program(1),
        client_program(2),
        world(),
    );
    let schedule = proptest::collection::vec(any::<u8>(), 0..60);
    (streams, schedule).prop_map(|((a, b, c, w), schedule)| {
        let mut streams: Vec<std::collections::VecDeque<Op>> =
            vec![a.into(), b.into(), c.into(), w.into()];
        let mut merged = Vec::new();
        let mut picks = schedule.into_iter();
        loop {
            streams.retain(|s| !s.is_empty());
            if streams.is_empty() {
                return merged;
            }
            let pick = usize::from(picks.next().unwrap_or(0)) % streams.len();
            merged.extend(streams[pick].pop_front());
        }
    })
}

/// Whether the class quarantines on lease expiry (a quarter of the cases),
/// and the history.
fn case() -> impl Strategy<Value = (bool, Vec<Op>)> {
    (proptest::bool::weighted(0.25), history())
}

fn cases() -> u32 {
    std::env::var("IDEMKEY_PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(128)
}

fn explore(backend: Backend) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(stores::fresh(backend));
    let figures = Arc::new(Figures::default());
    let ran = AtomicU64::new(0);
    let started = Instant::now();
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |(quarantine, ops)| {
        ran.fetch_add(1, Ordering::Relaxed);
        let on_expiry = match quarantine {
            true => LeaseExpiry::Quarantine,
            false => LeaseExpiry::Takeover,
        };
        rt.block_on(run_case(&store, on_expiry, &ops, &figures))
            .map_err(TestCaseError::fail)
    });
    println!(
        "store model on {backend:?}: {} cases run ({} asked), {} in {:.1?}",
        ran.load(Ordering::Relaxed),
        cases(),
        figures,
        started.elapsed()
    );
    if let Err(e) = result {
        panic!("the store departed from the model on {backend:?}: {e}");
    }
}

#[test]
fn the_postgres_store_follows_the_model() {
    explore(Backend::Postgres);
}

#[test]
fn the_sqlite_store_follows_the_model() {
    explore(Backend::Sqlite);
}

/// The history behind a takeover guarded by the attempt number alone: a look
/// that stalls across a release and a fresh claim must not act on the fresh
/// record. Always run, whatever the random cases find.
fn stale_takeover_history() -> Vec<Op> {
    vec![
        Op::Look {
            client: 0,
            request: 1,
        },
        Op::Act { client: 0 },
        Op::Advance { tens: 3 },
        Op::Look {
            client: 1,
            request: 1,
        },
        Op::Release { client: 0 },
        Op::Look {
            client: 0,
            request: 2,
        },
        Op::Act { client: 0 },
        Op::Advance { tens: 3 },
        Op::Act { client: 1 },
    ]
}

fn replay_history(backend: Backend, ops: &[Op]) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(stores::fresh(backend));
    let figures = Figures::default();
    if let Err(e) = rt.block_on(run_case(&store, LeaseExpiry::Takeover, ops, &figures)) {
        panic!("on {backend:?}: {e}");
    }
}

#[test]
fn a_stale_look_cannot_take_over_a_fresh_record() {
    for backend in [Backend::Postgres, Backend::Sqlite] {
        replay_history(backend, &stale_takeover_history());
    }
}
