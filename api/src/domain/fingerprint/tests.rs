use sha2::{Digest, Sha256};

use super::*;

fn fp(json: &str) -> Fingerprint {
    fingerprint_request(json, &FingerprintRules::default()).expect("fingerprint")
}

fn fp_with(json: &str, rules: &FingerprintRules) -> Fingerprint {
    fingerprint_request(json, rules).expect("fingerprint")
}

fn rules(include: &[&str], exclude: &[&str], decimal_fields: &[&str]) -> FingerprintRules {
    let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
    FingerprintRules {
        include: owned(include),
        exclude: owned(exclude),
        decimal_fields: owned(decimal_fields),
    }
}

fn out_of_range(json: &str) -> Option<String> {
    match fingerprint_request(json, &FingerprintRules::default()) {
        Err(FingerprintError::NumberOutOfRange(literal)) => Some(literal),
        _ => None,
    }
}

#[test]
fn field_order_and_whitespace_give_the_same_fingerprint() {
    let a = fp(r#"{"amount":25,"currency":"EUR","meta":{"x":1,"y":[1,2]}}"#);
    let b = fp(
        "{ \"meta\" : { \"y\" : [ 1 , 2 ], \"x\" : 1 },\n \"currency\":\"EUR\", \"amount\": 25 }",
    );
    assert_eq!(a, b);
}

#[test]
fn the_fingerprint_is_the_sha256_of_the_rfc_8785_bytes() {
    let expected: [u8; 32] = Sha256::digest(br#"{"a":1,"b":2}"#).into();
    assert_eq!(fp(r#"{"b":2,"a":1}"#).as_bytes(), &expected);
    assert_eq!(canonical_hash(r#"{"b":2,"a":1}"#), Ok(expected));
}

#[test]
fn a_number_spelled_differently_is_the_same_number() {
    assert_eq!(fp(r#"{"a":1.0}"#), fp(r#"{"a":1}"#));
    assert_eq!(fp(r#"{"a":1e3}"#), fp(r#"{"a":1000}"#));
    assert_eq!(fp(r#"{"a":-0}"#), fp(r#"{"a":0}"#));
}

#[test]
fn a_changed_amount_gives_a_different_fingerprint() {
    assert_ne!(fp(r#"{"amount":25}"#), fp(r#"{"amount":26}"#));
}

#[test]
fn a_number_and_a_string_of_it_differ() {
    assert_ne!(fp(r#"{"a":1}"#), fp(r#"{"a":"1"}"#));
}

#[test]
fn exact_numbers_are_accepted() {
    for n in [
        "1.0",
        "2",
        "0.1",
        "1e3",
        "25.00",
        "9007199254740992",
        "-0",
        "1E-7",
        "5e-324",
    ] {
        assert_eq!(out_of_range(&format!("[{n}]")), None, "{n}");
        assert!(
            fingerprint_request(&format!("[{n}]"), &FingerprintRules::default()).is_ok(),
            "{n}"
        );
    }
}

#[test]
fn numbers_that_change_on_a_double_round_trip_are_out_of_range() {
    for n in [
        "9007199254740993",
        "12345678901234567890123",
        "0.10000000000000000001",
        "1e400",
        "-1e400",
        "1e-400",
    ] {
        assert_eq!(
            out_of_range(&format!(r#"{{"x":[1,{n}]}}"#)),
            Some(n.to_string()),
            "{n}"
        );
    }
}

#[test]
fn an_out_of_range_number_in_an_excluded_field_is_still_rejected() {
    let r = rules(&[], &["/id"], &[]);
    let got = fingerprint_request(r#"{"id":9007199254740993}"#, &r);
    assert_eq!(
        got,
        Err(FingerprintError::NumberOutOfRange(
            "9007199254740993".into()
        ))
    );
}

#[test]
fn digits_inside_strings_are_not_numbers() {
    assert!(fingerprint_request(
        r#"{"a\"1e999":"a\"1e999","b":"\\","c":"9007199254740993"}"#,
        &FingerprintRules::default()
    )
    .is_ok());
}

#[test]
fn invalid_json_is_rejected() {
    let got = fingerprint_request(r#"{"a":}"#, &FingerprintRules::default());
    assert!(matches!(got, Err(FingerprintError::InvalidJson(_))));
    assert!(matches!(
        canonical_hash("[1,"),
        Err(FingerprintError::InvalidJson(_))
    ));
}

#[test]
fn decimal_fields_normalise_decimal_strings() {
    let r = rules(&[], &[], &["/amount"]);
    let canonical = fp_with(r#"{"amount":"25"}"#, &r);
    for spelling in ["25.00", "25.0", "025", "25"] {
        assert_eq!(
            fp_with(&format!(r#"{{"amount":"{spelling}"}}"#), &r),
            canonical,
            "{spelling}"
        );
    }
    assert_eq!(
        fp_with(r#"{"amount":"0.50"}"#, &r),
        fp(r#"{"amount":"0.5"}"#)
    );
    assert_eq!(
        fp_with(r#"{"amount":"-0.00"}"#, &r),
        fp(r#"{"amount":"0"}"#)
    );
}

#[test]
fn decimal_fields_leave_other_values_and_other_fields_alone() {
    let r = rules(&[], &[], &["/amount"]);
    assert_eq!(
        fp_with(r#"{"amount":"25.00 EUR"}"#, &r),
        fp(r#"{"amount":"25.00 EUR"}"#)
    );
    assert_eq!(
        fp_with(r#"{"amount":"1e2"}"#, &r),
        fp(r#"{"amount":"1e2"}"#)
    );
    assert_eq!(fp_with(r#"{"amount":25.5}"#, &r), fp(r#"{"amount":25.5}"#));
    assert_eq!(
        fp_with(r#"{"other":"25.00"}"#, &r),
        fp(r#"{"other":"25.00"}"#)
    );
    assert_ne!(fp(r#"{"amount":"25.00"}"#), fp(r#"{"amount":"25"}"#));
}

#[test]
fn excluded_fields_do_not_count_and_missing_ones_are_fine() {
    let r = rules(&[], &["/trace_id", "/items/0/note", "/absent/deep"], &[]);
    let a = fp_with(
        r#"{"amount":1,"trace_id":"x","items":[{"sku":"a","note":"n1"}]}"#,
        &r,
    );
    let b = fp_with(
        r#"{"amount":1,"trace_id":"y","items":[{"sku":"a","note":"n2"}]}"#,
        &r,
    );
    assert_eq!(a, b);
    assert_eq!(a, fp(r#"{"amount":1,"items":[{"sku":"a"}]}"#));
}

#[test]
fn include_maps_each_pointer_to_its_value_and_omits_missing_ones() {
    let r = rules(&["/amount", "/currency", "/missing"], &[], &[]);
    let got = fp_with(r#"{"amount":25,"currency":"EUR","note":"ignored"}"#, &r);
    assert_eq!(got, fp(r#"{"/amount":25,"/currency":"EUR"}"#));
    assert_eq!(
        got,
        fp_with(r#"{"currency":"EUR","amount":25.0,"note":"other"}"#, &r)
    );
}

#[test]
fn decimal_normalisation_runs_before_include_and_exclude_wins_over_include() {
    let r = rules(&["/amount", "/card"], &["/card"], &["/amount"]);
    let got = fp_with(r#"{"amount":"25.00","card":"4242"}"#, &r);
    assert_eq!(got, fp(r#"{"/amount":"25"}"#));
}

#[test]
fn escaped_pointer_tokens_resolve() {
    let r = rules(&["/a~1b", "/m~0n"], &[], &[]);
    let got = fp_with(r#"{"a/b":1,"m~n":2,"c":3}"#, &r);
    assert_eq!(got, fp(r#"{"/a~1b":1,"/m~0n":2}"#));
}

#[test]
fn invalid_pointers_are_rejected_by_name() {
    for bad in ["amount", "/a~2", "/a~"] {
        let r = rules(&[], &[], &[bad]);
        assert_eq!(
            r.validate(),
            Err(FingerprintError::InvalidPointer(bad.into()))
        );
        assert_eq!(
            fingerprint_request("{}", &r),
            Err(FingerprintError::InvalidPointer(bad.into()))
        );
    }
    assert_eq!(
        rules(&["", "/a/0", "/~0~1"], &["/x"], &[]).validate(),
        Ok(())
    );
}

#[test]
fn the_hex_form_round_trips() {
    let f = fp(r#"{"a":1}"#);
    let hex = f.to_hex();
    assert_eq!(hex.len(), 64);
    assert_eq!(Fingerprint::parse_hex(&hex), Ok(f));
    assert_eq!(f.to_string(), hex);
    assert_eq!(Fingerprint::from_slice(f.as_bytes()), Some(f));
    assert_eq!(Fingerprint::from_bytes(*f.as_bytes()), f);
}

#[test]
fn malformed_hex_is_rejected() {
    let valid = "ab".repeat(32);
    assert!(Fingerprint::parse_hex(&valid).is_ok());
    for bad in [
        valid.to_uppercase(),
        valid[..63].to_string(),
        format!("{valid}0"),
        "g".repeat(64),
        String::new(),
    ] {
        assert_eq!(
            Fingerprint::parse_hex(&bad),
            Err(FingerprintError::InvalidHex),
            "{bad}"
        );
    }
    assert_eq!(Fingerprint::from_slice(&[0u8; 31]), None);
}
