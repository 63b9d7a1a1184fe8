//! Running pgbench with the generated scripts, prepared statements (like
//! sqlx), and reading its answer: transactions per second from its summary,
//! latencies from its per-transaction log.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use tokio::process::Command;

use crate::{hist, procfs};

/// One pgbench invocation.
pub struct Pgbench<'a> {
    pub binary: &'a str,
    pub database_url: &'a str,
    /// The database's name, to find its backends' CPU time.
    pub db_name: &'a str,
    /// Script files and their weights.
    pub scripts: Vec<(PathBuf, u32)>,
    pub clients: usize,
    pub defines: Vec<String>,
    pub work_dir: &'a Path,
}

pub struct PgbenchResult {
    pub tps: f64,
    pub transactions: u64,
    pub failed: u64,
    pub latency: Histogram<u64>,
    /// CPU of the database's backends per transaction, in microseconds.
    pub db_cpu_us_per_tx: Option<f64>,
    /// Share of the machine busy during the measured run.
    pub machine_busy: Option<f64>,
}

/// CPU samples taken inside a pgbench run (its backends live only as long
/// as the run, so the edges are trimmed: 1 s after the start, 0.5 s before
/// the end).
struct Inside {
    seconds: f64,
    db_cpu: Duration,
    machine_busy: Option<f64>,
}

impl Pgbench<'_> {
    /// Runs for `warmup` unrecorded, then for `measure` with a
    /// per-transaction log.
    pub async fn run(&self, warmup: Duration, measure: Duration) -> anyhow::Result<PgbenchResult> {
        if !warmup.is_zero() {
            self.invoke(warmup, None).await?;
        }
        let log_dir = self.work_dir.join("pgbench-log");
        let _ = std::fs::remove_dir_all(&log_dir);
        std::fs::create_dir_all(&log_dir)?;
        let (stdout, inside) = self.invoke(measure, Some(&log_dir)).await?;
        let summary = parse_summary(&stdout)
            .with_context(|| format!("unexpected pgbench output:\n{stdout}"))?;
        let mut latency = hist::new_histogram();
        for entry in std::fs::read_dir(&log_dir)? {
            let text = std::fs::read_to_string(entry?.path())?;
            read_log(&text, &mut latency);
        }
        let _ = std::fs::remove_dir_all(&log_dir);
        let db_cpu_us_per_tx = inside.as_ref().and_then(|i| {
            let txs = summary.tps * i.seconds;
            (txs > 0.0).then(|| i.db_cpu.as_secs_f64() * 1e6 / txs)
        });
        Ok(PgbenchResult {
            tps: summary.tps,
            transactions: summary.transactions,
            failed: summary.failed,
            latency,
            db_cpu_us_per_tx,
            machine_busy: inside.and_then(|i| i.machine_busy),
        })
    }

    async fn invoke(
        &self,
        time: Duration,
        log_dir: Option<&Path>,
    ) -> anyhow::Result<(String, Option<Inside>)> {
        let mut cmd = Command::new(self.binary);
        cmd.arg("--no-vacuum")
            .args(["--protocol", "prepared"])
            .args(["--client", &self.clients.to_string()])
            .args(["--jobs", "2"])
            .args(["--time", &time.as_secs().max(1).to_string()]);
        for (script, weight) in &self.scripts {
            cmd.arg("--file")
                .arg(format!("{}@{weight}", script.display()));
        }
        if let Some(dir) = log_dir {
            cmd.arg("--log")
                .arg(format!("--log-prefix={}", dir.join("pgbench").display()));
        }
        cmd.args(&self.defines)
            .arg(self.database_url)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = cmd
            .spawn()
            .with_context(|| format!("running {}", self.binary))?;
        let sample = async {
            let window = time.checked_sub(Duration::from_millis(1500))?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let (db0, m0) = (procfs::backends_cpu(self.db_name), procfs::machine_cpu());
            tokio::time::sleep(window).await;
            let (db1, m1) = (procfs::backends_cpu(self.db_name), procfs::machine_cpu());
            Some(Inside {
                seconds: window.as_secs_f64(),
                db_cpu: db1.saturating_sub(db0),
                machine_busy: m0.zip(m1).and_then(|(a, b)| a.busy_share_until(b)),
            })
        };
        let (out, inside) = tokio::join!(child.wait_with_output(), sample);
        let out = out?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "pgbench failed ({}):\n{stdout}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok((stdout, inside))
    }
}

#[derive(Debug, PartialEq)]
pub struct Summary {
    pub tps: f64,
    pub transactions: u64,
    pub failed: u64,
}

/// Reads pgbench's closing summary (PostgreSQL 14+ wording).
pub fn parse_summary(stdout: &str) -> Option<Summary> {
    let after = |prefix: &str| -> Option<&str> {
        stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
    };
    Some(Summary {
        tps: after("tps = ")?.parse().ok()?,
        transactions: after("number of transactions actually processed: ")?
            .split('/')
            .next()?
            .parse()
            .ok()?,
        failed: after("number of failed transactions: ")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    })
}

/// Adds the latencies of a pgbench per-transaction log (`client_id
/// transaction_no time script_no time_epoch time_us`, `time` in µs) to `h`.
/// Skipped and failed transactions (`skipped`, `failed`) carry no latency.
pub fn read_log(text: &str, h: &mut Histogram<u64>) {
    for line in text.lines() {
        if let Some(micros) = line
            .split_whitespace()
            .nth(2)
            .and_then(|t| t.parse::<u64>().ok())
        {
            hist::record(h, Duration::from_micros(micros));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: multiple scripts
scaling factor: 1
query mode: prepared
number of clients: 64
number of threads: 2
maximum number of tries: 1
duration: 10 s
number of transactions actually processed: 41234
number of failed transactions: 3 (0.007%)
latency average = 15.521 ms
initial connection time = 95.406 ms
tps = 4123.456789 (without initial connection time)
";

    #[test]
    fn the_summary_gives_tps_transactions_and_failures() {
        assert_eq!(
            parse_summary(OUTPUT),
            Some(Summary {
                tps: 4123.456789,
                transactions: 41234,
                failed: 3
            })
        );
        assert_eq!(parse_summary("nothing useful"), None);
    }

    #[test]
    fn older_summaries_without_failures_count_none() {
        let s = "number of transactions actually processed: 10/10\ntps = 5.0 (including connections establishing)\n";
        assert_eq!(
            parse_summary(s),
            Some(Summary {
                tps: 5.0,
                transactions: 10,
                failed: 0
            })
        );
    }

    #[test]
    fn log_lines_become_latencies_and_failures_are_skipped() {
        let mut h = hist::new_histogram();
        read_log(
            "0 1 1500 0 1700000000 1\n0 2 failed 0 1700000000 2\n1 1 2500 1 1700000000 3\n",
            &mut h,
        );
        let s = hist::Latency::of(&h).unwrap();
        assert_eq!(s.count, 2);
        assert!((s.max_ms - 2.5).abs() < 0.01);
    }
}
