//! Generators for the canonicaliser's properties: JSON values written in
//! several styles, number literals with their parts, rules and near-JSON.

use proptest::prelude::*;
use proptest::sample::{select, Index};

use super::super::FingerprintRules;

/// A JSON value as its text is built: numbers keep their literal spelling,
/// object members their generated order (keys are distinct).
#[derive(Debug, Clone)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

/// How a value is written: member order, spacing and string escapes vary,
/// the meaning does not.
#[derive(Debug, Clone, Copy)]
pub(super) struct Style {
    shuffle: Option<u64>,
    spaced: bool,
    escape_all: bool,
}

pub(super) const PLAIN: Style = Style {
    shuffle: None,
    spaced: false,
    escape_all: false,
};

impl Json {
    pub(super) fn text(&self, style: Style) -> String {
        let mut out = String::new();
        self.write(&mut out, style);
        out
    }

    fn write(&self, out: &mut String, style: Style) {
        let gap = if style.spaced { " \n\t\r" } else { "" };
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Num(n) => out.push_str(n),
            Json::Str(s) => write_string(out, s, style.escape_all),
            Json::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i > 0 { "," } else { "" });
                    out.push_str(gap);
                    item.write(out, style);
                }
                out.push_str(gap);
                out.push(']');
            }
            Json::Obj(members) => {
                let mut order: Vec<usize> = (0..members.len()).collect();
                if let Some(seed) = style.shuffle {
                    shuffle(&mut order, seed);
                }
                out.push('{');
                for (i, &m) in order.iter().enumerate() {
                    let (key, value) = &members[m];
                    out.push_str(if i > 0 { "," } else { "" });
                    out.push_str(gap);
                    write_string(out, key, style.escape_all);
                    out.push_str(gap);
                    out.push(':');
                    out.push_str(gap);
                    value.write(out, style);
                }
                out.push_str(gap);
                out.push('}');
            }
        }
    }

    /// Every JSON pointer that resolves in this value, `""` included.
    fn pointers(&self, prefix: &str, out: &mut Vec<String>) {
        out.push(prefix.to_owned());
        match self {
            Json::Arr(items) => {
                for (i, item) in items.iter().enumerate() {
                    item.pointers(&format!("{prefix}/{i}"), out);
                }
            }
            Json::Obj(members) => {
                for (key, value) in members {
                    value.pointers(&format!("{prefix}/{}", token(key)), out);
                }
            }
            _ => {}
        }
    }
}

/// RFC 6901 escaping of one reference token.
pub(super) fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// serde_json's escapes, or every UTF-16 unit as `\uXXXX` (surrogate pairs
/// for characters beyond the BMP).
fn write_string(out: &mut String, s: &str, escape_all: bool) {
    if !escape_all {
        out.push_str(&serde_json::to_string(s).expect("strings serialise"));
        return;
    }
    out.push('"');
    for unit in s.encode_utf16() {
        out.push_str(&format!("\\u{unit:04X}"));
    }
    out.push('"');
}

/// Fisher-Yates with a xorshift generator: a permutation fixed by `seed`.
fn shuffle(order: &mut [usize], mut seed: u64) {
    for i in (1..order.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

/// Characters that stress escaping and UTF-16 key order.
const TRICKY: &[char] = &[
    '"',
    '\\',
    '/',
    '\0',
    '\u{1f}',
    '\u{7f}',
    '\u{80}',
    '\u{2028}',
    '\u{fffd}',
    '\u{ff61}',
    '\u{10000}',
    '\u{1f600}',
    'é',
    'a',
    '~',
    '1',
    'e',
];

pub(super) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{0,6}",
        any::<String>(),
        prop::collection::vec(select(TRICKY), 0..6).prop_map(String::from_iter),
        "-?0{0,2}[0-9]{1,3}(\\.[0-9]{1,3}0{0,2})?",
    ]
}

