//! `cargo test` at the workspace root builds only this crate (the default
//! member, so that `cargo run` starts the server) and would report a handful
//! of dashboard tests green. The suite is much more than that, and it needs
//! Postgres, Redis and Garage running: `scripts/test.sh` starts them, runs
//! every crate's tests and sets `IDEMKEY_TEST_SUITE`, which this test checks.

#[test]
fn the_whole_suite_runs_through_scripts_test_sh() {
    assert!(
        std::env::var_os("IDEMKEY_TEST_SUITE").is_some(),
        "`cargo test` at the root runs only the web crate's tests. Run the whole \
         suite with `bash scripts/test.sh` (it starts Postgres, Redis and Garage, \
         then runs every crate's tests)."
    );
}
