//! Number rules: the exactness check on number literals and decimal-string
//! normalisation. serde_json (without `arbitrary_precision`, which would change
//! it for the whole workspace) keeps no number text, so the literals are read
//! from the JSON text: outside strings, a token starting with `-` or a digit is
//! a number.

use serde_json::{Number, Value};

use super::FingerprintError;

/// Fails on the first literal whose value a double cannot hold exactly.
pub(super) fn check_exact(json: &str) -> Result<(), FingerprintError> {
    let bytes = json.as_bytes();
    let (mut i, mut in_string, mut escaped) = (0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < bytes.len()
                && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
            {
                i += 1;
            }
            let literal = &json[start..i];
            if changes_on_round_trip(literal) {
                return Err(FingerprintError::NumberOutOfRange(literal.to_owned()));
            }
            continue;
        }
        i += 1;
    }
    Ok(())
}

/// Rewrites every number as a double, as RFC 8785 sees it, so an integer and a
/// float spelling of one value can never canonicalise differently.
pub(super) fn as_doubles(value: &mut Value) {
    match value {
        Value::Number(n) => {
            if let Some(double) = n.as_f64().and_then(Number::from_f64) {
                *n = double;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(as_doubles),
        Value::Object(map) => map.values_mut().for_each(as_doubles),
        _ => {}
    }
}

/// `Some(normal form)` for a plain decimal string `-?[0-9]+(\.[0-9]+)?`.
pub(super) fn normalise_decimal(s: &str) -> Option<String> {
    let (negative, unsigned) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (int, frac) = match unsigned.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (unsigned, None),
    };
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if !all_digits(int) || !frac.is_none_or(all_digits) {
        return None;
    }
    let int = match int.trim_start_matches('0') {
        "" => "0",
        trimmed => trimmed,
    };
    let frac = frac.unwrap_or("").trim_end_matches('0');
    let sign = if negative && (int != "0" || !frac.is_empty()) {
        "-"
    } else {
        ""
    };
    let point = if frac.is_empty() { "" } else { "." };
    Some(format!("{sign}{int}{point}{frac}"))
}

/// True when the literal's exact value differs from the shortest round-trip
/// decimal of its nearest double as RFC 8785 prints it. That decimal is taken
/// from the canonicaliser itself, not from Rust's `{:e}`: when two shortest
/// decimals are equally near, RFC 8785 (ECMAScript) takes the even one and
/// Rust the other (2146977786322617.25 is `…617.2` in RFC 8785 and `…617.3`
/// in Rust), and a canonical form must read back as itself. Text that is not
/// a number at all (only seen in already invalid JSON) is left for the parser
/// to report.
fn changes_on_round_trip(literal: &str) -> bool {
    let Ok(double) = literal.parse::<f64>() else {
        return false;
    };
    let Ok(printed) = serde_json_canonicalizer::to_string(&double) else {
        return true; // not finite: RFC 8785 has no spelling for it
    };
    decimal_value(literal) != decimal_value(&printed)
}

/// A decimal as sign, significant digits and exponent: `0.digits × 10^exponent`.
#[derive(Debug, PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: String,
    exponent: i64,
}

fn decimal_value(text: &str) -> Option<Decimal> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = unsigned.split_once(['e', 'E']).unwrap_or((unsigned, "0"));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let digits = all.trim_matches('0');
    if digits.is_empty() {
        // Every zero is the same zero, "-0" and "0e999999999999999999999" included.
        return Some(Decimal {
            negative: false,
            digits: String::new(),
            exponent: 0,
        });
    }
    let leading_zeros = all.len() - all.trim_start_matches('0').len();
    let exponent = exponent.parse::<i64>().ok()?;
    let exponent = (int.len() as i64 - leading_zeros as i64).checked_add(exponent)?;
    Some(Decimal {
        negative,
        digits: digits.to_owned(),
        exponent,
    })
}

#[cfg(test)]
mod proptests;
