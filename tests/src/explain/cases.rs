//! The statements of the EXPLAIN test (`tests/tests/explain_request_path.rs`):
//! each statement a request runs, with the values a request would bind,
//! and the workers' statements it leaves out, each with its reason. Every
//! name is a `store::catalogue` name; the test fails for a catalogue name
//! found in neither list. The webhook and quota statements have files of
//! their own beside this one.

use super::Param;

mod excluded;
mod quotas;
mod webhooks;

pub use excluded::EXCLUDED;

/// How far a statement may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// One scoped key: one partition of `idempotency_key`.
    Key,
    /// One tenant's rows.
    Tenant,
    /// A table shared by every tenant, read or written by its own key.
    Shared,
}

/// A statement, one way a request runs it, and its parameters.
pub struct Case {
    pub name: &'static str,
    pub variant: &'static str,
    pub reach: Reach,
    pub params: Vec<Param>,
}

/// Every statement no request runs, with the reason: [`EXCLUDED`] and the
/// webhook and quota workers' and operator's.
pub fn excluded() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    EXCLUDED
        .iter()
        .chain(webhooks::EXCLUDED)
        .chain(quotas::EXCLUDED)
}

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

/// Every statement a request runs, once per way it is run (the listing's
/// filters, an owner's and an admin's resolve), webhooks' and quotas' too.
pub fn cases() -> Vec<Case> {
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
    let mut all = vec![
        case("claims.insert_claim", "new key", Key, new_claim()),
        case(
            "claims.insert_claims",
            "new keys, batched",
            Tenant,
            vec![
                p("text[]", "array['t07', 't07']"),
                p("text[]", "array['op2', 'op2']"),
                p("text[]", "array['k-fresh-1', 'k-fresh-2']"),
                p("bytea[]", "array[sha256('request'), sha256('request')]"),
                p(
                    "bytea[]",
                    "array[sha256('a new owner'), sha256('another owner')]",
                ),
                p("int8[]", "array[30000, 30000]"),
                p("int8[]", "array[86400000, 86400000]"),
                p("int8[]", "array[3600000, 3600000]"),
                p("bytea[]", "array[null, null]::bytea[]"),
                p("text[]", "array[null, null]::text[]"),
            ],
        ),
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
    ];
    all.extend(webhooks::cases());
    all.extend(quotas::cases());
    all
}
