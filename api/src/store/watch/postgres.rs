//! The lease watch's reads in Postgres.

use super::Statements;

// Stuck keys are those not gone yet (`pg_gone!`).
const PG_SUMMARY: &str = concat!(
    "select 'in_progress' as kind, count(*) as n, min(claimed_at) as oldest, now() as now \
      from idempotency_key where state = 'in_progress' \
    union all \
    select 'lease_expired', count(*), min(lease_expires_at), now() \
      from idempotency_key where state = 'in_progress' and lease_expires_at <= now() \
       and not",
    pg_gone!(),
    "union all \
    select 'quarantined', count(*), min(updated_at), now() \
      from idempotency_key where state = 'quarantined' and not",
    pg_gone!()
);

// Only what the watch acts on — expired leases of classes that quarantine
// on lease expiry (takeover classes wait for their next claim) — and fairly:
// each tenant's oldest first, then each tenant's second, so one tenant's
// backlog cannot crowd the others out of a batch.
const PG_EXPIRED: &str = concat!(
    "select tenant, operation, key, attempt, owner_token_hash from ( \
       select k.tenant, k.operation, k.key, k.attempt, k.owner_token_hash, k.lease_expires_at, \
              row_number() over (partition by k.tenant order by k.lease_expires_at) as turn \
         from operation_class c join idempotency_key k \
           on k.tenant = c.tenant and k.operation = c.operation \
        where c.policy::jsonb ->> 'on_lease_expiry' = 'quarantine' \
          and k.state = 'in_progress' and k.lease_expires_at <= now() and not",
    pg_gone!(),
    ") due order by turn, lease_expires_at limit $1"
);

pub(in crate::store) const POSTGRES: Statements = Statements {
    summary: PG_SUMMARY,
    expired: PG_EXPIRED,
};
