//! The lease watch's reads in SQLite (see the Postgres ones for why they
//! read what they read).

use super::Statements;

// Stuck keys are those not gone yet (`sqlite_gone!`).
const SQLITE_SUMMARY: &str = concat!(
    "select 'in_progress' as kind, count(*) as n, min(claimed_at) as oldest,",
    sqlite_now!(),
    "as now from idempotency_key where state = 'in_progress' \
    union all \
    select 'lease_expired', count(*), min(lease_expires_at),",
    sqlite_now!(),
    "\
      from idempotency_key where state = 'in_progress' and lease_expires_at <=",
    sqlite_now!(),
    " \
       and not",
    sqlite_gone!(),
    "union all \
    select 'quarantined', count(*), min(updated_at),",
    sqlite_now!(),
    "\
      from idempotency_key where state = 'quarantined' and not",
    sqlite_gone!()
);

const SQLITE_EXPIRED: &str = concat!(
    "select tenant, operation, key, attempt, owner_token_hash from ( \
       select k.tenant, k.operation, k.key, k.attempt, k.owner_token_hash, k.lease_expires_at, \
              row_number() over (partition by k.tenant order by k.lease_expires_at) as turn \
         from operation_class c join idempotency_key k \
           on k.tenant = c.tenant and k.operation = c.operation \
        where json_extract(c.policy, '$.on_lease_expiry') = 'quarantine' \
          and k.state = 'in_progress' and k.lease_expires_at <=",
    sqlite_now!(),
    " and not",
    sqlite_gone!(),
    ") due order by turn, lease_expires_at limit ?1"
);

pub(in crate::store) const SQLITE: Statements = Statements {
    summary: SQLITE_SUMMARY,
    expired: SQLITE_EXPIRED,
};
