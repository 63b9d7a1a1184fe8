//! idemkey's benchmark harness (issue 8): drives the real `idemkey` server
//! over loopback with many keep-alive HTTP/1.1 clients, measures the
//! machine's own limits in the same run (pgbench with the service's exact
//! SQL, and the server's cheapest endpoint), and reports every scenario as a
//! ratio to its limit beside throughput, latency percentiles, server CPU time
//! per operation and peak RSS.
//!
//! `in_app` is the anchor: the seeds' in-app SQL a team would write instead
//! (run by pgbench on Postgres, and from this process on a SQLite file for
//! the embedded default).
//! `main.rs` is glue; `suite` runs measurements by name; `measure` has one
//! function per measurement (`workers` those of the archive worker); `steady`, `storm` and `idle` are the load
//! shapes; `sql` generates the pgbench scripts; the rest is plumbing
//! (`http`, `load`, `server`, `db`, `pgbench`, `procfs`) and output
//! (`hist`, `report`, `svg`, `targets`).

pub mod cli;
pub mod db;
pub mod hist;
pub mod http;
pub mod idle;
pub mod in_app;
pub mod load;
pub mod measure;
pub mod pgbench;
pub mod procfs;
pub mod report;
pub mod server;
pub mod sql;
pub mod steady;
pub mod storm;
pub mod suite;
pub mod svg;
pub mod targets;
pub mod workers;
pub mod workload;
