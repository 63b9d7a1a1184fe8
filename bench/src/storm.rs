//! The hot-key storm: one owner claims a key and works on it; meanwhile
//! hundreds of clients claim the same key with a bounded wait; the owner
//! completes after a delay. Every waiter should answer with the replay.
//!
//! Database reads are counted two ways: the server's own `/metrics` counter
//! (when the build has one) and, independently, Postgres's index-scan count
//! on the record table (`pg_stat_user_tables.idx_scan`: every claim's insert
//! probe and every read of the key).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use hyper::StatusCode;

use crate::db::{self, BenchDb};
use crate::hist;
use crate::http::Conn;
use crate::server::{metric_sum, Server};
use crate::workload::{self, NEW_OPERATION};

#[derive(Debug, Clone, Copy)]
pub struct StormSpec {
    pub clients: usize,
    /// How long the owner works before completing.
    pub owner_works: Duration,
    /// `wait_ms` of every waiter's claim.
    pub wait_ms: u64,
}

pub struct StormResult {
    /// Answers by `HTTP status + status word`.
    pub answers: BTreeMap<String, u64>,
    /// Each waiter's claim, from sending to the answer.
    pub latency: Histogram<u64>,
    /// For waiters answered after the completion: how long after it.
    pub lag_after_complete: Histogram<u64>,
    /// From the first waiter's claim to the last answer.
    pub storm: Duration,
    pub server_cpu: Option<Duration>,
    /// The server's own read counter over the storm, if it has one.
    pub metric_reads: Option<f64>,
    /// Postgres index scans on the record table over the storm (the owner's
    /// completion included).
    pub pg_index_scans: i64,
    pub pg_seq_scans: i64,
}

const KEY: &str = "hot-key";

fn status_word(body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct A {
        status: serde_json::Value,
        code: Option<String>,
    }
    match serde_json::from_slice::<A>(body) {
        Ok(A { code: Some(c), .. }) => c,
        Ok(A {
            status: serde_json::Value::String(s),
            ..
        }) => s,
        _ => "?".into(),
    }
}

pub async fn run(
    server: &Server,
    db: &BenchDb,
    token: &str,
    reads_metric: &str,
    spec: StormSpec,
) -> anyhow::Result<StormResult> {
    let path = workload::claim_path(NEW_OPERATION, KEY);
    let mut owner = Conn::connect(server.addr).await?;
    let (status, body) = owner
        .post(&path, token, workload::new_key_claim_body(KEY))
        .await?;
    if status != StatusCode::CREATED {
        bail!("the owner's claim answered {status}");
    }
    let owner_token = serde_json::from_slice::<serde_json::Value>(&body)?["owner_token"]
        .as_str()
        .context("no owner_token")?
        .to_owned();
    let mut waiters = Vec::with_capacity(spec.clients);
    for _ in 0..spec.clients {
        waiters.push(Conn::connect(server.addr).await?);
    }
    let waiter_body = {
        let mut v: serde_json::Value = serde_json::from_str(&workload::new_key_claim_body(KEY))?;
        v["wait_ms"] = spec.wait_ms.into();
        v.to_string()
    };
    // Let the statistics of the owner's claim reach Postgres's counters.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let metric0 = reads(server, reads_metric, true).await;
    let scans0 = db::table_scans(db).await?;
    let cpu0 = server.cpu().ok();
    let started = Instant::now();
    let tasks: Vec<_> = waiters
        .into_iter()
        .map(|mut conn| {
            let (path, token, body) = (path.clone(), token.to_owned(), waiter_body.clone());
            tokio::spawn(async move {
                let sent = Instant::now();
                let answer = match conn.post(&path, &token, body).await {
                    Ok((status, body)) => format!("{} {}", status.as_u16(), status_word(&body)),
                    Err(e) => format!("error: {e}"),
                };
                (answer, sent, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(spec.owner_works).await;
    let (status, _) = owner
        .post(
            &workload::complete_path(NEW_OPERATION, KEY),
            token,
            workload::complete_body(&owner_token),
        )
        .await?;
    let completed = Instant::now();
    if status != StatusCode::OK {
        bail!("the owner's completion answered {status}");
    }
    let mut result = StormResult {
        answers: BTreeMap::new(),
        latency: hist::new_histogram(),
        lag_after_complete: hist::new_histogram(),
        storm: Duration::ZERO,
        server_cpu: None,
        metric_reads: None,
        pg_index_scans: 0,
        pg_seq_scans: 0,
    };
    let mut last = started;
    for task in tasks {
        let (answer, sent, answered) = task.await?;
        *result.answers.entry(answer).or_default() += 1;
        hist::record(&mut result.latency, answered - sent);
        if answered > completed {
            hist::record(&mut result.lag_after_complete, answered - completed);
        }
        last = last.max(answered);
    }
    result.storm = last - started;
    result.server_cpu = cpu0
        .zip(server.cpu().ok())
        .map(|(a, b)| b.saturating_sub(a));
    // Backends flush their statistics within a second of going idle.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let scans1 = db::table_scans(db).await?;
    result.pg_index_scans = scans1.0 - scans0.0;
    result.pg_seq_scans = scans1.1 - scans0.1;
    result.metric_reads = metric0
        .zip(reads(server, reads_metric, false).await)
        .map(|(a, b)| b - a);
    Ok(result)
}

/// The server's read counter. Before the storm a series not written yet
/// counts 0 (the server writes a labelled series at its first increment);
/// after it the series must exist, so a misspelt name is "not measured"
/// rather than zero reads.
async fn reads(server: &Server, metric: &str, before: bool) -> Option<f64> {
    let text = server.metrics().await.ok()??;
    metric_sum(&text, metric).or(before.then_some(0.0))
}
