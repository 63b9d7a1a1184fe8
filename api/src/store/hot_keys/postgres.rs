//! The most claimed keys per class and minute in Postgres.

use super::Statements;

pub(in crate::store) const POSTGRES: Statements = Statements {
    add: "insert into hot_key_minute (tenant, operation, minute, key, node, claims) values ",
    on_conflict: " on conflict (tenant, operation, minute, key, node) do update \
                  set claims = greatest(hot_key_minute.claims, excluded.claims)",
    top: "select operation, key, claims from ( \
            select operation, key, sum(claims)::bigint as claims, \
                   row_number() over (partition by operation order by sum(claims) desc, key) as n \
              from hot_key_minute where tenant = $1 and minute >= $2 \
             group by operation, key) ranked \
          where n <= $3 order by operation, claims desc, key",
    prune: "delete from hot_key_minute where (tenant, operation, minute, key, node) in \
            (select tenant, operation, minute, key, node from hot_key_minute \
              where minute < $1 limit $2)",
};
