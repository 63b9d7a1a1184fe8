//! Statements of the store's own capabilities that no request runs, each
//! with the reason (the webhook and quota ones are beside their cases).

/// Statements no request runs: the workers' and the usage roll-up's, which
/// work across tenants by design, each on every node at once.
pub const EXCLUDED: &[(&str, &str)] = &[
    (
        "claims.complete_batch",
        "one call of idemkey_complete_batch, whose every element runs the guarded update of \
         claims.complete (its plan is checked as that statement's); EXPLAIN does not see \
         inside a function",
    ),
    (
        "watch.summary",
        "lease watch: counts every tenant's stuck keys for the metrics",
    ),
    (
        "watch.expired",
        "lease watch: finds expired leases of every tenant, fairly",
    ),
    (
        "usage.add",
        "usage roll-up: adds each node's counts, many tenants per statement",
    ),
    (
        "usage.prune",
        "usage roll-up: deletes old minutes of every tenant",
    ),
    (
        "tiering.select_due",
        "tiering: picks due outcomes of every tenant",
    ),
    (
        "tiering.lock_segment",
        "tiering: an advisory lock, no table",
    ),
    ("tiering.reserve", "tiering: a segment row (shared table)"),
    ("tiering.make_live", "tiering: a segment row (shared table)"),
    (
        "tiering.slim",
        "tiering: routes a batch's rows of several tenants",
    ),
    (
        "tiering.delete_expired",
        "cleanup: deletes gone records of every tenant",
    ),
    (
        "tiering.condemn_candidates",
        "cleanup: segments nothing routes to",
    ),
    ("tiering.condemn", "cleanup: segments nothing routes to"),
    ("tiering.forget", "cleanup: a segment row (shared table)"),
    (
        "tiering.lag",
        "archive worker: its lag for the metrics, every tenant",
    ),
    (
        "rejections.add",
        "usage roll-up: adds refusals of many tenants",
    ),
    (
        "rejections.prune_old",
        "usage roll-up: deletes old refusals of every tenant",
    ),
    (
        "rejections.prune_surplus",
        "usage roll-up: keeps the newest per class",
    ),
    (
        "hot_keys.add",
        "usage roll-up: adds hot keys of many tenants",
    ),
    (
        "hot_keys.prune",
        "usage roll-up: deletes old minutes of every tenant",
    ),
];
