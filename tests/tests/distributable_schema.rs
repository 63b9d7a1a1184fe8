//! The Postgres schema can be distributed by `tenant`, as Citus expects:
//! read from the catalog of a freshly migrated database, every table
//! holding a tenant's rows has a non-null `tenant` column in every primary
//! key and unique index (a node can only check uniqueness among the rows it
//! holds), and its foreign keys point at a shared table or, tenant to
//! tenant, at a co-located one. The few tables without a tenant are listed
//! here with the reason they are shared by every tenant, and
//! docs/architecture.md ("Past one Postgres") distributes exactly these.

use std::collections::{BTreeMap, BTreeSet};

use idemkey_api::store::Store;
use idemkey_tests::db::Backend;
use sqlx::Row;

/// Tables every tenant shares: Citus *reference* tables, a copy on every
/// node.
const REFERENCE: &[(&str, &str)] = &[
    (
        "fingerprint_rules",
        "content-addressed: a digest names the same rules whichever tenant's policy used them; \
         small, written when a policy is saved, read by a claim on any node",
    ),
    (
        "archive_segment",
        "one segment packs outcomes of many tenants, and every tenant's routing entry has a \
         foreign key to it, which a distributed table may only have to a reference table",
    ),
];

/// Tables that stay on the coordinator alone.
const LOCAL: &[(&str, &str)] = &[(
    "_sqlx_migrations",
    "which migrations ran; read by `idemkey migrate`, which runs its DDL on the coordinator",
)];

struct Table {
    name: String,
    tenant_not_null: Option<bool>,
}

