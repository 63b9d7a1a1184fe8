//! Quotas and measured storage in Postgres.

use super::Statements;

pub(in crate::store) const POSTGRES: Statements = Statements {
    measure: concat!(
        "insert into tenant_storage (tenant, keys, outcome_bytes, archived_bytes, measured_at) \
         select tenant, count(*), coalesce(sum(octet_length(outcome)), 0)::bigint, \
                coalesce(sum(segment_len), 0)::bigint, now() \
           from idempotency_key where not",
        pg_gone!(),
        "group by tenant \
         on conflict (tenant) do update set keys = excluded.keys, \
           outcome_bytes = excluded.outcome_bytes, archived_bytes = excluded.archived_bytes, \
           measured_at = excluded.measured_at"
    ),
    zero_missing: concat!(
        "update tenant_storage set keys = 0, outcome_bytes = 0, archived_bytes = 0, \
           measured_at = now() \
         where not exists (select 1 from idempotency_key k \
                            where k.tenant = tenant_storage.tenant and not",
        pg_gone!(),
        ")"
    ),
    all_storage: "select tenant, keys, outcome_bytes, archived_bytes, measured_at \
                  from tenant_storage",
    all_quotas: "select tenant, max_keys, max_outcome_bytes from tenant_quota order by tenant",
    storage_of: "select tenant, keys, outcome_bytes, archived_bytes, measured_at \
                 from tenant_storage where tenant = $1",
    quota_of: "select tenant, max_keys, max_outcome_bytes from tenant_quota where tenant = $1",
    set_quota: "insert into tenant_quota (tenant, max_keys, max_outcome_bytes) \
                values ($1, $2, $3) \
                on conflict (tenant) do update set max_keys = excluded.max_keys, \
                  max_outcome_bytes = excluded.max_outcome_bytes, updated_at = now()",
    clear_quota: "delete from tenant_quota where tenant = $1",
};
