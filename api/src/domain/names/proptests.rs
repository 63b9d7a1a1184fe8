//! Names under random input: each parser accepts exactly what its grammar
//! allows, checked against a predicate written here over `char`s (the
//! parsers work on bytes). Step names are operation names (the step route
//! parses them with [`OperationName::parse`]), so the operation property
//! covers them.
//!
//! Strings are drawn near the grammar (a valid name of any length with at
//! most one foreign character) as well as at random, so the length limits
//! and every position of a bad character are reached.

use proptest::prelude::*;
use proptest::sample::{select, Index};

use super::*;
use crate::proptest_config::config;

/// `[a-z0-9][a-z0-9._-]{0,63}`
fn is_operation(s: &str) -> bool {
    let first = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let rest = |c: char| first(c) || matches!(c, '.' | '_' | '-');
    let chars: Vec<char> = s.chars().collect();
    (1..=64).contains(&chars.len()) && first(chars[0]) && chars.iter().all(|&c| rest(c))
}

/// 1-255 characters from `!` (0x21) to `~` (0x7E).
fn is_key(s: &str) -> bool {
    let n = s.chars().count();
    (1..=255).contains(&n) && s.chars().all(|c| ('!'..='~').contains(&c))
}

/// `[A-Za-z0-9][A-Za-z0-9._:-]{0,127}`
fn is_tenant(s: &str) -> bool {
    let first = |c: char| c.is_ascii_alphanumeric();
    let rest = |c: char| first(c) || matches!(c, '.' | '_' | ':' | '-');
    let chars: Vec<char> = s.chars().collect();
    (1..=128).contains(&chars.len()) && first(chars[0]) && chars.iter().all(|&c| rest(c))
}

/// Characters outside every grammar, or inside only some of them.
const FOREIGN: &[char] = &[
    ' ',
    '\0',
    '\n',
    '\u{7f}',
    '/',
    'A',
    'Z',
    ':',
    '~',
    '!',
    '.',
    '-',
    '_',
    'é',
    '\u{200b}',
    '\u{1f600}',
    '\u{ff0d}',
];

/// A string of `len_max` or fewer characters from `alphabet`, with
/// possibly one character replaced by a foreign one.
fn near(alphabet: &'static str, len_max: usize) -> impl Strategy<Value = String> {
    let chars: Vec<char> = alphabet.chars().collect();
    let foreign = proptest::option::of((any::<Index>(), select(FOREIGN)));
    (prop::collection::vec(select(chars), 0..=len_max), foreign).prop_map(|(mut s, foreign)| {
        if let (Some((at, c)), false) = (foreign, s.is_empty()) {
            let i = at.index(s.len());
            s[i] = c;
        }
        s.into_iter().collect()
    })
}

fn any_name(alphabet: &'static str, len_max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        3 => near(alphabet, len_max),
        1 => any::<String>(),
        1 => prop::collection::vec(any::<char>(), 0..=len_max).prop_map(String::from_iter),
    ]
}

const OPERATION: &str = "abcxyz0189._-";
const KEY: &str = "!\"#/09:@AZ[\\]`az{|}~";
const TENANT: &str = "aAzZ09._:-";

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn an_operation_name_is_accepted_exactly_when_it_fits_its_pattern(s in any_name(OPERATION, 66)) {
        match OperationName::parse(&s) {
            Ok(name) => {
                prop_assert!(is_operation(&s), "accepted {:?}", s);
                prop_assert_eq!(name.as_str(), s.as_str());
                prop_assert_eq!(name.to_string(), s);
            }
            Err(e) => {
                prop_assert!(!is_operation(&s), "refused {:?}", s);
                prop_assert_eq!(e, NameError::Operation);
            }
        }
    }

    #[test]
    fn a_key_is_accepted_exactly_when_it_is_visible_ascii_of_bounded_length(s in any_name(KEY, 257)) {
        match IdempotencyKey::parse(&s) {
            Ok(key) => {
                prop_assert!(is_key(&s), "accepted {:?}", s);
                prop_assert_eq!(key.as_str(), s.as_str());
            }
            Err(e) => {
                prop_assert!(!is_key(&s), "refused {:?}", s);
                prop_assert_eq!(e, NameError::Key);
            }
        }
    }

    #[test]
    fn a_tenant_is_accepted_exactly_when_it_fits_its_pattern(s in any_name(TENANT, 130)) {
        match TenantId::parse(&s) {
            Ok(tenant) => {
                prop_assert!(is_tenant(&s), "accepted {:?}", s);
                prop_assert_eq!(tenant.as_str(), s.as_str());
            }
            Err(e) => {
                prop_assert!(!is_tenant(&s), "refused {:?}", s);
                prop_assert_eq!(e, NameError::Tenant);
            }
        }
    }

    #[test]
    fn a_scoped_key_path_splits_back_into_its_names_and_its_hash_round_trips(
        tenant in near(TENANT, 12),
        operation in near(OPERATION, 12),
        key in near(KEY, 40),
    ) {
        let (Ok(tenant), Ok(operation), Ok(key)) = (
            TenantId::parse(&tenant),
            OperationName::parse(&operation),
            IdempotencyKey::parse(&key),
        ) else {
            return Ok(());
        };
        let k = ScopedKey { tenant, operation, key };
        let path = k.path();
        let parts: Vec<&str> = path.splitn(3, '/').collect();
        prop_assert_eq!(parts, [k.tenant.as_str(), k.operation.as_str(), k.key.as_str()]);
        prop_assert_eq!(KeyHash::parse_hex(&k.hash().to_hex()), Some(k.hash()));
    }
}
