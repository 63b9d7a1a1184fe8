//! A fresh database per test, so tests run in parallel without sharing rows.

use sqlx::Connection;

/// The server to create test databases on. `IDEMKEY_TEST_DATABASE_URL`
/// overrides it; it must point at a database we may connect to (not the one
/// the tests will use).
pub fn admin_url() -> String {
    std::env::var("IDEMKEY_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Creates an empty database and returns its URL.
pub async fn fresh_database() -> String {
    let admin = admin_url();
    let name = format!("idemkey_test_{:016x}", rand::random::<u64>());
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("Postgres must be running at {admin} for these tests: {e}"));
    sqlx::query(&format!("create database {name}"))
        .execute(&mut conn)
        .await
        .expect("create test database");
    let base = admin.rsplit_once('/').expect("URL has a database").0;
    format!("{base}/{name}")
}

/// The database backends the store contract is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    /// A fresh, empty database of this kind.
    pub async fn fresh(self) -> String {
        match self {
            Backend::Postgres => fresh_database().await,
            Backend::Sqlite => {
                let dir = std::env::temp_dir().join("idemkey-tests");
                std::fs::create_dir_all(&dir).expect("temp dir");
                let file = dir.join(format!("t{:016x}.db", rand::random::<u64>()));
                format!("sqlite://{}", file.display())
            }
        }
    }

    pub fn of(url: &str) -> Self {
        if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else {
            Backend::Postgres
        }
    }

    /// An SQL expression for "one second ago" in this backend's time format.
    pub fn one_second_ago(self) -> String {
        self.seconds_ago(1)
    }

    /// An SQL expression for `seconds` ago in this backend's time format.
    pub fn seconds_ago(self, seconds: i64) -> String {
        match self {
            Backend::Postgres => format!("now() - interval '{seconds} seconds'"),
            Backend::Sqlite => (chrono::Utc::now().timestamp_millis() - seconds * 1000).to_string(),
        }
    }
}

/// Runs one statement against `url` and returns the rows it touched.
pub async fn execute(url: &str, statement: &str) -> u64 {
    match Backend::of(url) {
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("connect");
            let done = sqlx::query(statement)
                .execute(&pool)
                .await
                .expect("statement");
            pool.close().await;
            done.rows_affected()
        }
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("connect");
            let done = sqlx::query(statement)
                .execute(&pool)
                .await
                .expect("statement");
            pool.close().await;
            done.rows_affected()
        }
    }
}

/// Runs a query returning one integer (a count, say) against `url`.
pub async fn scalar(url: &str, query: &str) -> i64 {
    match Backend::of(url) {
        Backend::Postgres => {
            let pool = sqlx::PgPool::connect(url).await.expect("connect");
            let n: i64 = sqlx::query_scalar(query)
                .fetch_one(&pool)
                .await
                .unwrap_or_else(|e| panic!("{query}: {e}"));
            pool.close().await;
            n
        }
        Backend::Sqlite => {
            let pool = sqlx::SqlitePool::connect(url).await.expect("connect");
            let n: i64 = sqlx::query_scalar(query)
                .fetch_one(&pool)
                .await
                .unwrap_or_else(|e| panic!("{query}: {e}"));
            pool.close().await;
            n
        }
    }
}
