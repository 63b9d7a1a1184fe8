//! Recent `key_reused` refusals in Postgres.

use super::Statements;

pub(in crate::store) const POSTGRES: Statements = Statements {
    recent: "select tenant, operation, key, at, mismatched from key_rejections \
             where tenant = $1 and ($2::text is null or operation = $2) \
             order by at desc, id desc limit $3",
    // Rows are named by their primary key, (tenant, id).
    prune_old: "delete from key_rejections where (tenant, id) in \
                (select tenant, id from key_rejections where at < $1 limit $2)",
    prune_surplus: "delete from key_rejections where (tenant, id) in \
                    (select tenant, id from (select tenant, id, row_number() over \
                       (partition by tenant, operation order by at desc, id desc) as n \
                     from key_rejections) ranked where n > $1 limit $2)",
};
