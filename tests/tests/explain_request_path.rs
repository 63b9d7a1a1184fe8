//! Every statement a request runs reads one tenant's rows, through an index
//! whose first column is the tenant: the plans Postgres makes for them, on a
//! table holding 64 tenants' rows, show it.
//!
//! Why it matters: a statement that stays within one tenant costs the same
//! whatever the other tenants store, and it is what a database distributed
//! by tenant (Citus, docs/architecture.md "Past one Postgres") sends to one
//! node. A statement touching one scoped key must also reach one partition
//! of `idempotency_key`.
//!
//! The statements come from the store itself (`store::catalogue`), which
//! names every field of every capability's statements; a name with neither
//! a plan case here nor a reason in [`EXCLUDED`] fails
//! `every_statement_is_explained_or_deliberately_excluded`.

use std::collections::{BTreeSet, HashSet};

use idemkey_api::store::catalogue;
use idemkey_tests::explain::{family, seeded, Catalog, Param, Touches, TENANT};

/// How far a statement may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// One scoped key: one partition of `idempotency_key`.
    Key,
    /// One tenant's rows.
    Tenant,
    /// A table shared by every tenant, read or written by its own key.
    Shared,
}

struct Case {
    name: &'static str,
    variant: &'static str,
    reach: Reach,
    params: Vec<Param>,
}

