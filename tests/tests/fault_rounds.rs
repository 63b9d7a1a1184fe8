//! Fault rounds: "no effect twice" on real processes while things break.
//!
//! Each round runs several `idemkey` servers on one database, a fake
//! provider that never deduplicates, and many concurrent clients following
//! the recipe (tests/src/faults/clients.rs); one fault is injected again
//! and again during the load phase, then healed, and the checker
//! (tests/src/faults/checker.rs) judges every key: one charge per effect id,
//! at most one `claimed`, the replay equal to what the effect's completer
//! stored, nothing acknowledged lost. The rounds:
//!
//! - `kill`: a server process killed with SIGKILL at random moments, then
//!   started again (three servers);
//! - `postgres`: a private Postgres cluster crashed (`immediate`) or shut
//!   down (`fast`), then started again;
//! - `redis`: the Redis cache flushed, or killed and started again empty;
//! - `s3`: a private Garage (the archive) killed and started again while
//!   the tiering worker moves outcomes to it every 200 ms;
//! - `link`: one server's link to Postgres (through a TCP proxy) slowed
//!   down, then cut: every live connection dropped, new ones refused;
//! - `window`: a class whose replay window is two seconds: owners working
//!   past it under heartbeats, deaths recovered after the first window
//!   ended, while servers are killed;
//! - `release`: retries through a server whose database link is delayed by
//!   600 ms each way, racing owners that release the key and claim it again
//!   for a corrected request.
//!
//! In every round some owners meet a transient failure before the effect
//! and release the key, then claim it again; `claimed` may then be answered
//! again, and only then.
//!
//! The rounds themselves are in tests/src/faults/rounds.rs. Run with
//! `-- --nocapture` to see the figures. `IDEMKEY_FAULT_ROUNDS`,
//! `IDEMKEY_FAULT_OPS`, `IDEMKEY_FAULT_SECONDS` and `IDEMKEY_FAULT_ONLY`
//! size a longer soak (tests/src/faults/mod.rs).

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use idemkey_tests::db::fresh_database;
use idemkey_tests::faults::checker::Figures;
use idemkey_tests::faults::epochs;
use idemkey_tests::faults::fleet::{Fleet, Provider};
use idemkey_tests::faults::journal::{Call, Entry};
use idemkey_tests::faults::rounds::{self, node_vars, FAULTS};
use idemkey_tests::faults::{Running, Settings, Shape};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_effect_happens_twice_whatever_fails() {
    let all = Settings::from_env(FAULTS.len());
    let faults: Vec<&str> = FAULTS.into_iter().filter(|f| all.runs(f)).collect();
    assert!(
        !faults.is_empty(),
        "IDEMKEY_FAULT_ONLY names no fault of {FAULTS:?}"
    );
    let settings = Settings {
        rounds: std::env::var("IDEMKEY_FAULT_ROUNDS").map_or(faults.len(), |_| all.rounds),
        ..all
    };
    let started = Instant::now();
    let mut total = Figures::default();
    let mut violations = Vec::new();
    for round in 0..settings.rounds {
        let fault = faults[round % faults.len()];
        let (figures, found) = rounds::run(fault, &settings).await;
        total += figures;
        for v in found {
            println!("VIOLATION in the {fault} round: {v}");
            violations.push(format!("[{fault}] {v}"));
        }
    }
    println!(
        "fault rounds, total: {total} ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    assert!(
        violations.is_empty(),
        "{} violations:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

/// The checker itself: clients that skip the provider lookup on
/// `recovering` charge again after every death, and the round must say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_catches_clients_that_recover_without_looking() {
    // Arrange: one server, no fault, half of the owners dying after the charge.
    let settings = Settings {
        operations: 20,
        load: Duration::from_secs(3),
        die_per_mille: 500,
        careless: true,
        ..Settings::from_env(1)
    };
    let db = fresh_database().await;
    let fleet = Fleet::start(vec![node_vars(&db)]).await;
    let provider = Provider::start().await;

    // Act
    let started = Instant::now();
    let shape = Shape::default();
    let mut running = Running::start("careless", &fleet, &provider, &settings, shape).await;
    running.finish().await;
    let (figures, violations) = running.judge("careless", &provider, 0, started).await;

    // Assert: every death was followed by a second charge, and reported.
    println!(
        "the careless clients' round: {} violations found, as it should",
        violations.len()
    );
    assert!(figures.deaths > 0, "some owners died: {figures}");
    assert!(figures.charges > figures.operations, "{figures}");
    assert!(
        violations
            .iter()
            .any(|v| v.what.contains("charged its effect id 2 times")),
        "the checker reports the duplicate charges"
    );
}

/// The rule for a second `claimed`, on made-up stories: after a release
/// it is allowed; while the key is protected — a window after its first
/// claim, after its outcome was stored, after its last lease — it is a
/// violation; after that it is not judged.
#[test]
fn a_second_claimed_is_judged_by_releases_and_windows() {
    let t0: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().expect("a time");
    let at = |ms: i64| t0 + TimeDelta::milliseconds(ms);
    let entry = |call, status: u16, word: &str| {
        let mut e = Entry::new(call, 1);
        (e.status, e.word) = (status, word.into());
        e
    };
    let claimed = |ms: i64| {
        let mut e = entry(Call::Claim, 201, "claimed");
        (e.granted_at, e.lease_end) = (Some(at(ms)), Some(at(ms + 1_500)));
        e
    };
    let released = |owner: i64| {
        let mut e = entry(Call::Release, 200, "released");
        e.owner_since = Some(at(owner));
        e
    };
    let completed = |ms: i64| {
        let mut e = entry(Call::Complete, 200, "completed");
        e.completed_at = Some(at(ms));
        e
    };
    let heartbeat = |ms: i64| {
        let mut e = entry(Call::Heartbeat, 200, "in_progress");
        (e.granted_at, e.lease_end) = (Some(at(ms)), Some(at(ms + 1_500)));
        e
    };
    let window = Duration::from_secs(2);
    let judged = |story: &[Entry]| {
        let r = epochs::judge(story, window);
        (r.problems.len(), r.reclaimed, r.unjudged)
    };

    assert_eq!(judged(&[claimed(0), released(0), claimed(100)]), (0, 1, 0));
    assert_eq!(judged(&[claimed(0), claimed(1_900)]), (1, 0, 0));
    // An outcome stored at 2.5 s is protected until 4.5 s.
    assert_eq!(
        judged(&[claimed(0), completed(2_500), claimed(4_400)]),
        (1, 0, 0)
    );
    assert_eq!(
        judged(&[claimed(0), completed(2_500), claimed(4_600)]),
        (0, 0, 1)
    );
    // A last lease that ended at 3 s protects until 5 s.
    assert_eq!(
        judged(&[claimed(0), heartbeat(1_500), claimed(4_900)]),
        (1, 0, 0)
    );
    assert_eq!(
        judged(&[claimed(0), heartbeat(1_500), claimed(5_100)]),
        (0, 0, 1)
    );
}
