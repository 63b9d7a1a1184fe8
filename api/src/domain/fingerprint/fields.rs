//! Field digests: which parts of a request differ from the one a key was
//! first claimed with, without keeping either request.
//!
//! A record keeps, beside its fingerprint, a short digest of every leaf of
//! its protected input (after the class's include, exclude and decimal
//! rules), keyed by the leaf's JSON pointer into the request. When a claim
//! is refused as `key_reused`, the same digests of the new request name the
//! pointers whose values differ, or that only one of the two has — never
//! the values. Leaves are scalars and empty objects or arrays; a digest is
//! the first 8 bytes of the SHA-256 of the leaf's RFC 8785 form, enough to
//! tell two values apart, too short to be worth guessing values from.
//!
//! Bounded: at most [`MAX_FIELDS`] leaves are kept per record (a larger
//! request keeps the first ones in document order and says it was cut), and
//! at most [`MAX_REPORTED`] pointers are named in one answer.

use std::collections::BTreeMap;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{hash, protected_input, FingerprintError, FingerprintRules, Protected};

/// Leaves kept per record.
pub const MAX_FIELDS: usize = 64;
/// Pointers named in one `key_reused` answer.
pub const MAX_REPORTED: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldDigests {
    fields: BTreeMap<String, [u8; 8]>,
    /// More leaves than [`MAX_FIELDS`]: some were not kept.
    truncated: bool,
}

/// What differs between two requests' protected inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The differing pointers, sorted, at most [`MAX_REPORTED`].
    pub pointers: Vec<String>,
    /// Some differences may not be named: the list was cut, or one of the
    /// requests had more leaves than were kept.
    pub truncated: bool,
}

impl FieldDigests {
    /// The digests of `request_json`'s protected input under `rules`.
    pub fn of(request_json: &str, rules: &FingerprintRules) -> Result<Self, FingerprintError> {
        let mut digests = Self::default();
        match protected_input(request_json, rules)? {
            Protected::Whole(doc) => digests.walk(&doc, &mut String::new())?,
            Protected::Picked(picked) => {
                for (pointer, value) in &picked {
                    digests.walk(value, &mut pointer.clone())?;
                }
            }
        }
        Ok(digests)
    }

