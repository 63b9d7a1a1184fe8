//! The number scanner and decimal normalisation under random input. The
//! oracle for a literal is computed from the parts it was built from, never
//! from its text: exact when its value is the value of what RFC 8785 prints
//! for its double (the shortest decimal that round-trips it, the even one
//! of two equally near).

use proptest::prelude::*;
use proptest::sample::select;

use super::super::proptests::generators::{double, literal, Literal};
use super::super::{fingerprint_request, FingerprintError, FingerprintRules};
use super::{check_exact, normalise_decimal};
use crate::proptest_config::config;

/// A decimal value as significant digits (no leading or trailing zeros) and
/// the power of ten of the last one; zero is `("", 0)`, whatever its sign.
#[derive(Debug, PartialEq, Eq)]
struct Value {
    negative: bool,
    digits: String,
    exponent: i64,
}

fn value(negative: bool, digits: &str, exponent: i64) -> Value {
    let leading = digits.trim_start_matches('0');
    let significant = leading.trim_end_matches('0');
    if significant.is_empty() {
        return Value {
            negative: false,
            digits: String::new(),
            exponent: 0,
        };
    }
    Value {
        negative,
        digits: significant.to_owned(),
        exponent: exponent + (leading.len() - significant.len()) as i64,
    }
}

fn value_of(l: &Literal) -> Value {
    let exp = match &l.exp {
        Some((_, sign, digits)) => {
            let n: i64 = digits.parse().expect("at most six digits");
            if *sign == "-" {
                -n
            } else {
                n
            }
        }
        None => 0,
    };
    value(
        l.negative,
        &format!("{}{}", l.int, l.frac),
        exp - l.frac.len() as i64,
    )
}

/// The value a JSON number text with a small exponent spells.
fn spelled(text: &str) -> Value {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let exp: i64 = exp
        .trim_start_matches('+')
        .parse()
        .expect("a small exponent");
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    value(negative, &format!("{int}{frac}"), exp - frac.len() as i64)
}

/// What RFC 8785 prints for `d` (the canonicaliser's own number writer).
fn jcs(d: f64) -> String {
    serde_json_canonicalizer::to_string(&d).expect("finite doubles print")
}

fn exact(l: &Literal) -> bool {
    let d: f64 = l.text().parse().expect("a JSON number is a Rust float");
    d.is_finite() && value_of(l) == spelled(&jcs(d))
}

fn fp(text: &str) -> Result<super::super::Fingerprint, FingerprintError> {
    fingerprint_request(text, &FingerprintRules::default())
}

/// A plain decimal string `-?[0-9]+(\.[0-9]+)?`, by its parts.
fn decimal() -> impl Strategy<Value = (bool, String, String)> {
    (
        any::<bool>(),
        "[0-9]{1,20}",
        prop_oneof![Just(String::new()), "[0-9]{1,20}"],
    )
}