/// Statements no request runs: the workers' and the usage roll-up's, which
/// work across tenants by design, each on every node at once.
const EXCLUDED: &[(&str, &str)] = &[
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

fn p(ty: &'static str, value: &'static str) -> Param {
    (ty, value)
}

/// A completed key of the tenant, and its owner's hash as seeded.
fn key(extra: &[Param]) -> Vec<Param> {
    let mut params = vec![p("text", "'t07'"), p("text", "'op1'"), p("text", "'k0123'")];
    params.extend_from_slice(extra);
    params
}

const OWNER: &str = "sha256(convert_to('owner 7/1/123', 'UTF8'))";
const OTHER: &str = "sha256('a new owner')";
const DIGEST: &str = "sha256('request')";

fn case(name: &'static str, variant: &'static str, reach: Reach, params: Vec<Param>) -> Case {
    Case {
        name,
        variant,
        reach,
        params,
    }
}

fn cases() -> Vec<Case> {
    use Reach::*;
    let new_claim = || {
        vec![
            p("text", "'t07'"),
            p("text", "'op2'"),
            p("text", "'k-fresh'"),
            p("bytea", DIGEST),
            p("bytea", OTHER),
            p("int8", "30000"),
            p("int8", "86400000"),
            p("int8", "3600000"),
            p("bytea", "null"),
            p("text", "null"),
        ]
    };
    let list = |class, state, expired, older, cursor: [&'static str; 3]| {
        vec![
            p("text", "'t07'"),
            p("text", class),
            p("text", state),
            p("bool", expired),
            p("int8", older),
            p("timestamptz", cursor[0]),
            p("text", cursor[1]),
            p("text", cursor[2]),
            p("int8", "51"),
        ]
    };
    let no_cursor = ["null", "null", "null"];
    let outcome = p("text", r#"'{"status_code":201,"body":{"id":1}}'"#);
    vec![
        case("claims.insert_claim", "new key", Key, new_claim()),
        case("claims.find", "replay, lookup", Key, key(&[])),
        case(
            "claims.renew_expired",
            "past the window",
            Key,
            key(&new_claim()[3..]),
        ),
        case(
            "claims.take_over",
            "expired lease",
            Key,
            key(&[
                p("int4", "1"),
                p("bytea", OTHER),
                p("int8", "30000"),
                p("bytea", OWNER),
            ]),
        ),
        case(
            "claims.quarantine_expired",
            "expired lease",
            Key,
            key(&[p("int4", "1"), p("bytea", OWNER)]),
        ),
        case(
            "claims.complete",
            "owner",
            Key,
            key(&[p("bytea", OWNER), outcome, p("bytea", DIGEST)]),
        ),
        case(
            "claims.heartbeat",
            "owner",
            Key,
            key(&[p("bytea", OWNER), p("int8", "null")]),
        ),
        case("claims.release", "owner", Key, key(&[p("bytea", OWNER)])),
        case(
            "recovery.record_step",
            "owner",
            Key,
            key(&[
                p("bytea", OWNER),
                p("text", "'charge'"),
                p("text", "'ch_1'"),
            ]),
        ),
        case(
            "recovery.quarantine",
            "owner",
            Key,
            key(&[p("bytea", OWNER), p("text", "'provider timed out'")]),
        ),
        case(
            "recovery.resolve_complete",
            "admin",
            Key,
            key(&[
                p("bytea", "null"),
                outcome,
                p("bytea", DIGEST),
                p("text", "'admin'"),
            ]),
        ),
        case(
            "recovery.resolve_release",
            "owner",
            Key,
            key(&[
                p("bytea", OWNER),
                p("text", "'owner'"),
                p("text", "'refunded'"),
            ]),
        ),
        case(
            "recovery.resolve_release",
            "admin",
            Key,
            key(&[p("bytea", "null"), p("text", "'admin'"), p("text", "null")]),
        ),
        case(
            "recovery.keep_release",
            "audit row",
            Key,
            key(&[
                p("int4", "1"),
                p("text", "'admin'"),
                p("text", "'refunded'"),
                p("text", "'[]'"),
            ]),
        ),
        case(
            "recovery.list",
            "newest",
            Tenant,
            list("null", "null", "false", "null", no_cursor),
        ),
        case(
            "recovery.list",
            "next page",
            Tenant,
            list(
                "null",
                "null",
                "false",
                "null",
                ["now() - interval '1 hour'", "'op1'", "'k0100'"],
            ),
        ),
        case(
            "recovery.list",
            "class, in progress",
            Tenant,
            list("'op1'", "'in_progress'", "false", "null", no_cursor),
        ),
        case(
            "recovery.list",
            "lease expired",
            Tenant,
            list("null", "'in_progress'", "true", "60000", no_cursor),
        ),
        case(
            "recovery.list",
            "quarantined",
            Tenant,
            list("null", "'quarantined'", "false", "null", no_cursor),
        ),
        case(
            "classes.find",
            "policy read",
            Tenant,
            vec![p("text", "'t07'"), p("text", "'op1'")],
        ),
        case(
            "classes.put",
            "policy write",
            Tenant,
            vec![
                p("text", "'t07'"),
                p("text", "'op1'"),
                p("text", r#"'{"lease":"10s"}'"#),
            ],
        ),
        case("classes.list", "policies", Tenant, vec![p("text", "'t07'")]),
        case(
            "classes.delete",
            "policy",
            Tenant,
            vec![p("text", "'t07'"), p("text", "'op1'")],
        ),
        case(
            "classes.remember_rules",
            "policy write",
            Shared,
            vec![
                p("bytea", DIGEST),
                p("text", r#"'{"include":["/amount"]}'"#),
            ],
        ),
        case(
            "classes.rules",
            "a record's rules",
            Shared,
            vec![p("bytea", "sha256(convert_to('rules 17', 'UTF8'))")],
        ),
        case(
            "usage.series",
            "dashboard, 4 hours",
            Tenant,
            vec![
                p("text", "'t07'"),
                p("timestamptz", "now() - interval '4 hours'"),
                p("int8", "300"),
            ],
        ),
        case(
            "usage.hot_counts",
            "dashboard storage",
            Tenant,
            vec![p("text", "'t07'")],
        ),
        case(
            "rejections.recent",
            "dashboard, all classes",
            Tenant,
            vec![p("text", "'t07'"), p("text", "null"), p("int8", "50")],
        ),
        case(
            "rejections.recent",
            "dashboard, one class",
            Tenant,
            vec![p("text", "'t07'"), p("text", "'op1'"), p("int8", "50")],
        ),
        case(
            "hot_keys.top",
            "dashboard, last hour",
            Tenant,
            vec![
                p("text", "'t07'"),
                p("timestamptz", "now() - interval '1 hour'"),
                p("int8", "5"),
            ],
        ),
    ]
}

#[test]
fn every_statement_is_explained_or_deliberately_excluded() {
    let listed: BTreeSet<&str> = catalogue::postgres().iter().map(|s| s.name).collect();
    let explained: BTreeSet<&str> = cases().iter().map(|c| c.name).collect();
    let excluded: BTreeSet<&str> = EXCLUDED.iter().map(|e| e.0).collect();
    let forgotten: Vec<_> = listed
        .iter()
        .filter(|n| !explained.contains(*n) && !excluded.contains(*n))
        .collect();
    assert!(
        forgotten.is_empty(),
        "statements with no plan case and no reason to be left out: {forgotten:?}"
    );
    let both: Vec<_> = explained.intersection(&excluded).collect();
    assert!(both.is_empty(), "explained and excluded at once: {both:?}");
    let stale: Vec<_> = explained
        .union(&excluded)
        .filter(|n| !listed.contains(*n))
        .collect();
    assert!(stale.is_empty(), "names the store no longer has: {stale:?}");
    println!(
        "{} statements: {} explained here, {} excluded:",
        listed.len(),
        explained.len(),
        excluded.len()
    );
    for (name, why) in EXCLUDED {
        println!("  {name:<28} {why}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_path_statement_reads_one_tenant_through_an_index() {
    let mut conn = seeded().await;
    let catalog = Catalog::read(&mut conn).await;
    let statements = catalogue::postgres();
    let mut problems = Vec::new();
    println!(
        "{:<28} {:<22} {:<14} indexes",
        "statement", "case", "partitions"
    );
    for c in cases() {
        let sql = &statements
            .iter()
            .find(|s| s.name == c.name)
            .unwrap_or_else(|| panic!("{} is not in the catalogue", c.name))
            .sql;
        let plan = Catalog::explain(&mut conn, sql, &c.params).await;
        let touches = Touches::of(&plan);
        let found = check(&c, &touches, &catalog);
        let partitions = touches.partitions_of("idempotency_key");
        let reach = match partitions.len() {
            0 => "-".to_owned(),
            1 => partitions.iter().next().cloned().unwrap_or_default(),
            n => format!("{n} of 16"),
        };
        let used: BTreeSet<String> = touches
            .scans
            .iter()
            .flat_map(|s| s.indexes.iter().map(|i| family(&i.0)))
            .chain(
                touches
                    .arbiters
                    .iter()
                    .map(|a| format!("{} (arbiter)", family(a))),
            )
            .collect();
        let used = if used.is_empty() {
            "(writes one row, reads none)".to_owned()
        } else {
            used.into_iter().collect::<Vec<_>>().join(", ")
        };
        println!("{:<28} {:<22} {:<14} {used}", c.name, c.variant, reach);
        problems.extend(
            found
                .into_iter()
                .map(|f| format!("{} ({}): {f}\n  plan: {plan}", c.name, c.variant)),
        );
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What is wrong with a case's plan, if anything.
fn check(c: &Case, t: &Touches, catalog: &Catalog) -> Vec<String> {
    let mut wrong = Vec::new();
    if t.node_types.contains("Seq Scan") {
        wrong.push("a sequential scan".to_owned());
    }
    let tenant_cond = format!("tenant = '{TENANT}'::text");
    for scan in &t.scans {
        if scan.indexes.is_empty() {
            wrong.push(format!(
                "{} reads {} without an index",
                scan.node, scan.relation
            ));
        }
        if !catalog.tenant_tables.contains(&scan.relation) {
            if c.reach != Reach::Shared {
                wrong.push(format!("reads the shared table {}", scan.relation));
            }
            continue;
        }
        for (index, cond) in &scan.indexes {
            if catalog.leading.get(index).map(String::as_str) != Some("tenant") {
                wrong.push(format!(
                    "{index} on {} does not lead with tenant",
                    scan.relation
                ));
            }
            if !cond.contains(&tenant_cond) {
                wrong.push(format!("{index} is not searched by the tenant: {cond:?}"));
            }
        }
    }
    let writes_tenant_rows = t.targets.iter().any(|r| catalog.tenant_tables.contains(r));
    for arbiter in &t.arbiters {
        if writes_tenant_rows && catalog.leading.get(arbiter).map(String::as_str) != Some("tenant")
        {
            wrong.push(format!("arbiter {arbiter} does not lead with tenant"));
        }
    }
    let partitions: HashSet<String> = t.partitions_of("idempotency_key").into_iter().collect();
    if c.reach == Reach::Key && partitions.len() > 1 {
        wrong.push(format!(
            "one key, {} partitions: {partitions:?}",
            partitions.len()
        ));
    }
    let reads_keys = t
        .scans
        .iter()
        .any(|s| s.relation.starts_with("idempotency_key"));
    if c.reach == Reach::Key && reads_keys && partitions.len() != 1 {
        wrong.push("one key, but no single partition".to_owned());
    }
    wrong
}
