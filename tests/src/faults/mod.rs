//! Fault rounds: many clients following the protocol against several real
//! `idemkey` processes while one fault is injected at a time, then a check
//! that no effect happened twice (`tests/tests/fault_rounds.rs`).
//!
//! A round is: servers and a fake provider up ([`fleet`]), a class policy
//! (short leases; a one-hour window, or a two-second one in the `window`
//! round), callers started over the load phase ([`clients`], each key by
//! one to three callers, some dying between effect and completion, some
//! stalling, some releasing the key after a failure before the effect; in a
//! short window some working past it under heartbeats, [`window`]; in the
//! `release` round some keys contested around a release, [`contested`]),
//! the fault injected until the load phase ends and then healed, every
//! caller finished, and the round judged ([`checker`], [`epochs`]) from the
//! provider's ledger and the clients' [`journal`]. The faults' own tools
//! are a TCP [`proxy`] for the database link and a private Postgres
//! [`cluster`].

pub mod calls;
pub mod checker;
pub mod clients;
pub mod cluster;
pub mod contested;
pub mod epochs;
pub mod figures;
pub mod fleet;
pub mod journal;
pub mod proxy;
pub mod rounds;
pub mod window;

use std::sync::Arc;
use std::time::Duration;

use idemkey_api::auth::Role;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::tokens::{fresh_tenant, token};
use calls::http_client;
use checker::{Figures, Violation};
use clients::{run_caller, Workload};
use contested::{run_contested, Contest};
use fleet::{Fleet, Provider};
use journal::Journal;
use window::Windowed;

/// The operation class every round uses.
pub const OPERATION: &str = "charges.create";

/// How big the rounds are; the defaults keep the whole file near three
/// minutes in a debug build on two cores. Environment variables make a
/// longer soak: `IDEMKEY_FAULT_ROUNDS` (rounds, cycling through the
/// faults; default one each), `IDEMKEY_FAULT_OPS` (operations per round,
/// default 150), `IDEMKEY_FAULT_SECONDS` (load phase, default 10) and
/// `IDEMKEY_FAULT_ONLY` (comma-separated fault names to run).
#[derive(Debug, Clone)]
pub struct Settings {
    pub rounds: usize,
    pub operations: usize,
    pub load: Duration,
    pub only: Option<Vec<String>>,
    /// Chance, in thousandths, that an owner dies after its effect.
    pub die_per_mille: u32,
    /// Chance, in thousandths, that an owner releases the key after a
    /// transient failure before its effect.
    pub release_per_mille: u32,
    /// Clients that skip the provider lookup on `recovering`: only to
    /// show that the checker catches the duplicates that follow.
    pub careless: bool,
}

impl Settings {
    pub fn from_env(faults: usize) -> Self {
        let number = |name: &str, default: usize| {
            std::env::var(name).map_or(default, |v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{name}: expected a number, got {v:?}"))
            })
        };
        Self {
            rounds: number("IDEMKEY_FAULT_ROUNDS", faults),
            operations: number("IDEMKEY_FAULT_OPS", 150),
            load: Duration::from_secs(number("IDEMKEY_FAULT_SECONDS", 10) as u64),
            only: std::env::var("IDEMKEY_FAULT_ONLY")
                .ok()
                .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect()),
            die_per_mille: 150,
            release_per_mille: 100,
            careless: false,
        }
    }

    /// Whether the fault named `name` runs at all.
    pub fn runs(&self, name: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == name))
    }
}

/// The lease every claim asks for, and the lease an owner must still have
/// to start its effect.
pub const LEASE_MS: u64 = 2_000;
pub const MARGIN: Duration = Duration::from_millis(600);

/// How long callers keep trying after the load phase (a liveness bound: a
/// caller still trying then is reported).
const DRAIN: Duration = Duration::from_secs(45);

/// A round's class and the callers' ways, beyond the faults.
pub struct Shape {
    /// The class policy.
    pub policy: Value,
    /// Its replay window.
    pub window: Duration,
    /// The lease claims ask for.
    pub lease_ms: u64,
    /// A short window: owners that work past it under heartbeats, deaths
    /// recovered inside it, later callers timed inside it; and no final
    /// look, since every key is gone by the end.
    pub short_window: bool,
    /// Contested keys (`contested`), one per eight operations, whose
    /// retries go to a server with a slow database link.
    pub contested: Option<Contest>,
}

impl Default for Shape {
    /// Short leases (claims ask for 2 s) inside a one-hour window.
    fn default() -> Self {
        Self {
            policy: serde_json::json!({"replay_window": "1h", "lease": "2s"}),
            window: Duration::from_secs(3_600),
            lease_ms: LEASE_MS,
            short_window: false,
            contested: None,
        }
    }
}

