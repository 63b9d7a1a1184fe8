//! The closed-loop load generator: N virtual clients, each on its own
//! keep-alive connection, each sending its next request as soon as the last
//! one answered. A warm-up runs unrecorded; the measured window records every
//! operation that *started* inside it. The server's CPU time and the
//! machine's CPU use are sampled at the window's edges.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::hist;
use crate::procfs;

pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// What one operation came to: `Err` carries a short label counted in the
/// report (an unexpected status, a lost connection).
pub type OpResult = Result<(), String>;

#[derive(Debug, Clone, Copy)]
pub struct LoadSpec {
    pub warmup: Duration,
    pub measure: Duration,
}

pub struct LoadResult {
    pub ops: u64,
    pub errors: BTreeMap<String, u64>,
    pub latency: Histogram<u64>,
    pub window: Duration,
    /// CPU time the server used during the window.
    pub server_cpu: Option<Duration>,
    /// CPU time this load generator used during the window (it shares the
    /// machine with the server and Postgres).
    pub generator_cpu: Option<Duration>,
    /// CPU time of the Postgres backends serving the measurement's database.
    pub db_cpu: Option<Duration>,
    pub machine_busy: Option<f64>,
}

impl LoadResult {
    pub fn throughput(&self) -> f64 {
        self.ops as f64 / self.window.as_secs_f64()
    }

    pub fn cpu_us_per_op(&self) -> Option<f64> {
        per_op(self.server_cpu?, self.ops)
    }

    pub fn db_cpu_us_per_op(&self) -> Option<f64> {
        per_op(self.db_cpu?, self.ops)
    }
}

/// Microseconds of `cpu` per operation.
pub fn per_op(cpu: Duration, ops: u64) -> Option<f64> {
    (ops > 0).then(|| cpu.as_secs_f64() * 1e6 / ops as f64)
}

const WARMUP: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

struct Tally {
    ops: u64,
    errors: BTreeMap<String, u64>,
    latency: Histogram<u64>,
}

/// Runs one client per state in `states`; `op` takes the state and gives it
/// back with the operation's result. `server_pid` and the backends of
/// database `db` are sampled for CPU time.
pub async fn closed_loop<S, F>(
    spec: LoadSpec,
    server_pid: Option<u32>,
    db: Option<&str>,
    states: Vec<S>,
    op: F,
) -> LoadResult
where
    S: Send + 'static,
    F: Fn(S) -> BoxFuture<(S, OpResult)> + Send + Sync + 'static,
{
    let phase = Arc::new(AtomicU8::new(WARMUP));
    let op = Arc::new(op);
    let clients: Vec<_> = states
        .into_iter()
        .map(|mut state| {
            let phase = phase.clone();
            let op = op.clone();
            tokio::spawn(async move {
                let mut t = Tally {
                    ops: 0,
                    errors: BTreeMap::new(),
                    latency: hist::new_histogram(),
                };
                loop {
                    let at_start = phase.load(Ordering::Relaxed);
                    if at_start == STOP {
                        break;
                    }
                    let started = Instant::now();
                    let (next, result) = op(state).await;
                    state = next;
                    let failed = result.is_err();
                    if at_start == MEASURE {
                        match result {
                            Ok(()) => {
                                hist::record(&mut t.latency, started.elapsed());
                                t.ops += 1;
                            }
                            Err(label) => *t.errors.entry(label).or_default() += 1,
                        }
                    }
                    if failed {
                        // Never spin on a broken connection.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                t
            })
        })
        .collect();
    tokio::time::sleep(spec.warmup).await;
    let cpu0 = server_pid.and_then(|p| procfs::process_cpu(p).ok());
    let own0 = procfs::process_cpu(std::process::id()).ok();
    let db0 = db.map(procfs::backends_cpu);
    let machine0 = procfs::machine_cpu();
    let started = Instant::now();
    phase.store(MEASURE, Ordering::Relaxed);
    tokio::time::sleep(spec.measure).await;
    phase.store(STOP, Ordering::Relaxed);
    let window = started.elapsed();
    let cpu1 = server_pid.and_then(|p| procfs::process_cpu(p).ok());
    let own1 = procfs::process_cpu(std::process::id()).ok();
    let db1 = db.map(procfs::backends_cpu);
    let machine1 = procfs::machine_cpu();
    let mut total = Tally {
        ops: 0,
        errors: BTreeMap::new(),
        latency: hist::new_histogram(),
    };
    for client in clients {
        match client.await {
            Ok(t) => {
                total.ops += t.ops;
                for (k, v) in t.errors {
                    *total.errors.entry(k).or_default() += v;
                }
                let _ = total.latency.add(&t.latency);
            }
            Err(e) => {
                *total
                    .errors
                    .entry(format!("client panicked: {e}"))
                    .or_default() += 1
            }
        }
    }
    LoadResult {
        ops: total.ops,
        errors: total.errors,
        latency: total.latency,
        window,
        server_cpu: cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a)),
        generator_cpu: own0.zip(own1).map(|(a, b)| b.saturating_sub(a)),
        db_cpu: db0.zip(db1).map(|(a, b)| b.saturating_sub(a)),
        machine_busy: machine0
            .zip(machine1)
            .and_then(|(a, b)| a.busy_share_until(b)),
    }
}
