//! Every Postgres statement the store runs on a table, by name, as the store
//! runs it — for the tests that read their plans and check that each one
//! stays within one tenant (`tests/tests/explain_request_path.rs`).
//!
//! What it guarantees: a statement cannot be added without appearing here.
//! Each capability's [`Statements`](super::claims::Statements) is taken
//! apart field by field, without `..`, so a new field does not compile
//! until this list names it; the EXPLAIN test then fails until the new name
//! has a plan case or a stated reason to be left out. Statements the store
//! assembles at run time (the usage series, the roll-up's multi-row
//! inserts) are listed as assembled, from the same builder the store uses,
//! with one row where the row count varies.
//!
//! Two statements touch no table and are not listed: the health check's
//! `select 1` and the key-event announcement's `pg_notify`.

use sqlx::Postgres;

use super::dialect::Dialect;
use super::{
    claims, classes, hot_keys, quotas, recovery, rejections, tiering, usage, watch, webhooks,
};

/// One statement: `capability.field` and its Postgres text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub name: &'static str,
    pub sql: String,
}

/// Every Postgres statement the store runs on a table.
pub fn postgres() -> Vec<Statement> {
    let mut all = Vec::new();
    let mut add = |name: &'static str, sql: &str| {
        all.push(Statement {
            name,
            sql: sql.to_owned(),
        })
    };

    let claims::Statements {
        insert_claim,
        find,
        renew_expired,
        take_over,
        quarantine_expired,
        complete,
        heartbeat,
        release,
    } = <Postgres as Dialect>::CLAIMS;
    add("claims.insert_claim", insert_claim);
    add("claims.find", find);
    add("claims.renew_expired", renew_expired);
    add("claims.take_over", take_over);
    add("claims.quarantine_expired", quarantine_expired);
    add("claims.complete", complete);
    add("claims.heartbeat", heartbeat);
    add("claims.release", release);
    // The batched forms of the claim and the completion (Postgres only:
    // SQLite batches the single statements in one transaction).
    add("claims.insert_claims", claims::postgres_sql::INSERT_CLAIMS);
    add(
        "claims.complete_batch",
        claims::postgres_sql::COMPLETE_BATCH,
    );

    let recovery::Statements {
        record_step,
        quarantine,
        resolve_complete,
        resolve_release,
        keep_release,
        list,
    } = <Postgres as Dialect>::RECOVERY;
    add("recovery.record_step", record_step);
    add("recovery.quarantine", quarantine);
    add("recovery.resolve_complete", resolve_complete);
    add("recovery.resolve_release", resolve_release);
    add("recovery.keep_release", keep_release);
    add("recovery.list", list);

    let classes::Statements {
        find,
        put,
        list,
        delete,
        remember_rules,
        rules,
    } = <Postgres as Dialect>::CLASSES;
    add("classes.find", find);
    add("classes.put", put);
    add("classes.list", list);
    add("classes.delete", delete);
    add("classes.remember_rules", remember_rules);
    add("classes.rules", rules);

    let watch::Statements { summary, expired } = <Postgres as Dialect>::WATCH;
    add("watch.summary", summary);
    add("watch.expired", expired);

    // `insert`, `row_times` and `updated_now` are parts of the flush's
    // upsert; `series_head`, `sum` and `series_tail` of the series.
    let usage::Statements {
        insert: _,
        row_times: _,
        updated_now: _,
        sum: _,
        series_head: _,
        series_tail: _,
        prune,
        hot_counts,
    } = <Postgres as Dialect>::USAGE;
    add("usage.add", &usage::add_sql::<Postgres>(1));
    add("usage.series", &usage::series_sql::<Postgres>());
    add("usage.prune", prune);
    add("usage.hot_counts", hot_counts);

    // `read_due_in_transaction` says where `select_due` runs; it is no
    // statement.
    let tiering::Statements {
        select_due,
        read_due_in_transaction: _,
        lock_segment,
        reserve,
        make_live,
        slim,
        delete_expired,
        condemn_candidates,
        condemn,
        forget,
        lag,
    } = <Postgres as Dialect>::TIERING;
    add("tiering.select_due", select_due);
    if let Some(lock_segment) = lock_segment {
        add("tiering.lock_segment", lock_segment);
    }
    add("tiering.reserve", reserve);
    add("tiering.make_live", make_live);
    add("tiering.slim", slim);
    add("tiering.delete_expired", delete_expired);
    if let Some(condemn_candidates) = condemn_candidates {
        add("tiering.condemn_candidates", condemn_candidates);
    }
    add("tiering.condemn", condemn);
    add("tiering.forget", forget);
    add("tiering.lag", lag);

    let rejections::Statements {
        recent,
        prune_old,
        prune_surplus,
    } = <Postgres as Dialect>::REJECTIONS;
    add("rejections.add", &rejections::add_sql::<Postgres>(1));
    add("rejections.recent", recent);
    add("rejections.prune_old", prune_old);
    add("rejections.prune_surplus", prune_surplus);

    // `add` and `on_conflict` are the two halves of the roll-up's upsert.
    let hot_keys::Statements {
        add: _,
        on_conflict: _,
        top,
        prune,
    } = <Postgres as Dialect>::HOT_KEYS;
    add("hot_keys.add", &hot_keys::add_sql::<Postgres>(1));
    add("hot_keys.top", top);
    add("hot_keys.prune", prune);

    let webhooks::Statements {
        insert_endpoint,
        endpoints,
        endpoint,
        delete_endpoint,
        queue_quarantined,
        queue_stuck,
        queue_taken_over,
        queue_spikes,
        take_due,
        finish,
        deliveries,
        counts,
        prune,
    } = <Postgres as Dialect>::WEBHOOKS;
    add("webhooks.insert_endpoint", insert_endpoint);
    add("webhooks.endpoints", endpoints);
    add("webhooks.endpoint", endpoint);
    add("webhooks.delete_endpoint", delete_endpoint);
    add("webhooks.queue_quarantined", queue_quarantined);
    add("webhooks.queue_stuck", queue_stuck);
    add("webhooks.queue_taken_over", queue_taken_over);
    add("webhooks.queue_spikes", queue_spikes);
    add("webhooks.take_due", take_due);
    add("webhooks.finish", finish);
    add("webhooks.deliveries", deliveries);
    add("webhooks.counts", counts);
    add("webhooks.prune", prune);

    let quotas::Statements {
        measure,
        zero_missing,
        all_storage,
        all_quotas,
        storage_of,
        quota_of,
        set_quota,
        clear_quota,
    } = <Postgres as Dialect>::QUOTAS;
    add("quotas.measure", measure);
    add("quotas.zero_missing", zero_missing);
    add("quotas.all_storage", all_storage);
    add("quotas.all_quotas", all_quotas);
    add("quotas.storage_of", storage_of);
    add("quotas.quota_of", quota_of);
    add("quotas.set_quota", set_quota);
    add("quotas.clear_quota", clear_quota);

    all
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    #[test]
    fn every_statement_has_one_name() {
        let all = super::postgres();
        let names: HashSet<_> = all.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), all.len(), "a name is listed twice");
        assert!(all.iter().all(|s| !s.sql.trim().is_empty()));
    }
}