/// A number literal with its parts, so tests can know its exact value
/// without reading it back from the text.
#[derive(Debug, Clone)]
pub(in crate::domain::fingerprint) struct Literal {
    pub(in crate::domain::fingerprint) negative: bool,
    pub(in crate::domain::fingerprint) int: String,
    pub(in crate::domain::fingerprint) frac: String,
    /// Exponent marker (`e` or `E`), sign (`""`, `+` or `-`) and digits.
    pub(in crate::domain::fingerprint) exp: Option<(char, &'static str, String)>,
}

impl Literal {
    pub(in crate::domain::fingerprint) fn text(&self) -> String {
        let sign = if self.negative { "-" } else { "" };
        let point = if self.frac.is_empty() { "" } else { "." };
        let exp = match &self.exp {
            Some((e, sign, digits)) => format!("{e}{sign}{digits}"),
            None => String::new(),
        };
        format!("{sign}{}{point}{}{exp}", self.int, self.frac)
    }
}

/// Any literal the JSON grammar allows: huge, tiny, long, with exponents;
/// exact or not.
pub(in crate::domain::fingerprint) fn literal() -> impl Strategy<Value = Literal> {
    let exp = (
        select(&['e', 'E'][..]),
        select(&["", "+", "-"][..]),
        prop_oneof!["[0-9]{1,2}", "[0-3][0-9]{2}", "[0-9]{4,6}"],
    );
    (
        any::<bool>(),
        prop_oneof![Just("0".to_owned()), "[1-9][0-9]{0,24}"],
        prop_oneof![Just(String::new()), "[0-9]{1,24}"],
        proptest::option::of(exp),
    )
        .prop_map(|(negative, int, frac, exp)| Literal {
            negative,
            int,
            frac,
            exp,
        })
}

/// Finite doubles only: JSON has no infinities or NaN.
pub(in crate::domain::fingerprint) fn double() -> impl Strategy<Value = f64> {
    use proptest::num::f64::{NEGATIVE, NORMAL, POSITIVE, SUBNORMAL, ZERO};
    POSITIVE | NEGATIVE | NORMAL | SUBNORMAL | ZERO
}

/// Mostly numbers a double holds exactly (so documents usually pass),
/// sometimes any literal.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => (double(), 0..4u8).prop_map(|(d, how)| match how {
            0 => serde_json_canonicalizer::to_string(&d).expect("finite doubles print"),
            1 => format!("{d:e}"),
            2 => format!("{d:?}"),
            _ => format!("{d:E}"),
        }),
        2 => (-100i64..100).prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => literal().prop_map(|l| l.text()),
    ]
}

pub(super) fn json() -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number().prop_map(Json::Num),
        text().prop_map(Json::Str),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Arr),
            prop::collection::btree_map(text(), inner, 0..6)
                .prop_map(|members| Json::Obj(members.into_iter().collect())),
        ]
    })
}

pub(super) fn style() -> impl Strategy<Value = Style> {
    (any::<u64>(), any::<bool>(), any::<bool>()).prop_map(|(seed, spaced, escape_all)| Style {
        shuffle: Some(seed),
        spaced,
        escape_all,
    })
}

/// Random pointer-like strings, valid or not.
pub(super) fn pointer() -> impl Strategy<Value = String> {
    prop_oneof!["(/[a-z0-9~]{0,3}){0,3}", "[a-z/~01]{0,5}", any::<String>()]
}

/// A document and rules whose pointers mostly resolve in it.
pub(super) fn doc_and_rules() -> impl Strategy<Value = (Json, FingerprintRules)> {
    json().prop_flat_map(|doc| {
        let mut found = Vec::new();
        doc.pointers("", &mut found);
        let list = || {
            prop::collection::vec(
                prop_oneof![4 => select(found.clone()), 1 => pointer()],
                0..3,
            )
        };
        (Just(doc), list(), list(), list()).prop_map(|(doc, include, exclude, decimal_fields)| {
            let rules = FingerprintRules {
                include,
                exclude,
                decimal_fields,
            };
            (doc, rules)
        })
    })
}

pub(super) const JSON_CHARS: &[char] = &[
    '{', '}', '[', ']', '"', ',', ':', '\\', '-', '+', '.', 'e', 'E', '0', '1', '9', ' ', 't', 'n',
    'u', 'é',
];

/// Valid JSON with a few characters deleted, inserted or replaced.
pub(super) fn near_json() -> impl Strategy<Value = String> {
    let edit = (any::<Index>(), 0..3u8, select(JSON_CHARS));
    (json(), prop::collection::vec(edit, 1..4)).prop_map(|(doc, edits)| {
        let mut chars: Vec<char> = doc.text(PLAIN).chars().collect();
        for (at, kind, c) in edits {
            let i = at.index(chars.len() + 1);
            match kind {
                0 if i < chars.len() => {
                    chars.remove(i);
                }
                2 if i < chars.len() => chars[i] = c,
                _ => chars.insert(i, c),
            }
        }
        chars.into_iter().collect()
    })
}
