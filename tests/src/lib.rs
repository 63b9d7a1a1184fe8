//! Support for idemkey's end-to-end tests: a real server on a real port, a
//! fresh Postgres database per test, and tokens for fresh tenants.
//!
//! Nothing here is mocked. If Postgres is not reachable the tests fail loudly
//! (run them through `scripts/test.sh`, which starts what they need).

pub mod app;
pub mod db;
pub mod process;
pub mod tokens;

pub use app::TestApp;
pub use tokens::{TEST_AUDIENCE, TEST_ISSUER, TEST_KID, TEST_SECRET};
