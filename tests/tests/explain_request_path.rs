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
//! a plan case nor a reason to be left out (both listed in
//! `tests/src/explain/cases.rs`) fails
//! `every_statement_is_explained_or_deliberately_excluded`.

use std::collections::{BTreeSet, HashSet};

use idemkey_api::store::catalogue;
use idemkey_tests::explain::cases::{self, cases, Case, Reach};
use idemkey_tests::explain::{family, seeded, Catalog, Touches, TENANT};

#[test]
fn every_statement_is_explained_or_deliberately_excluded() {
    let listed: BTreeSet<&str> = catalogue::postgres().iter().map(|s| s.name).collect();
    let explained: BTreeSet<&str> = cases().iter().map(|c| c.name).collect();
    let excluded: BTreeSet<&str> = cases::excluded().map(|e| e.0).collect();
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
    for (name, why) in cases::excluded() {
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
        "{:<28} {:<22} {:<19} indexes",
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
        let used = if !used.is_empty() {
            used.into_iter().collect::<Vec<_>>().join(", ")
        } else if touches.on_conflict.is_some() {
            // No conflict target: every unique index of the partition the
            // row goes to is checked, and each includes the tenant
            // (`distributable_schema.rs`).
            "(inserts one row; a conflict on any unique key)".to_owned()
        } else {
            "(inserts one row, reads none)".to_owned()
        };
        println!("{:<28} {:<22} {:<19} {used}", c.name, c.variant, reach);
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

/// The batch completion runs `claims.complete`'s update once per element
/// with a plan made once per connection (the function is set to
/// `plan_cache_mode = force_generic_plan`; replanning every element cost a
/// quarter of the database's CPU in the new-keys benchmark). That generic
/// plan, made without the element's values, must still reach one
/// partition and find the row by its primary key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_batch_completions_one_plan_reads_one_key_by_its_primary_key() {
    let mut conn = seeded().await;
    let config: Vec<String> = sqlx::query_scalar(
        "select unnest(proconfig) from pg_proc where proname = 'idemkey_complete_batch'",
    )
    .fetch_all(&mut conn)
    .await
    .expect("the function's settings");
    assert_eq!(config, ["plan_cache_mode=force_generic_plan"]);

    let case = cases()
        .into_iter()
        .find(|c| c.name == "claims.complete")
        .expect("a case of claims.complete");
    let statements = catalogue::postgres();
    let sql = &statements
        .iter()
        .find(|s| s.name == case.name)
        .expect("claims.complete in the catalogue")
        .sql;
    sqlx::raw_sql("set plan_cache_mode = force_generic_plan")
        .execute(&mut conn)
        .await
        .expect("generic plans");
    let plan = Catalog::explain(&mut conn, sql, &case.params).await;
    let touches = Touches::of(&plan);
    let scanned: Vec<(String, Vec<String>)> = touches
        .scans
        .iter()
        .map(|s| {
            let indexes = s.indexes.iter().map(|i| family(&i.0)).collect();
            (s.relation.clone(), indexes)
        })
        .collect();
    println!("generic plan of claims.complete scans {scanned:?}");
    assert_eq!(scanned.len(), 1, "one partition scanned: {plan}");
    assert_eq!(scanned[0].1, ["idempotency_key_pN_pkey"], "{plan}");
    let pruned = plan.to_string().contains("\"Subplans Removed\":15");
    assert!(pruned, "the other 15 partitions pruned at start: {plan}");
}
