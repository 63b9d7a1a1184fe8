//! The SDK against real idemkey servers: every scenario of
//! sdk/scenarios.json is a test named after it (checked by `coverage`).

mod basic;
mod coverage;
mod faults;
mod lease;
mod low_level;
mod raw;
mod recovery;
mod support;
mod waiting;
