//! The canonicaliser under random input: random JSON values (nested, with
//! unicode strings and numbers of every shape) written with different member
//! orders, spacing and escapes, random rules, and random text that is not
//! JSON. Whatever the input: no panic, only the documented errors, and a
//! canonical form that canonicalises to itself.

pub(super) mod generators;

use proptest::prelude::*;
use proptest::sample::{select, Index};
use serde_json::Value;

use super::*;
use crate::proptest_config::config;
use generators::*;

/// The canonical bytes of `text` under no rules (what the fingerprint hashes).
fn canonical(text: &str) -> Result<Vec<u8>, FingerprintError> {
    let doc = parse_exact(text)?;
    serde_json_canonicalizer::to_vec(&doc).map_err(|e| FingerprintError::InvalidJson(e.to_string()))
}

fn is_valid_pointer_independently(p: &str) -> bool {
    let escapes_ok = p
        .match_indices('~')
        .all(|(i, _)| matches!(p.as_bytes().get(i + 1), Some(b'0' | b'1')));
    (p.is_empty() || p.starts_with('/')) && escapes_ok
}

fn fp(text: &str, rules: &FingerprintRules) -> Result<Fingerprint, FingerprintError> {
    fingerprint_request(text, rules)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_text_is_fingerprinted_or_refused_with_a_documented_error(
        text in prop_oneof![
            any::<String>(),
            prop::collection::vec(select(JSON_CHARS), 0..40).prop_map(String::from_iter),
            near_json(),
        ]
    ) {
        let got = fp(&text, &FingerprintRules::default());
        let parses = serde_json::from_str::<Value>(&text).is_ok();
        match &got {
            Ok(_) => prop_assert!(parses),
            Err(FingerprintError::InvalidJson(_)) => prop_assert!(!parses),
            Err(FingerprintError::NumberOutOfRange(literal)) => {
                prop_assert!(text.contains(literal.as_str()), "{literal:?} is not in the text");
                prop_assert!(literal.starts_with(|c: char| c == '-' || c.is_ascii_digit()));
            }
            Err(other) => prop_assert!(false, "undocumented error {other:?}"),
        }
        prop_assert_eq!(canonical_hash(&text).map(Fingerprint::from_bytes), got);
    }

    #[test]
    fn a_canonical_form_canonicalises_to_itself(doc in json(), style in style()) {
        let text = doc.text(style);
        let Ok(bytes) = canonical(&text) else {
            // Generated documents are JSON: only an inexact number may fail.
            let refused = fp(&text, &FingerprintRules::default());
            prop_assert!(matches!(refused, Err(FingerprintError::NumberOutOfRange(_))), "{refused:?}");
            return Ok(());
        };
        let again = String::from_utf8(bytes.clone()).expect("canonical JSON is UTF-8");
        prop_assert_eq!(canonical(&again), Ok(bytes.clone()), "{}", again);
        let expected = Fingerprint::from_bytes(Sha256::digest(&bytes).into());
        let rules = FingerprintRules::default();
        prop_assert_eq!(fp(&text, &rules), Ok(expected));
        prop_assert_eq!(fp(&again, &rules), Ok(expected));
    }

    #[test]
    fn member_order_spacing_and_escapes_never_change_the_fingerprint(
        (doc, rules) in doc_and_rules(),
        style in style(),
    ) {
        let plain = fp(&doc.text(PLAIN), &rules);
        let restyled = fp(&doc.text(style), &rules);
        match (&plain, &restyled) {
            // The first inexact literal in the text is named; order moves it.
            (Err(FingerprintError::NumberOutOfRange(_)), Err(FingerprintError::NumberOutOfRange(_))) => {}
            _ => prop_assert_eq!(&plain, &restyled),
        }
        prop_assert!(
            !matches!(plain, Err(FingerprintError::InvalidJson(_) | FingerprintError::InvalidHex)),
            "{plain:?}"
        );
    }

    #[test]
    fn include_and_decimal_field_order_never_change_the_fingerprint(
        (doc, rules) in doc_and_rules(),
    ) {
        let mut reversed = rules.clone();
        reversed.include.reverse();
        reversed.decimal_fields.reverse();
        let text = doc.text(PLAIN);
        let (before, after) = (fp(&text, &rules), fp(&text, &reversed));
        if rules.validate().is_ok() {
            prop_assert_eq!(before, after);
        } else {
            // The first invalid pointer is named, so the order moves it.
            let refused = |r: &Result<_, _>| matches!(r, Err(FingerprintError::InvalidPointer(_)));
            prop_assert!(refused(&before) && refused(&after), "{before:?} {after:?}");
        }
    }

    #[test]
    fn only_included_members_count_and_excluded_ones_never_do(
        members in prop::collection::btree_map(text(), json(), 1..5),
        pick in any::<Index>(),
        replacement in json(),
    ) {
        let members: Vec<(String, Json)> = members.into_iter().collect();
        let i = pick.index(members.len());
        let (key, value) = members[i].clone();
        let pointer = format!("/{}", token(&key));
        let mut changed = members.clone();
        changed[i].1 = replacement;
        let mut others_changed = changed.clone();
        others_changed[i].1 = value.clone();
        let mut without = members.clone();
        without.remove(i);
        let [doc, changed, others_changed, without] =
            [members, changed, others_changed, without].map(|m| Json::Obj(m).text(PLAIN));

        let exclude = FingerprintRules { exclude: vec![pointer.clone()], ..Default::default() };
        let include = FingerprintRules { include: vec![pointer.clone()], ..Default::default() };
        let picked = format!("{{{}:{}}}", serde_json::to_string(&pointer).unwrap(), value.text(PLAIN));
        let all_exact = |texts: &[&str]| texts.iter().all(|t| numbers::check_exact(t).is_ok());
        if all_exact(&[&doc, &changed, &without]) {
            prop_assert_eq!(fp(&doc, &exclude), fp(&changed, &exclude));
            prop_assert_eq!(fp(&doc, &exclude), fp(&without, &FingerprintRules::default()));
        }
        if all_exact(&[&doc, &others_changed]) {
            prop_assert_eq!(fp(&doc, &include), fp(&others_changed, &include));
            prop_assert_eq!(fp(&doc, &include), fp(&picked, &FingerprintRules::default()));
        }
    }

    #[test]
    fn an_invalid_pointer_is_refused_by_name_before_the_text_is_read(
        include in prop::collection::vec(pointer(), 0..3),
        exclude in prop::collection::vec(pointer(), 0..3),
        decimal_fields in prop::collection::vec(pointer(), 0..3),
        text in prop_oneof![json().prop_map(|d| d.text(PLAIN)), any::<String>()],
    ) {
        let first_bad = (include.iter().chain(&exclude).chain(&decimal_fields))
            .find(|p| !is_valid_pointer_independently(p))
            .cloned();
        let rules = FingerprintRules { include, exclude, decimal_fields };
        let got = fp(&text, &rules);
        match first_bad {
            Some(bad) => prop_assert_eq!(got, Err(FingerprintError::InvalidPointer(bad))),
            None => prop_assert!(!matches!(got, Err(FingerprintError::InvalidPointer(_)))),
        }
    }

    #[test]
    fn a_lone_surrogate_escape_is_invalid_json(
        unit in 0xd800u32..0xe000,
        after in prop_oneof![Just(String::new()), Just("x".to_owned()), Just("\\u0041".to_owned())],
    ) {
        let text = format!("{{\"k\":\"a\\u{unit:04x}{after}\"}}");
        let got = fp(&text, &FingerprintRules::default());
        prop_assert!(matches!(got, Err(FingerprintError::InvalidJson(_))), "{text}: {got:?}");
    }
}
