//! idemkey's API server: configuration, domain, storage and HTTP routes.
//!
//! Layers point one way: `routes` (HTTP) → `engine` (the protocol's loops) →
//! `store` (every SQL statement), `cache` (copies of final outcomes),
//! `archive` (segments of tiered outcomes) and `domain` (pure types and
//! decisions).

pub mod archive;
pub mod auth;
pub mod cache;
pub mod cli;
pub mod config;
pub mod domain;
pub mod engine;
pub mod error;
pub mod metrics;
pub mod private_fs;
#[cfg(test)]
mod proptest_config;
pub mod ratelimit;
pub mod routes;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod usage;
pub mod workers;
