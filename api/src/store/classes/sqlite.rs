//! Operation classes and fingerprint rule sets in SQLite.

use super::Statements;

pub(in crate::store) const SQLITE: Statements = Statements {
    find: "select policy, created_at, updated_at from operation_class \
           where tenant = ?1 and operation = ?2",
    put: concat!(
        "insert into operation_class (tenant, operation, policy, created_at, updated_at) \
         values (?1, ?2, ?3,",
        sqlite_now!(),
        ",",
        sqlite_now!(),
        ") on conflict (tenant, operation) do update set policy = excluded.policy, updated_at =",
        sqlite_now!(),
        "returning policy, created_at, updated_at"
    ),
    list: "select operation, policy, created_at, updated_at from operation_class \
           where tenant = ?1 order by operation",
    delete: "delete from operation_class where tenant = ?1 and operation = ?2",
    remember_rules: concat!(
        "insert into fingerprint_rules (digest, rules, created_at) values (?1, ?2,",
        sqlite_now!(),
        ") on conflict do nothing"
    ),
    rules: "select rules from fingerprint_rules where digest = ?1",
};