/// A foreign key: its label, and the columns it links.
struct ForeignKey {
    label: String,
    src: String,
    src_cols: Vec<String>,
    dst: String,
    dst_cols: Vec<String>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_a_tenant_table_includes_the_tenant() {
    let store = idemkey_tests::stores::fresh(Backend::Postgres).await;
    let Store::Postgres(pg) = &store else {
        unreachable!("a Postgres store")
    };
    let pool = pg.pool();

    let tables: Vec<Table> = sqlx::query(
        "select c.relname::text as name, \
                (select a.attnotnull from pg_attribute a \
                  where a.attrelid = c.oid and a.attname = 'tenant' and not a.attisdropped) \
                  as tenant_not_null \
           from pg_class c \
          where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') \
            and not c.relispartition order by 1",
    )
    .fetch_all(pool)
    .await
    .expect("tables")
    .iter()
    .map(|r| Table {
        name: r.get("name"),
        tenant_not_null: r.get("tenant_not_null"),
    })
    .collect();

    // Every unique index (primary keys included) with its key columns.
    let unique: Vec<(String, String, Vec<String>)> = sqlx::query(
        "select t.relname::text as tbl, i.relname::text as idx, \
                array(select a.attname::text from unnest(x.indkey[0:x.indnkeyatts - 1]) with ordinality k(n, o) \
                        join pg_attribute a on a.attrelid = x.indrelid and a.attnum = k.n \
                        order by k.o) \
                  as cols \
           from pg_index x join pg_class i on i.oid = x.indexrelid \
           join pg_class t on t.oid = x.indrelid \
          where x.indisunique and t.relnamespace = 'public'::regnamespace \
            and not t.relispartition order by 1, 2",
    )
    .fetch_all(pool)
    .await
    .expect("unique indexes")
    .iter()
    .map(|r| (r.get("tbl"), r.get("idx"), r.get("cols")))
    .collect();

    // Every foreign key: from table and columns, to table and columns.
    let foreign: Vec<ForeignKey> = sqlx::query(
        "select f.conname::text as name, s.relname::text as src, d.relname::text as dst, \
                array(select a.attname::text from unnest(f.conkey) with ordinality k(n, o) \
                        join pg_attribute a on a.attrelid = f.conrelid and a.attnum = k.n \
                        order by k.o) \
                  as src_cols, \
                array(select a.attname::text from unnest(f.confkey) with ordinality k(n, o) \
                        join pg_attribute a on a.attrelid = f.confrelid and a.attnum = k.n \
                        order by k.o) \
                  as dst_cols \
           from pg_constraint f join pg_class s on s.oid = f.conrelid \
           join pg_class d on d.oid = f.confrelid \
          where f.contype = 'f' and s.relnamespace = 'public'::regnamespace \
            and not s.relispartition and f.conparentid = 0 order by 1",
    )
    .fetch_all(pool)
    .await
    .expect("foreign keys")
    .iter()
    .map(|r| {
        let name: String = r.get("name");
        let src: String = r.get("src");
        let dst: String = r.get("dst");
        ForeignKey {
            label: format!("{name} ({src} -> {dst})"),
            src,
            src_cols: r.get("src_cols"),
            dst,
            dst_cols: r.get("dst_cols"),
        }
    })
    .collect();

    let shared: BTreeMap<&str, &str> = REFERENCE.iter().chain(LOCAL).copied().collect();
    let distributed: BTreeSet<&str> = tables
        .iter()
        .filter(|t| t.tenant_not_null.is_some())
        .map(|t| t.name.as_str())
        .collect();
    let mut wrong = Vec::new();
    for t in &tables {
        match (t.tenant_not_null, shared.get(t.name.as_str())) {
            (Some(true), None) => {}
            (Some(false), _) => wrong.push(format!("{}.tenant may be null", t.name)),
            (Some(true), Some(_)) => {
                wrong.push(format!("{} has a tenant but is listed as shared", t.name))
            }
            (None, None) => wrong.push(format!(
                "{} has no tenant column and no reason to be shared by every tenant",
                t.name
            )),
            (None, Some(_)) => {}
        }
    }
    for (name, _) in shared.iter() {
        if !tables.iter().any(|t| t.name == *name) {
            wrong.push(format!("{name} is listed as shared but does not exist"));
        }
    }
    for (table, index, cols) in &unique {
        if distributed.contains(table.as_str()) && !cols.iter().any(|c| c == "tenant") {
            wrong.push(format!(
                "unique index {index} on {table} {cols:?} lacks the tenant"
            ));
        }
    }
    for ForeignKey {
        label: name,
        src,
        src_cols,
        dst,
        dst_cols,
    } in &foreign
    {
        let (from_tenant, to_tenant) = (
            distributed.contains(src.as_str()),
            distributed.contains(dst.as_str()),
        );
        let tenant_to_tenant = src_cols
            .iter()
            .zip(dst_cols)
            .any(|(s, d)| s == "tenant" && d == "tenant");
        if !from_tenant && to_tenant {
            wrong.push(format!("{name}: a shared table points at a tenant's rows"));
        }
        if from_tenant && to_tenant && !tenant_to_tenant {
            wrong.push(format!(
                "{name}: tenant rows point at other tenant rows without the tenant"
            ));
        }
        if from_tenant && !to_tenant && !REFERENCE.iter().any(|r| r.0 == dst) {
            wrong.push(format!(
                "{name}: points at {dst}, which is not a reference table"
            ));
        }
    }

    println!("distributed by tenant (co-located):");
    for table in &distributed {
        let keys: Vec<String> = unique
            .iter()
            .filter(|u| u.0 == *table)
            .map(|u| format!("{} ({})", u.1, u.2.join(", ")))
            .collect();
        let keys = if keys.is_empty() {
            "no unique key".to_owned()
        } else {
            keys.join("; ")
        };
        println!("  {table:<18} {keys}");
    }
    println!("reference (a copy on every node):");
    for (table, why) in REFERENCE {
        println!("  {table:<18} {why}");
    }
    println!("coordinator only:");
    for (table, why) in LOCAL {
        println!("  {table:<18} {why}");
    }
    println!("foreign keys:");
    for f in &foreign {
        println!("  {}", f.label);
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    let (doc_distributed, doc_reference) = documented_plan();
    let distributed: BTreeSet<String> = distributed.iter().map(|t| t.to_string()).collect();
    let reference: BTreeSet<String> = REFERENCE.iter().map(|r| r.0.to_owned()).collect();
    assert_eq!(
        doc_distributed, distributed,
        "docs/architecture.md distributes other tables"
    );
    assert_eq!(
        doc_reference, reference,
        "docs/architecture.md makes other reference tables"
    );
}

/// The tables docs/architecture.md distributes by tenant and makes
/// reference tables: the first argument of each `create_distributed_table`
/// call (whose second must be `'tenant'`) and `create_reference_table` call.
fn documented_plan() -> (BTreeSet<String>, BTreeSet<String>) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/architecture.md");
    let doc = std::fs::read_to_string(path).expect("docs/architecture.md");
    let calls = |function: &str| -> Vec<Vec<String>> {
        doc.split(&format!("{function}("))
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
            .map(|args| {
                args.split(',')
                    .map(|a| a.trim().trim_matches('\'').to_owned())
                    .collect()
            })
            .collect()
    };
    let mut distributed = BTreeSet::new();
    for args in calls("create_distributed_table") {
        assert_eq!(
            args.get(1).map(String::as_str),
            Some("tenant"),
            "distributed by tenant: {args:?}"
        );
        distributed.insert(args[0].clone());
    }
    let reference = calls("create_reference_table")
        .into_iter()
        .map(|a| a[0].clone())
        .collect();
    (distributed, reference)
}
