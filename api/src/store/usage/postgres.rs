//! Usage rows and the dashboard's counts in Postgres.

use super::Statements;

pub(in crate::store) const POSTGRES: Statements = Statements {
    insert: "insert into usage_minute (tenant, operation, minute, ",
    row_times: "",
    updated_now: "now()",
    sum: "sum({c})::bigint as {c}",
    series_head: "select operation, \
                  to_timestamp(floor(extract(epoch from minute) / $3) * $3) as bucket, ",
    series_tail: " from usage_minute where tenant = $1 and minute >= $2 \
                  group by operation, bucket order by operation, bucket",
    prune: "delete from usage_minute where (tenant, minute, operation) in \
              (select tenant, minute, operation from usage_minute where minute < $1 limit $2)",
    hot_counts: concat!(
        "select operation, case when",
        pg_gone!(),
        "then 'expired' \
              when state = 'in_progress' and lease_expires_at <= now() then 'lease_expired' \
              when segment is not null then 'archived' \
              else state end as bucket, \
           count(*) as n, min(created_at) as oldest, now() as observed_at, \
           min(tier_at) filter (where state = 'completed' and segment is null \
                                  and tier_at <= now()) as tier_due, \
           min(expires_at) filter (where expires_at <= now()) as expired_since \
         from idempotency_key where tenant = $1 group by operation, bucket"
    ),
};
