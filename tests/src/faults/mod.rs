//! Fault rounds: many clients following the protocol against several real
//! `idemkey` processes while one fault is injected at a time, then a check
//! that no effect happened twice (`tests/tests/fault_rounds.rs`).
//!
//! A round is: servers and a fake provider up ([`fleet`]), a policy with
//! short leases and a one-hour window, callers started over the load phase
//! ([`clients`], each key by one to three callers, some dying
//! between effect and completion), the fault injected until the load phase
//! ends and then healed, every caller finished, and the round judged
//! ([`checker`]) from the provider's ledger and the clients' [`journal`].
//! The faults' own tools are a TCP [`proxy`] for the database link and a
//! private Postgres [`cluster`].

pub mod checker;
pub mod clients;
pub mod cluster;
pub mod fleet;
pub mod journal;
pub mod proxy;

use std::sync::Arc;
use std::time::Duration;

use idemkey_api::auth::Role;
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::tokens::{fresh_tenant, token};
use checker::{Figures, Violation};
use clients::{http_client, run_caller, Workload};
use fleet::{Fleet, Provider};
use journal::Journal;

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

/// A round's callers at work.
pub struct Running {
    pub workload: Arc<Workload>,
    pub load_ends: Instant,
    callers: Vec<JoinHandle<()>>,
}

impl Running {
    /// Sets `policy` for a fresh tenant and starts the round's callers:
    /// `settings.operations` keys named `{name}-{n}`, each with one to three
    /// callers starting over the load phase: two within 300 ms of each
    /// other, a third 1.5 to 5 s later.
    pub async fn start(
        name: &str,
        fleet: &Fleet,
        provider: &Provider,
        settings: &Settings,
        policy: Value,
    ) -> Self {
        let tenant = fresh_tenant();
        put_policy(fleet, &token(&tenant, &[Role::Admin]), &policy).await;
        let load_ends = Instant::now() + settings.load;
        let workload = Arc::new(Workload {
            http: http_client(),
            addresses: fleet.addresses.clone(),
            token: token(&tenant, &[Role::Client, Role::Viewer]),
            provider: provider.url.clone(),
            operation: OPERATION.into(),
            lease_ms: LEASE_MS,
            margin: MARGIN,
            die_per_mille: settings.die_per_mille,
            stall_per_mille: 60,
            careless: settings.careless,
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
                let (w, key) = (workload.clone(), key.clone());
                caller += 1;
                callers.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(start)).await;
                    run_caller(w, key, caller).await
                }));
            }
        }
        Self {
            workload,
            load_ends,
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
        let (mut figures, violations) = checker::judge(&self.workload, provider, &entries).await;
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
