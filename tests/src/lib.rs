//! Support for idemkey's end-to-end tests: a real server on a real port, a
//! fresh Postgres database per test, and tokens for fresh tenants.
//!
//! Nothing here is mocked. If Postgres, Redis or Garage is not reachable the tests
//! fail loudly (run them through `scripts/test.sh`, which starts what they
//! need).

pub mod answer;
pub mod app;
pub mod bad_input;
pub mod browser;
pub mod checkout;
pub mod classes;
pub mod dashboard;
pub mod db;
pub mod docs;
pub mod explain;
pub mod faults;
pub mod garage;
pub mod openapi;
pub mod operator;
pub mod process;
pub mod redis;
pub mod store_model;
pub mod stores;
pub mod tiering;
pub mod tokens;
pub mod waiting;
pub mod webhooks;

pub use app::TestApp;
pub use tokens::{TEST_AUDIENCE, TEST_ISSUER, TEST_KID, TEST_SECRET};

/// Runs each listed test body (an `async fn(TestApp)`) once per database
/// backend, and once more on Postgres with the Redis cache: the store
/// contract is one set of test bodies, not copies, and a Redis layer must
/// change none of its answers.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let app = $crate::TestApp::spawn_on($crate::db::Backend::Postgres).await;
                    super::$name(app).await
                }
            )*
        }
        mod postgres_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let app = $crate::TestApp::spawn_on_with($crate::db::Backend::Postgres, |vars| {
                        vars.insert("IDEMKEY_REDIS_URL".into(), $crate::redis::shared_redis_url());
                    })
                    .await;
                    super::$name(app).await
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let app = $crate::TestApp::spawn_on($crate::db::Backend::Sqlite).await;
                    super::$name(app).await
                }
            )*
        }
    };
}