    fn walk(&mut self, value: &Value, path: &mut String) -> Result<(), FingerprintError> {
        let len = path.len();
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (name, v) in map {
                    path.push('/');
                    path.push_str(&name.replace('~', "~0").replace('/', "~1"));
                    self.walk(v, path)?;
                    path.truncate(len);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                for (i, v) in items.iter().enumerate() {
                    path.push_str(&format!("/{i}"));
                    self.walk(v, path)?;
                    path.truncate(len);
                }
            }
            leaf => {
                if self.fields.len() == MAX_FIELDS {
                    self.truncated = true;
                    return Ok(());
                }
                let digest = Sha256::digest(hash(leaf)?);
                let mut short = [0; 8];
                short.copy_from_slice(&digest[..8]);
                self.fields.insert(path.clone(), short);
            }
        }
        Ok(())
    }

    /// The pointers whose leaves differ between `self` and `other`.
    pub fn mismatched(&self, other: &Self) -> Mismatch {
        let mut pointers: Vec<String> = (self.fields.iter())
            .filter(|(p, d)| other.fields.get(p.as_str()) != Some(d))
            .map(|(p, _)| p)
            .chain((other.fields.keys()).filter(|p| !self.fields.contains_key(p.as_str())))
            .cloned()
            .collect();
        pointers.sort();
        let cut = pointers.len() > MAX_REPORTED;
        pointers.truncate(MAX_REPORTED);
        Mismatch {
            pointers,
            truncated: cut || self.truncated || other.truncated,
        }
    }

    /// The stored form: `{"f": {"/pointer": "16 hex digits"}, "t": cut}`.
    pub fn to_text(&self) -> String {
        let fields: BTreeMap<&str, String> = (self.fields.iter())
            .map(|(p, d)| (p.as_str(), hex::encode(d)))
            .collect();
        serde_json::json!({"f": fields, "t": self.truncated}).to_string()
    }

    /// The stored form read back; `None` if it is damaged.
    pub fn parse(text: &str) -> Option<Self> {
        let value: Value = serde_json::from_str(text).ok()?;
        let mut fields = BTreeMap::new();
        for (pointer, digest) in value.get("f")?.as_object()? {
            let bytes = hex::decode(digest.as_str()?).ok()?;
            fields.insert(pointer.clone(), bytes.try_into().ok()?);
        }
        Some(Self {
            fields,
            truncated: value.get("t")?.as_bool()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digests(json: &str, rules: &FingerprintRules) -> FieldDigests {
        FieldDigests::of(json, rules).expect("valid request")
    }

    fn mismatched(a: &str, b: &str, rules: &FingerprintRules) -> Mismatch {
        digests(a, rules).mismatched(&digests(b, rules))
    }

    #[test]
    fn nested_fields_are_named_by_pointer_never_by_value() {
        let rules = FingerprintRules::default();
        let a = r#"{"amount": 25, "items": [{"sku": "A-1", "qty": 1}], "currency": "EUR"}"#;
        let b = r#"{"amount": 26, "items": [{"sku": "B-2", "qty": 1}], "currency": "EUR"}"#;
        let m = mismatched(a, b, &rules);
        assert_eq!(m.pointers, ["/amount", "/items/0/sku"]);
        assert!(!m.truncated);
        let text = digests(a, &rules).to_text();
        assert!(!text.contains("A-1") && !text.contains("EUR"), "{text}");
    }

    #[test]
    fn a_field_only_one_request_has_is_named() {
        let rules = FingerprintRules::default();
        let m = mismatched(r#"{"a": 1, "b": {"c": 2}}"#, r#"{"a": 1, "d": []}"#, &rules);
        assert_eq!(m.pointers, ["/b/c", "/d"]);
    }

    #[test]
    fn excluded_fields_never_show_and_decimals_compare_normalised() {
        let rules = FingerprintRules {
            exclude: vec!["/note".into()],
            decimal_fields: vec!["/amount".into()],
            ..FingerprintRules::default()
        };
        let a = r#"{"amount": "25.00", "note": "first", "to": "x/y~z"}"#;
        let b = r#"{"amount": "25.0", "note": "second", "to": "other"}"#;
        assert_eq!(mismatched(a, b, &rules).pointers, ["/to"]);
        // The pointer of a key holding `/` and `~` is escaped (RFC 6901).
        let c = r#"{"amount": "25", "x/y": 1}"#;
        let d = r#"{"amount": "25", "x/y": 2}"#;
        assert_eq!(mismatched(c, d, &rules).pointers, ["/x~1y"]);
    }

    #[test]
    fn include_rules_name_pointers_under_the_included_ones() {
        let rules = FingerprintRules {
            include: vec!["/payment".into()],
            ..FingerprintRules::default()
        };
        let a = r#"{"payment": {"amount": 1, "card": "c1"}, "trace": 1}"#;
        let b = r#"{"payment": {"amount": 2, "card": "c1"}, "trace": 2}"#;
        assert_eq!(mismatched(a, b, &rules).pointers, ["/payment/amount"]);
    }

    #[test]
    fn large_requests_are_cut_and_say_so() {
        let rules = FingerprintRules::default();
        let big = |v: u32| {
            let fields: Vec<String> = (0..100).map(|i| format!("\"f{i:03}\": {v}")).collect();
            format!("{{{}}}", fields.join(","))
        };
        let m = mismatched(&big(1), &big(2), &rules);
        assert_eq!(m.pointers.len(), MAX_REPORTED);
        assert!(m.truncated);
        let stored = digests(&big(1), &rules);
        assert_eq!(FieldDigests::parse(&stored.to_text()), Some(stored));
    }
}
