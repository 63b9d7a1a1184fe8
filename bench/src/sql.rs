//! pgbench scripts generated from the service's own SQL constants
//! (`idemkey_api::store::postgres_sql`), so the database limit is measured
//! with exactly the statements a claim, a completion and a replay issue.
//!
//! Two rewrites make a service statement a pgbench command, and neither
//! changes what the server plans or executes:
//!
//! - every `$N` outside a string literal becomes `:var::type`, where `type`
//!   is what sqlx binds for that parameter (text, bytea, int8), so the server
//!   sees the same typed statement the service prepares;
//! - a string literal holding a colon (`'HH24:MI:SS'`) becomes the equal
//!   Unicode-escaped literal (`U&'HH24\003AMI\003ASS'`): pgbench does not
//!   parse quotes and would read `:MI` as a variable.
//!
//! Every `$N` must have a binding and every binding must be used: a new
//! parameter in the service's SQL fails the script generation (and the unit
//! tests) instead of silently benchmarking something else.

use std::collections::BTreeSet;
use std::fmt::Write;

use idemkey_api::store::postgres_sql;

/// How parameter `$n` of a statement is supplied by the pgbench script.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    pub n: usize,
    /// The pgbench variable (set with `\set` or `-D`).
    pub var: &'static str,
    /// The Postgres type sqlx binds for it.
    pub pg_type: &'static str,
}

const fn bind(n: usize, var: &'static str, pg_type: &'static str) -> Binding {
    Binding { n, var, pg_type }
}

/// `$n` bound to SQL NULL, as the service binds it for the default
/// fingerprint rules (pgbench variables cannot be NULL in prepared mode).
const fn null(n: usize, pg_type: &'static str) -> Binding {
    Binding {
        n,
        var: "",
        pg_type,
    }
}

/// `$1..$3` of every statement: the scoped key.
const SCOPED: [Binding; 3] = [
    bind(1, "tenant", "text"),
    bind(2, "operation", "text"),
    bind(3, "key", "text"),
];

/// INSERT_CLAIM's parameters, as `PgStore::insert_claim` binds them.
pub const INSERT_CLAIM_BINDINGS: [Binding; 10] = [
    SCOPED[0],
    SCOPED[1],
    SCOPED[2],
    bind(4, "fingerprint", "bytea"),
    bind(5, "owner_hash", "bytea"),
    bind(6, "lease_ms", "int8"),
    bind(7, "window_ms", "int8"),
    bind(8, "tier_ms", "int8"),
    null(9, "bytea"),
    // No field digests: a claim that sends a precomputed fingerprint.
    null(10, "text"),
];

/// COMPLETE's parameters, as `PgStore::complete` binds them.
pub const COMPLETE_BINDINGS: [Binding; 6] = [
    SCOPED[0],
    SCOPED[1],
    SCOPED[2],
    bind(4, "owner_hash", "bytea"),
    bind(5, "outcome", "text"),
    bind(6, "outcome_hash", "bytea"),
];

/// FIND's parameters, as `PgStore::find` binds them.
pub const FIND_BINDINGS: [Binding; 3] = SCOPED;

#[derive(Debug, PartialEq, Eq)]
pub enum SubstError {
    /// `$N` in the SQL with no binding.
    Unbound(usize),
    /// A binding whose `$N` the SQL never uses.
    Unused(usize),
    /// Something this rewriter does not understand (E'' strings, dollar
    /// quotes, an unterminated literal): refuse rather than guess.
    Unsupported(&'static str),
}

impl std::fmt::Display for SubstError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unbound(n) => write!(f, "${n} has no pgbench binding"),
            Self::Unused(n) => write!(f, "binding for ${n} is not used by the statement"),
            Self::Unsupported(what) => write!(f, "cannot rewrite for pgbench: {what}"),
        }
    }
}

impl std::error::Error for SubstError {}

