//! Operation classes and fingerprint rule sets in Postgres.

use super::Statements;

pub(in crate::store) const POSTGRES: Statements = Statements {
    find: "select policy, created_at, updated_at from operation_class \
           where tenant = $1 and operation = $2",
    put: "insert into operation_class (tenant, operation, policy, created_at, updated_at) \
          values ($1, $2, $3, now(), now()) \
          on conflict on constraint operation_class_pkey \
            do update set policy = excluded.policy, updated_at = now() \
          returning policy, created_at, updated_at",
    list: "select operation, policy, created_at, updated_at from operation_class \
           where tenant = $1 order by operation",
    delete: "delete from operation_class where tenant = $1 and operation = $2",
    remember_rules: "insert into fingerprint_rules (digest, rules) values ($1, $2) \
                     on conflict do nothing",
    rules: "select rules from fingerprint_rules where digest = $1",
};
