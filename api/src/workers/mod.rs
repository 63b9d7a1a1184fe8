//! The background workers, started, stopped and measured one way.
//!
//! Each worker is a *pass* run on a timer by [`Workers`]:
//!
//! | worker | runs | pass |
//! |---|---|---|
//! | `lease_watch` | with `IDEMKEY_WORKERS=on`, every `IDEMKEY_WORKER_INTERVAL` | count stuck keys, quarantine expired leases of quarantine classes ([`lease_watch`]) |
//! | `archive` | the same | tier what is due, then clean up what expired ([`tiering`]) |
//! | `webhooks` | the same | queue lifecycle events, send the deliveries that are due, retry or fail them ([`webhooks`]) |
//! | `usage_flush` | on every node, every [`FLUSH_EVERY`] | add this node's usage counts to the database, prune old rows |
//! | `quota` | on every node, every `IDEMKEY_WORKER_INTERVAL` | when any quota is configured: measure every tenant's storage (nodes with `IDEMKEY_WORKERS=on`), then refresh this node's list of tenants refused new keys ([`Engine::quota_pass`]) |
//!
//! Every pass is safe on every node at once and safe to interrupt at any
//! point (a stop is no different from a crash). A pass that fails is
//! logged and the next one retries; every pass is counted by result in
//! `idemkey_worker_passes_total` and timed in `idemkey_worker_pass_seconds`.

pub mod lease_watch;
pub mod tiering;
pub mod webhooks;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::config::Config;
use crate::engine::Engine;
use crate::metrics::Metrics;
use crate::usage::{Usage, FLUSH_EVERY, PRUNE_EVERY};

/// This node's running workers.
pub struct Workers {
    tasks: Vec<JoinHandle<()>>,
    usage: Usage,
}

impl Workers {
    /// Starts this node's workers: the usage flusher always (the counts it
    /// flushes are this node's alone), the lease watch and the archive
    /// worker when the configuration says so.
    pub fn start(engine: &Engine, usage: &Usage, config: &Config) -> Self {
        let metrics = &engine.metrics;
        let flushed = usage.clone();
        let mut flushes = 0u32;
        let mut tasks = vec![every(
            ("usage_flush", "usage flush"),
            FLUSH_EVERY,
            metrics,
            move || {
                let usage = flushed.clone();
                flushes = flushes.wrapping_add(1);
                let prune = flushes.is_multiple_of(PRUNE_EVERY);
                async move {
                    usage.flush().await?;
                    if prune {
                        usage.prune().await?;
                    }
                    Ok(())
                }
            },
        )];
        let measured = engine.clone();
        let measure = config.workers;
        tasks.push(every(
            ("quota", "quota pass"),
            config.worker_interval,
            metrics,
            move || {
                let engine = measured.clone();
                async move { engine.quota_pass(measure).await }
            },
        ));
        if config.workers {
            let interval = config.worker_interval;
            let watched = engine.clone();
            tasks.push(every(
                ("lease_watch", "lease watch"),
                interval,
                metrics,
                move || {
                    let engine = watched.clone();
                    async move { lease_watch::watch_once(&engine).await }
                },
            ));
            let archived = engine.clone();
            let failpoint = Arc::new(tiering::Failpoint::new(config.failpoint.clone()));
            tasks.push(every(
                ("archive", "archive worker"),
                interval,
                metrics,
                move || {
                    let (engine, failpoint) = (archived.clone(), failpoint.clone());
                    async move {
                        let pass = tiering::run_once(&engine, &failpoint).await?;
                        if pass != tiering::Pass::default() {
                            tracing::info!(?pass, "archive worker");
                        }
                        Ok(())
                    }
                },
            ));
            match webhooks::Sender::new(config.webhook_retries) {
                Ok(sender) => {
                    let delivering = engine.clone();
                    tasks.push(every(
                        ("webhooks", "webhook worker"),
                        interval,
                        metrics,
                        move || {
                            let (engine, sender) = (delivering.clone(), sender.clone());
                            async move {
                                let pass = webhooks::run_once(&engine, &sender).await?;
                                if pass != webhooks::Pass::default() {
                                    tracing::debug!(?pass, "webhook worker");
                                }
                                Ok(())
                            }
                        },
                    ));
                }
                Err(e) => tracing::error!(error = %e, "webhooks cannot be sent: no HTTP client"),
            }
            tracing::info!(every = ?interval, "workers running: lease watch, tiering and cleanup, webhooks");
        }
        Self {
            tasks,
            usage: usage.clone(),
        }
    }

    /// Stops every worker (a pass under way stops where it is, as in a
    /// crash, which each pass is written to survive), then flushes this
    /// node's usage counts one last time.
    pub async fn stop(self) {
        for task in &self.tasks {
            task.abort();
        }
        for task in self.tasks {
            let _ = task.await;
        }
        self.usage.flush_logged().await;
    }
}

/// Runs `pass` now and then every `interval` (a pass that overruns delays
/// the next rather than bunching them), counting and timing each.
/// `worker` is the metrics label and the name logs use.
fn every<F, Fut>(
    (worker, name): (&'static str, &'static str),
    interval: Duration,
    metrics: &Arc<Metrics>,
    mut pass: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    let metrics = metrics.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let started = Instant::now();
            let result = pass().await;
            metrics.worker_pass(worker, result.is_ok(), started.elapsed());
            if let Err(e) = result {
                tracing::warn!(worker, error = %e, "{name} could not finish; will retry");
            }
        }
    })
}
