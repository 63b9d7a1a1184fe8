//! How many cases a property test runs. The default keeps `cargo test`
//! fast; `IDEMKEY_PROPTEST_CASES=N` runs every property N times for a longer
//! search (the model-based tests read the same variable).
//!
//! Failures are not persisted to regression files: proptest prints the
//! shrunk input, and a finding worth keeping becomes an example test.

use proptest::test_runner::Config;

/// The environment variable that overrides every property's case count.
pub(crate) const CASES_VAR: &str = "IDEMKEY_PROPTEST_CASES";

/// `default_cases` cases, or the number in `IDEMKEY_PROPTEST_CASES`.
pub(crate) fn config(default_cases: u32) -> Config {
    let cases = std::env::var(CASES_VAR)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}
