//! Command-line flags. Defaults are a quick run; `scripts/bench.sh` passes
//! the full suite's settings.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use serde::Serialize;

#[derive(Parser, Debug, Clone, Serialize)]
#[command(
    name = "idemkey-bench",
    args_override_self = true,
    about = "Drives a real idemkey server and Postgres and compares each scenario with the machine's limits"
)]
pub struct Args {
    /// Measurements to run, comma-separated (default: all; `--list` names them).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Print the measurement names and exit.
    #[arg(long)]
    #[serde(skip)]
    pub list: bool,
    /// Render the chart, table (and README section) again from a results
    /// JSON file instead of running anything.
    #[arg(long)]
    #[serde(skip)]
    pub render: Option<PathBuf>,
    /// Print the generated pgbench scripts and exit.
    #[arg(long)]
    #[serde(skip)]
    pub print_pgbench: bool,
    /// Unrecorded warm-up before each measured window, in seconds.
    #[arg(long, default_value_t = 2)]
    pub warmup_secs: u64,
    /// Length of each measured window, in seconds.
    #[arg(long, default_value_t = 5)]
    pub measure_secs: u64,
    /// Virtual clients (and pgbench clients) of the steady scenarios.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// Clients of the embedded-default rows (`new-keys-sqlite`, and the
    /// tasks and pooled connections of `limit-app-sqlite-new-keys`).
    #[arg(long, default_value_t = 16)]
    pub sqlite_clients: usize,
    /// Clients claiming the hot key at once.
    #[arg(long, default_value_t = 500)]
    pub storm_clients: usize,
    /// How long the hot key's owner works before completing, in ms.
    #[arg(long, default_value_t = 2000)]
    pub storm_owner_ms: u64,
    /// `wait_ms` of each storm claim.
    #[arg(long, default_value_t = 5000)]
    pub storm_wait_ms: u64,
    /// The coalescing window of the server's hot-key reads, in ms, to judge
    /// "at most one database read per window" (default: the server's own,
    /// `idemkey_api::engine::COALESCING_WINDOW`).
    #[arg(long, default_value_t = idemkey_api::engine::COALESCING_WINDOW.as_millis() as u64)]
    pub coalescing_window_ms: u64,
    /// The server's `/metrics` series that counts reads of a key's record
    /// (every series starting with this text is summed).
    #[arg(
        long,
        default_value = r#"idemkey_store_statements_total{statement="find"}"#
    )]
    pub db_reads_metric: String,
    /// Idle keep-alive connections for the memory measurement.
    #[arg(long, default_value_t = 1000)]
    pub idle_connections: usize,
    /// Completed keys the replay scenarios (and pgbench's FIND) pick from.
    #[arg(long, default_value_t = 10_000)]
    pub replay_keys: u64,
    /// Rows bulk-loaded before the growth scenario.
    #[arg(long, default_value_t = 100_000)]
    pub growth_rows: u64,
    /// The server binary (a release build: `cargo build --release -p idemkey-web`).
    #[arg(long, default_value = "target/release/idemkey")]
    pub server_bin: PathBuf,
    /// Postgres server, without a database name.
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432")]
    pub postgres: String,
    #[arg(long, default_value = "pgbench")]
    pub pgbench: String,
    /// Where latest.json, latest.svg and latest.md are written.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// A markdown file whose generated Performance section (between the
    /// `bench:start` / `bench:end` markers) gets the new table and chart.
    #[arg(long)]
    pub readme: Option<PathBuf>,
    /// Worker threads of the load generator (it shares the machine with the
    /// server and Postgres).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// An extra variable for every server the suite starts, as NAME=value
    /// (repeatable), e.g. `--server-env IDEMKEY_DATABASE_POOL=64`.
    #[arg(long = "server-env", value_parser = parse_var)]
    pub server_env: Vec<(String, String)>,
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .filter(|(name, _)| !name.is_empty())
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .ok_or_else(|| format!("expected NAME=value, got {s:?}"))
}

impl Args {
    pub fn warmup(&self) -> Duration {
        Duration::from_secs(self.warmup_secs)
    }

    pub fn measure(&self) -> Duration {
        Duration::from_secs(self.measure_secs.max(1))
    }
}