/// Rewrites one service statement as a pgbench SQL command (one line).
pub fn to_pgbench(sql: &str, bindings: &[Binding]) -> Result<String, SubstError> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = String::with_capacity(sql.len() + 64);
    let mut used = BTreeSet::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '$' => {
                let digits: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                if digits.is_empty() {
                    return Err(SubstError::Unsupported("dollar quoting"));
                }
                let n: usize = digits
                    .parse()
                    .map_err(|_| SubstError::Unsupported("parameter number"))?;
                let b = bindings
                    .iter()
                    .find(|b| b.n == n)
                    .ok_or(SubstError::Unbound(n))?;
                used.insert(n);
                let _ = match b.var {
                    "" => write!(out, "NULL::{}", b.pg_type),
                    var => write!(out, ":{var}::{}", b.pg_type),
                };
                i += 1 + digits.len();
            }
            '\'' => {
                if matches!(out.chars().last(), Some('E' | 'e')) {
                    return Err(SubstError::Unsupported("E'' string literal"));
                }
                let (literal, next) = read_literal(&chars, i)?;
                push_literal(&mut out, &literal);
                i = next;
            }
            // pgbench commands are one line; SQL whitespace is interchangeable.
            '\n' | '\r' | '\t' => {
                out.push(' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    if let Some(b) = bindings.iter().find(|b| !used.contains(&b.n)) {
        return Err(SubstError::Unused(b.n));
    }
    Ok(out)
}

/// The value of the literal starting at `chars[start]` (a quote) and the
/// index just past it; `''` inside is one quote.
fn read_literal(chars: &[char], start: usize) -> Result<(String, usize), SubstError> {
    let mut value = String::new();
    let mut i = start + 1;
    loop {
        match chars.get(i) {
            None => return Err(SubstError::Unsupported("unterminated string literal")),
            Some('\'') if chars.get(i + 1) == Some(&'\'') => {
                value.push('\'');
                i += 2;
            }
            Some('\'') => return Ok((value, i + 1)),
            Some(&c) => {
                value.push(c);
                i += 1;
            }
        }
    }
}

fn push_literal(out: &mut String, value: &str) {
    let quoted = value.replace('\'', "''");
    if !value.contains(':') {
        let _ = write!(out, "'{quoted}'");
        return;
    }
    // U&'' with the default escape character: `\` must be doubled, `:` is
    // written as its code point so pgbench never sees a colon.
    let escaped = quoted.replace('\\', "\\\\").replace(':', "\\003A");
    let _ = write!(out, "U&'{escaped}'");
}

/// The constant parameter values of a run, passed with `-D` (pgbench sends
/// them as text; the casts in the script give them their types).
#[derive(Debug, Clone)]
pub struct ScriptValues {
    pub tenant: String,
    pub operation: String,
    /// Bytea in hex input form (`\x…`).
    pub fingerprint_hex: String,
    pub owner_hash_hex: String,
    pub lease_ms: i64,
    pub window_ms: i64,
    pub tier_ms: i64,
    pub outcome: String,
    pub outcome_hash_hex: String,
}

impl ScriptValues {
    /// `-D name=value` arguments for pgbench.
    pub fn defines(&self) -> Vec<String> {
        [
            ("tenant", self.tenant.clone()),
            ("operation", self.operation.clone()),
            ("fingerprint", format!("\\x{}", self.fingerprint_hex)),
            ("owner_hash", format!("\\x{}", self.owner_hash_hex)),
            ("lease_ms", self.lease_ms.to_string()),
            ("window_ms", self.window_ms.to_string()),
            ("tier_ms", self.tier_ms.to_string()),
            ("outcome", self.outcome.clone()),
            ("outcome_hash", format!("\\x{}", self.outcome_hash_hex)),
        ]
        .into_iter()
        .flat_map(|(k, v)| ["-D".to_owned(), format!("{k}={v}")])
        .collect()
    }
}

/// A new key, as the service handles it: INSERT_CLAIM, then COMPLETE, each
/// its own autocommitted statement. Keys are random 62-bit integers (as
/// text), so inserts land all over the index, like the service's random keys.
pub fn claim_complete_script() -> Result<String, SubstError> {
    Ok(format!(
        "\\set key random(1, 4611686018427387903)\n{};\n{};\n",
        to_pgbench(postgres_sql::INSERT_CLAIM, &INSERT_CLAIM_BINDINGS)?,
        to_pgbench(postgres_sql::COMPLETE, &COMPLETE_BINDINGS)?,
    ))
}