fn is_plain_decimal(s: &str) -> bool {
    let unsigned = s.strip_prefix('-').unwrap_or(s);
    let mut parts = unsigned.splitn(2, '.');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()));
    let int = parts.next();
    let frac = parts.next();
    digits(int) && (frac.is_none() || digits(frac))
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_literal_is_accepted_exactly_when_a_double_holds_its_value(l in literal()) {
        let text = l.text();
        let expected = || if exact(&l) {
            Ok(())
        } else {
            Err(FingerprintError::NumberOutOfRange(text.clone()))
        };
        prop_assert_eq!(check_exact(&text), expected());
        let in_a_document = format!("{{\"a\":[true,{text}],\"b\":\"{text}\"}}");
        prop_assert_eq!(fp(&in_a_document).map(|_| ()), expected());
    }

    #[test]
    fn every_spelling_of_what_rfc_8785_prints_is_accepted_and_they_agree(d in double()) {
        let printed = jcs(d);
        let canonical = fp(&format!("[{printed}]"));
        prop_assert!(canonical.is_ok(), "{printed}: {canonical:?}");
        let v = spelled(&printed);
        let sign = if v.negative { "-" } else { "" };
        let spellings = if v.digits.is_empty() {
            vec!["0".to_owned(), "-0".to_owned(), "-0.000e7".to_owned()]
        } else {
            let (first, rest) = v.digits.split_at(1);
            vec![
                format!("{sign}{}e{}", v.digits, v.exponent),
                format!("{sign}{first}.{rest}000E{:+}", v.exponent + rest.len() as i64),
                format!("{sign}{}000e{}", v.digits, v.exponent - 3),
            ]
        };
        for spelling in spellings {
            prop_assert_eq!(&fp(&format!("[{spelling}]")), &canonical, "{}", spelling);
        }
        // Rust's own shortest spellings pass when they spell the same value
        // (they differ from RFC 8785 only when two decimals are equally near).
        for rust in [format!("{d}"), format!("{d:e}"), format!("{d:?}")] {
            let same = spelled(&rust) == v;
            prop_assert_eq!(fp(&format!("[{rust}]")).is_ok(), same, "{} vs {}", rust, printed);
        }
    }

    #[test]
    fn an_integer_is_accepted_exactly_when_a_double_holds_it(
        n in prop_oneof![
            any::<i128>(),
            any::<u64>().prop_map(i128::from),
            ((1i128 << 53) - 4..(1i128 << 53) + 8),
            (0u32..127, -3i128..=3).prop_map(|(k, delta)| (1i128 << k) + delta),
        ],
        negate in any::<bool>(),
    ) {
        let n = if negate { -n } else { n };
        let text = n.to_string();
        let d = n as f64;
        let exact = spelled(&text) == spelled(&jcs(d));
        let got = fp(&format!("{{\"n\":{text}}}"));
        if exact {
            prop_assert!(got.is_ok(), "{text}: {got:?}");
            prop_assert_eq!(got, fp(&format!("{{\"n\":{d:e}}}")));
        } else {
            prop_assert_eq!(got, Err(FingerprintError::NumberOutOfRange(text)));
        }
    }

    #[test]
    fn decimal_strings_normalise_to_one_spelling(
        (negative, int, frac) in decimal(),
        extra_leading in 0..3usize,
        extra_trailing in 0..3usize,
    ) {
        let sign = if negative { "-" } else { "" };
        let zeros = |n| "0".repeat(n);
        let point = |frac: &str| if frac.is_empty() { String::new() } else { format!(".{frac}") };
        let spelled = {
            let frac = if frac.is_empty() && extra_trailing > 0 { zeros(extra_trailing) } else { format!("{frac}{}", zeros(extra_trailing)) };
            format!("{sign}{}{int}{}", zeros(extra_leading), point(&frac))
        };
        let normal = {
            let int = match int.trim_start_matches('0') { "" => "0", t => t };
            let frac = frac.trim_end_matches('0');
            let sign = if int == "0" && frac.is_empty() { "" } else { sign };
            format!("{sign}{int}{}", point(frac))
        };
        prop_assert_eq!(normalise_decimal(&spelled), Some(normal.clone()));
        prop_assert_eq!(normalise_decimal(&normal), Some(normal.clone()));
        let rules = FingerprintRules { decimal_fields: vec!["/amount".into()], ..Default::default() };
        let with_rules = fingerprint_request(&format!("{{\"amount\":\"{spelled}\"}}"), &rules);
        prop_assert_eq!(with_rules, fp(&format!("{{\"amount\":\"{normal}\"}}")));
    }

    #[test]
    fn only_plain_decimal_strings_are_normalised(
        s in prop_oneof![any::<String>(), "[-+.0-9eE ]{0,8}"],
    ) {
        let got = normalise_decimal(&s);
        prop_assert_eq!(got.is_some(), is_plain_decimal(&s), "{:?}", s);
        if let Some(normal) = got {
            prop_assert_eq!(normalise_decimal(&normal), Some(normal.clone()));
        }
    }

    #[test]
    fn the_scanner_never_panics_and_names_a_literal_of_the_text(
        text in prop_oneof![
            any::<String>(),
            prop::collection::vec(
                select(&['"', '\\', '-', '+', '.', 'e', 'E', '0', '1', '9', ',', '[', ' ', 'x', 'é'][..]),
                0..40,
            )
            .prop_map(String::from_iter),
        ],
    ) {
        if let Err(e) = check_exact(&text) {
            let FingerprintError::NumberOutOfRange(literal) = e else {
                return Err(TestCaseError::fail(format!("undocumented error {e:?}")));
            };
            prop_assert!(text.contains(literal.as_str()));
            prop_assert!(literal.starts_with(|c: char| c == '-' || c.is_ascii_digit()));
            prop_assert!(literal.chars().all(|c| "0123456789+-.eE".contains(c)));
        }
    }
}

#[test]
fn of_two_equally_near_shortest_decimals_the_one_rfc_8785_prints_is_the_exact_one() {
    // 2146977786322617.25 is a double; .2 and .3 are equally near and equally
    // short. RFC 8785 prints .2 (Rust's `{:e}` prints .3), so .2 is exact and
    // its canonical form reads back as itself.
    let tie = -(2146977786322617.0 + 0.25);
    assert_eq!(format!("{tie:e}"), "-2.1469777863226173e15");
    assert_eq!(jcs(tie), "-2146977786322617.2");
    assert_eq!(check_exact("[-2146977786322617.2]"), Ok(()));
    assert_eq!(
        check_exact("[-2146977786322617.3]"),
        Err(FingerprintError::NumberOutOfRange(
            "-2146977786322617.3".into()
        ))
    );
}
