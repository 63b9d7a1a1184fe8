//! Reading Postgres's plans of the store's statements: a migrated database
//! with 64 tenants' rows ([`seeded`]), each statement prepared with the
//! types the store binds and explained with values a request would send
//! ([`Catalog::explain`]), and what each plan touches ([`Touch`]).
//!
//! PostgreSQL 15 has no `explain (generic_plan)`, so a statement is
//! `prepare`d and its first `execute` explained: the first executions of a
//! prepared statement are planned for their values, as the store's are.

use std::collections::{BTreeSet, HashMap, HashSet};

use idemkey_api::store::Store;
use serde_json::Value;
use sqlx::{Connection, PgConnection, Row};

use crate::db::Backend;

pub mod cases;

/// The tenant every explained statement is for.
pub const TENANT: &str = "t07";

/// A parameter: the type the store binds (sqlx names it in `Parse`) and an
/// SQL expression for its value.
pub type Param = (&'static str, &'static str);

/// A connection to a fresh, migrated Postgres database holding the rows of
/// `seed.sql`, analysed.
pub async fn seeded() -> PgConnection {
    let store = crate::stores::fresh(Backend::Postgres).await;
    let Store::Postgres(pg) = &store else {
        unreachable!("a Postgres store")
    };
    sqlx::raw_sql(include_str!("seed.sql"))
        .execute(pg.pool())
        .await
        .expect("seed rows for 64 tenants");
    let url = pg_url(&store).await;
    PgConnection::connect(&url).await.expect("connect")
}

async fn pg_url(store: &Store) -> String {
    let Store::Postgres(pg) = store else {
        unreachable!()
    };
    let name: String = sqlx::query_scalar("select current_database()")
        .fetch_one(pg.pool())
        .await
        .expect("database name");
    let admin = crate::db::admin_url();
    format!(
        "{}/{name}",
        admin.rsplit_once('/').expect("URL has a database").0
    )
}

/// What the catalog says about the schema's tables and indexes.
pub struct Catalog {
    /// Tables and partitions with a `tenant` column.
    pub tenant_tables: HashSet<String>,
    /// Every index's first key column.
    pub leading: HashMap<String, String>,
}

impl Catalog {
    pub async fn read(conn: &mut PgConnection) -> Self {
        let tenant_tables = sqlx::query_scalar(
            "select c.relname::text from pg_class c \
               join pg_attribute a on a.attrelid = c.oid \
              where a.attname = 'tenant' and c.relkind in ('r', 'p') \
                and c.relnamespace = 'public'::regnamespace",
        )
        .fetch_all(&mut *conn)
        .await
        .expect("tables with a tenant")
        .into_iter()
        .collect();
        let leading = sqlx::query(
            "select c.relname::text as index, a.attname::text as first from pg_index i \
               join pg_class c on c.oid = i.indexrelid \
               join pg_attribute a on a.attrelid = i.indrelid and a.attnum = i.indkey[0] \
              where c.relnamespace = 'public'::regnamespace",
        )
        .fetch_all(&mut *conn)
        .await
        .expect("indexes")
        .iter()
        .map(|r| (r.get("index"), r.get("first")))
        .collect();
        Self {
            tenant_tables,
            leading,
        }
    }

    /// The plan of `sql` run with `params`, planned for those values.
    pub async fn explain(conn: &mut PgConnection, sql: &str, params: &[Param]) -> Value {
        let types: Vec<&str> = params.iter().map(|p| p.0).collect();
        let values: Vec<&str> = params.iter().map(|p| p.1).collect();
        let prepare = if types.is_empty() {
            format!("prepare explained as {sql}")
        } else {
            format!("prepare explained ({}) as {sql}", types.join(", "))
        };
        sqlx::raw_sql(&prepare)
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{e}: {prepare}"));
        let execute = if values.is_empty() {
            "explain (format json) execute explained".to_owned()
        } else {
            format!(
                "explain (format json) execute explained ({})",
                values.join(", ")
            )
        };
        let row = sqlx::raw_sql(&execute)
            .fetch_one(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("{e}: {execute}"));
        sqlx::raw_sql("deallocate explained")
            .execute(&mut *conn)
            .await
            .expect("deallocate");
        // EXPLAIN's column is `json`, which sqlx reads as text unchecked.
        let text: String = row.try_get_unchecked(0).expect("plan text");
        serde_json::from_str(&text).expect("plan JSON")
    }
}

