//! Usage rows and the dashboard's counts in SQLite.

use super::Statements;

pub(in crate::store) const SQLITE: Statements = Statements {
    insert: "insert into usage_minute (tenant, operation, minute, created_at, updated_at, ",
    row_times: concat!(sqlite_now!(), ",", sqlite_now!()),
    updated_now: sqlite_now!(),
    sum: "sum({c}) as {c}",
    series_head: "select operation, (minute / (?3 * 1000)) * (?3 * 1000) as bucket, ",
    series_tail: " from usage_minute where tenant = ?1 and minute >= ?2 \
                  group by operation, bucket order by operation, bucket",
    prune: "delete from usage_minute where (tenant, minute, operation) in \
              (select tenant, minute, operation from usage_minute where minute < ?1 limit ?2)",
    hot_counts: concat!(
        "select operation, case when",
        sqlite_gone!(),
        "then 'expired' \
              when state = 'in_progress' and lease_expires_at <=",
        sqlite_now!(),
        "then 'lease_expired' \
              when segment is not null then 'archived' \
              else state end as bucket, \
           count(*) as n, min(created_at) as oldest,",
        sqlite_now!(),
        "as observed_at, \
           min(tier_at) filter (where state = 'completed' and segment is null \
                                  and tier_at <=",
        sqlite_now!(),
        ") as tier_due, \
           min(expires_at) filter (where expires_at <=",
        sqlite_now!(),
        ") as expired_since \
         from idempotency_key where tenant = ?1 group by operation, bucket"
    ),
};
