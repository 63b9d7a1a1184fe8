//! The anchor: what a team would write instead of calling idemkey — the
//! seeds' in-app pattern, on its own minimal table in its own database.
//!
//! One claims table with the scoped key as its primary key and nothing
//! else indexed; a new key is two autocommit statements (`insert … on
//! conflict do nothing`, then `update … set status = 'COMPLETED'` with the
//! stored response), a replay one `select` by primary key. pgbench runs them
//! as prepared statements with the same clients and duration as every other
//! row, so "new keys / in-app SQL" is the number a team would compare.
//! `sqlite` runs the same two statements (the text comes from here) on a
//! SQLite file with the embedded default's durability, for the service on
//! SQLite.

use sqlx::Executor;

use crate::db::BenchDb;
use crate::workload;

pub mod sqlite;

/// The seeds' table: scope, key, request hash, state, stored response.
/// `bytes` is the dialect's byte-string type (`bytea`, `blob`).
pub fn schema(bytes: &str) -> String {
    format!(
        "create table idempotency_record (
    tenant_id text not null,
    operation text not null,
    idempotency_key text not null,
    request_hash {bytes} not null,
    status text not null,
    response_code int,
    response_body text,
    primary key (tenant_id, operation, idempotency_key)
)"
    )
}

/// The response every completion stores (the size of the scenarios' outcome).
pub const RESPONSE: &str = r#"{"charge":"ch_1","amount":"25.00","currency":"EUR"}"#;

/// What stands in each place of the two statements: a literal, a pgbench
/// variable, or a bound parameter.
pub struct Slots<'a> {
    pub tenant: &'a str,
    pub operation: &'a str,
    pub key: &'a str,
    pub request_hash: &'a str,
    pub response: &'a str,
}

/// The seeds' new key: claim (`insert … on conflict do nothing`), then
/// complete (`update … set status = 'COMPLETED'`), two autocommit statements.
pub fn new_key_statements(s: &Slots) -> [String; 2] {
    let Slots {
        tenant,
        operation,
        key,
        request_hash,
        response,
    } = s;
    [
        format!(
            "insert into idempotency_record (tenant_id, operation, idempotency_key, request_hash, status) \
             values ({tenant}, {operation}, {key}, {request_hash}, 'PROCESSING') on conflict do nothing"
        ),
        format!(
            "update idempotency_record set status = 'COMPLETED', response_code = 201, response_body = {response} \
             where tenant_id = {tenant} and operation = {operation} and idempotency_key = {key}"
        ),
    ]
}

/// Claim then complete one fresh key as a pgbench script.
pub fn new_key_script(operation: &str) -> String {
    let (tenant, operation, response) = (
        format!("'{}'", workload::TENANT),
        format!("'{operation}'"),
        format!("'{RESPONSE}'"),
    );
    let [insert, update] = new_key_statements(&Slots {
        tenant: &tenant,
        operation: &operation,
        key: ":key::text",
        request_hash: "sha256(:key::text::bytea)",
        response: &response,
    });
    format!("\\set key random(1, 4611686018427387903)\n{insert};\n{update};\n")
}

/// The replay: read one of the keys `1..=keys`, completed by [`fill`].
pub fn replay_script(keys: u64) -> String {
    let (tenant, operation) = (workload::TENANT, workload::REPLAY_OPERATION);
    format!(
        "\\set key random(1, {keys})\n\
         select request_hash, status, response_code, response_body from idempotency_record \
         where tenant_id = '{tenant}' and operation = '{operation}' and idempotency_key = :key::text;\n"
    )
}

/// Creates the table (nothing else lives in the database).
pub async fn create(db: &BenchDb) -> anyhow::Result<()> {
    db.connect()
        .await?
        .execute(schema("bytea").as_str())
        .await?;
    Ok(())
}

/// Completed records for the keys `1..=n` of the replay operation.
pub async fn fill(db: &BenchDb, n: u64) -> anyhow::Result<()> {
    let mut conn = db.connect().await?;
    let (tenant, operation) = (workload::TENANT, workload::REPLAY_OPERATION);
    conn.execute(
        format!(
            "insert into idempotency_record \
             select '{tenant}', '{operation}', g::text, sha256(g::text::bytea), 'COMPLETED', 201, '{RESPONSE}' \
             from generate_series(1, {n}) g"
        )
        .as_str(),
    )
    .await?;
    conn.execute("analyze idempotency_record").await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_key_is_two_statements_on_one_scoped_key() {
        let script = new_key_script("bench.new");
        assert_eq!(script.matches(";\n").count(), 2, "{script}");
        assert!(script.contains("on conflict do nothing"));
        assert_eq!(script.matches(":key::text").count(), 3);
        assert!(script.contains("where tenant_id = 'bench' and operation = 'bench.new'"));
    }

    #[test]
    fn the_schema_differs_between_dialects_only_in_the_byte_type() {
        let (pg, lite) = (schema("bytea"), schema("blob"));
        assert_eq!(pg.replace("bytea", "blob"), lite);
        assert!(lite.contains("primary key (tenant_id, operation, idempotency_key)"));
    }
}