/// One node of a plan that reads or writes a table.
#[derive(Debug, Clone)]
pub struct Touch {
    pub node: String,
    pub relation: String,
    /// The indexes it reads (a bitmap scan's from its children), with the
    /// condition each is searched by.
    pub indexes: Vec<(String, String)>,
}

/// What a plan touches: every scan of a table, the partitions it writes,
/// and the arbiter indexes of an `on conflict`.
#[derive(Debug, Default)]
pub struct Touches {
    pub scans: Vec<Touch>,
    pub targets: BTreeSet<String>,
    pub arbiters: Vec<String>,
    /// `NOTHING` or `UPDATE` for an `insert … on conflict`.
    pub on_conflict: Option<String>,
    pub node_types: BTreeSet<String>,
}

impl Touches {
    pub fn of(plan: &Value) -> Self {
        let mut t = Touches::default();
        for root in plan.as_array().expect("a plan list") {
            t.walk(&root["Plan"]);
        }
        t
    }

    fn walk(&mut self, node: &Value) {
        let kind = node["Node Type"].as_str().unwrap_or_default().to_owned();
        self.node_types.insert(kind.clone());
        if let Some(targets) = node["Target Tables"].as_array() {
            self.targets.extend(targets.iter().filter_map(relation));
        }
        if kind == "ModifyTable" {
            if let Some(rel) = relation(node) {
                self.targets.insert(rel);
            }
            if let Some(resolution) = node["Conflict Resolution"].as_str() {
                self.on_conflict = Some(resolution.to_owned());
            }
            if let Some(arbiters) = node["Conflict Arbiter Indexes"].as_array() {
                let names = arbiters
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned));
                self.arbiters.extend(names);
            }
        } else if let Some(rel) = relation(node) {
            let mut indexes = Vec::new();
            bitmap_indexes(node, &mut indexes);
            self.scans.push(Touch {
                node: kind,
                relation: rel,
                indexes,
            });
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            self.walk(child);
        }
    }

    /// The partitions of `table` the plan reads or writes.
    pub fn partitions_of(&self, table: &str) -> BTreeSet<String> {
        let prefix = format!("{table}_p");
        self.scans
            .iter()
            .map(|s| &s.relation)
            .chain(&self.targets)
            .filter(|r| {
                r.strip_prefix(&prefix)
                    .is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()))
            })
            .cloned()
            .collect()
    }
}

fn relation(node: &Value) -> Option<String> {
    node["Relation Name"].as_str().map(str::to_owned)
}

/// The index a node reads, or those of the bitmap index scans below it.
fn bitmap_indexes(node: &Value, out: &mut Vec<(String, String)>) {
    if let Some(index) = node["Index Name"].as_str() {
        let cond = node["Index Cond"].as_str().unwrap_or_default();
        out.push((index.to_owned(), cond.to_owned()));
    }
    if matches!(
        node["Node Type"].as_str(),
        Some("Bitmap Heap Scan" | "BitmapAnd" | "BitmapOr")
    ) {
        for child in node["Plans"].as_array().into_iter().flatten() {
            bitmap_indexes(child, out);
        }
    }
}

/// An index name with its partition's number replaced by `N`, so sixteen
/// partitions' copies of one index print as one.
pub fn family(index: &str) -> String {
    let mut out = String::new();
    let mut rest = index;
    while let Some(at) = rest.find("_p") {
        let (head, tail) = rest.split_at(at + 2);
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 && tail[digits..].starts_with('_') {
            out.push('N');
        } else {
            out.push_str(&tail[..digits]);
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}