/// A round's callers at work.
pub struct Running {
    pub workload: Arc<Workload>,
    pub load_ends: Instant,
    window: Duration,
    final_look: bool,
    callers: Vec<JoinHandle<()>>,
}

impl Running {
    /// Sets the shape's policy for a fresh tenant and starts the round's
    /// callers: `settings.operations` keys named `{name}-{n}`, each with one
    /// to three callers starting over the load phase: two within 300 ms of
    /// each other, a third 1.5 to 5 s later (in a short window, earlier if
    /// the key's protection is known to end sooner); and the contested keys
    /// `{name}-c{n}`, if any.
    pub async fn start(
        name: &str,
        fleet: &Fleet,
        provider: &Provider,
        settings: &Settings,
        shape: Shape,
    ) -> Self {
        let tenant = fresh_tenant();
        put_policy(fleet, &token(&tenant, &[Role::Admin]), &shape.policy).await;
        let load_ends = Instant::now() + settings.load;
        let workload = Arc::new(Workload {
            http: http_client(),
            addresses: fleet.addresses.clone(),
            token: token(&tenant, &[Role::Client, Role::Viewer]),
            provider: provider.url.clone(),
            operation: OPERATION.into(),
            lease_ms: shape.lease_ms,
            margin: MARGIN,
            die_per_mille: settings.die_per_mille,
            stall_per_mille: 60,
            release_per_mille: settings.release_per_mille,
            careless: settings.careless,
            // Two owners in five work past a short window.
            window: shape.short_window.then(|| Windowed::new(shape.window, 400)),
            journal: Arc::new(Journal::default()),
            give_up_at: load_ends + DRAIN,
        });
        let spread = settings.load.as_millis() as u64 * 7 / 10;
        let mut callers = Vec::new();
        let mut caller = 0;
        for n in 0..settings.operations {
            let key = format!("{name}-{n}");
            let first = rand::random_range(0..spread.max(1));
            for nth in 0..rand::random_range(1..=3) {
                // Two callers race for the key; a third comes back later,
                // when the outcome may have moved to the archive.
                let start = first
                    + match nth {
                        0 | 1 => rand::random_range(0..300),
                        _ => rand::random_range(1_500..5_000),
                    };
                let planned = Instant::now() + Duration::from_millis(start);
                let (w, key) = (workload.clone(), key.clone());
                caller += 1;
                callers.push(tokio::spawn(async move {
                    match w.window.as_ref().filter(|_| nth == 2) {
                        Some(window) => window.start_within(&key, planned).await,
                        None => tokio::time::sleep_until(planned).await,
                    }
                    run_caller(w, key, caller).await
                }));
            }
        }
        if let Some(contest) = shape.contested {
            for n in 0..settings.operations.div_ceil(8) {
                let start = Duration::from_millis(rand::random_range(0..spread.max(1)));
                let (w, key, contest) = (workload.clone(), format!("{name}-c{n}"), contest.clone());
                caller += 2;
                callers.push(tokio::spawn(async move {
                    tokio::time::sleep(start).await;
                    run_contested(w, key, caller - 1, contest).await
                }));
            }
        }
        Self {
            workload,
            load_ends,
            window: shape.window,
            final_look: !shape.short_window,
            callers,
        }
    }

    /// Waits for every caller (each stops by itself at the drain deadline).
    pub async fn finish(&mut self) {
        for caller in self.callers.drain(..) {
            caller.await.expect("a caller panicked");
        }
    }

    /// Judges the round and prints its figures.
    pub async fn judge(
        &self,
        name: &str,
        provider: &Provider,
        faults: u64,
        started: Instant,
    ) -> (Figures, Vec<Violation>) {
        let entries = self.workload.journal.snapshot();
        let (mut figures, violations) = checker::judge(
            &self.workload,
            provider,
            &entries,
            self.window,
            self.final_look,
        )
        .await;
        figures.faults = faults;
        println!(
            "fault round {name:<10} {figures} ({:.1} s)",
            started.elapsed().as_secs_f64()
        );
        (figures, violations)
    }
}

/// PUTs the class policy through the first server that answers.
async fn put_policy(fleet: &Fleet, admin: &str, policy: &Value) {
    let http = http_client();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let url = format!(
            "{}/v1/operation-classes/{OPERATION}",
            fleet.addresses.get(0)
        );
        let sent = http.put(url).bearer_auth(admin).json(policy).send().await;
        match sent {
            Ok(r) if r.status() == 200 => return,
            Ok(r) if r.status() != 503 => {
                panic!(
                    "policy refused: {} {}",
                    r.status(),
                    r.text().await.unwrap_or_default()
                )
            }
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "no server took the policy in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A random pause between `min` and `max`.
pub async fn pause(min: Duration, max: Duration) {
    let ms = rand::random_range(min.as_millis() as u64..=max.as_millis() as u64);
    tokio::time::sleep(Duration::from_millis(ms)).await;
}