/// The replay read (what an in-house table lookup costs): FIND of one of the
/// keys `1..=keys` (filled by `db::fill`, whose keys are the numbers as text).
pub fn find_script(keys: u64) -> Result<String, SubstError> {
    Ok(format!(
        "\\set key random(1, {keys})\n{};\n",
        to_pgbench(postgres_sql::FIND, &FIND_BINDINGS)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: [Binding; 2] = [bind(1, "a", "text"), bind(2, "b", "int8")];

    #[test]
    fn parameters_become_typed_pgbench_variables() {
        let got = to_pgbench("select $1, $2 * interval '1 millisecond', $2", &TWO);
        assert_eq!(
            got.unwrap(),
            "select :a::text, :b::int8 * interval '1 millisecond', :b::int8"
        );
    }

    #[test]
    fn two_digit_parameters_are_not_read_as_one_digit() {
        let mut many: Vec<Binding> = (1..=12).map(|n| bind(n, "v", "int8")).collect();
        many[9].var = "ten";
        let got = to_pgbench("select $1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12", &many).unwrap();
        assert!(got.contains(",:ten::int8,"), "{got}");
    }

    #[test]
    fn colons_in_literals_are_hidden_from_pgbench() {
        let got = to_pgbench("select to_char(now(), 'HH24:MI:SS'), $1, $2", &TWO).unwrap();
        assert_eq!(
            got,
            r"select to_char(now(), U&'HH24\003AMI\003ASS'), :a::text, :b::int8"
        );
    }

    #[test]
    fn quotes_and_backslashes_in_rewritten_literals_survive() {
        let got = to_pgbench(r"select 'it''s a:\b', $1, $2", &TWO).unwrap();
        assert_eq!(got, r"select U&'it''s a\003A\\b', :a::text, :b::int8");
    }

    #[test]
    fn dollars_inside_literals_are_not_parameters() {
        let got = to_pgbench("select '$1', $1, $2", &TWO).unwrap();
        assert_eq!(got, "select '$1', :a::text, :b::int8");
    }

    #[test]
    fn newlines_become_spaces() {
        let got = to_pgbench("select $1,\n  $2", &TWO).unwrap();
        assert_eq!(got, "select :a::text,   :b::int8");
    }

    #[test]
    fn a_parameter_without_binding_is_refused() {
        assert_eq!(
            to_pgbench("select $1, $2, $3", &TWO),
            Err(SubstError::Unbound(3))
        );
    }

    #[test]
    fn an_unused_binding_is_refused() {
        assert_eq!(to_pgbench("select $1", &TWO), Err(SubstError::Unused(2)));
    }

    #[test]
    fn what_it_cannot_rewrite_is_refused() {
        for sql in ["select $$x$$", "select E'a:b'", "select 'open"] {
            assert!(
                matches!(to_pgbench(sql, &[]), Err(SubstError::Unsupported(_))),
                "{sql}"
            );
        }
    }

    #[test]
    fn the_services_statements_rewrite_with_every_parameter_bound() {
        let script = claim_complete_script().unwrap();
        assert!(script.contains("insert into idempotency_key"));
        assert!(script.contains("update idempotency_key set state = 'completed'"));
        let find = find_script(10).unwrap();
        assert!(find.contains(":key::text"));
        for line in script
            .lines()
            .chain(find.lines())
            .filter(|l| !l.starts_with('\\'))
        {
            for var in pgbench_variables(line) {
                assert!(
                    INSERT_CLAIM_BINDINGS
                        .iter()
                        .chain(&COMPLETE_BINDINGS)
                        .any(|b| b.var == var),
                    "unexpected pgbench variable {var:?} in {line}"
                );
            }
        }
    }

    /// The variables pgbench will substitute: `:name`, where `::` is a cast.
    fn pgbench_variables(line: &str) -> Vec<String> {
        let chars: Vec<char> = line.chars().collect();
        let mut vars = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            if chars[i] != ':' {
                i += 1;
            } else if chars.get(i + 1) == Some(&':') {
                i += 2;
            } else {
                let name: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_alphanumeric() || **c == '_')
                    .collect();
                i += 1 + name.len();
                vars.push(name);
            }
        }
        vars
    }

    #[test]
    fn defines_are_pairs_of_flag_and_assignment() {
        let v = ScriptValues {
            tenant: "t".into(),
            operation: "op".into(),
            fingerprint_hex: "00".into(),
            owner_hash_hex: "01".into(),
            lease_ms: 1,
            window_ms: 2,
            tier_ms: 3,
            outcome: "{}".into(),
            outcome_hash_hex: "02".into(),
        };
        let d = v.defines();
        assert_eq!(d.len(), 18);
        assert_eq!(d[4..6], ["-D".to_owned(), r"fingerprint=\x00".to_owned()]);
    }
}
