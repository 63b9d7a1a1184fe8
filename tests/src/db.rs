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
