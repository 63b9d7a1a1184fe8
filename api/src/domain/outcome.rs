//! Outcomes: what the owner stores and every replay returns.
//!
//! An outcome is `{"status_code", "headers", "body", "resource_id"}`. It is
//! kept as the exact JSON text the owner sent, so a replay returns it byte for
//! byte; its shape is checked once, on the way in. Any status code is an
//! outcome — a 500 that crossed the effect boundary must replay too.

use std::collections::BTreeMap;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use sha2::{Digest, Sha256};

use super::fingerprint::canonical_hash;

/// The final outcome, stored and replayed as the exact text sent (number
/// spellings, member order, whitespace). Any status code is an outcome, a
/// business failure included.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = Outcome)]
pub struct Shape {
    #[schema(minimum = 100, maximum = 599)]
    status_code: u16,
    /// Header name → value: names of HTTP token characters, values without
    /// control characters other than tab.
    #[serde(default)]
    #[schema(schema_with = header_map_schema)]
    headers: Option<BTreeMap<String, String>>,
    /// Any JSON.
    #[serde(default)]
    #[allow(dead_code)]
    #[schema(value_type = Option<serde_json::Value>)]
    body: Option<IgnoredAny>,
    /// At most 1024 bytes.
    #[serde(default)]
    resource_id: Option<String>,
}

/// The schema of `headers`: what [`Outcome::parse`] accepts (the `http`
/// crate's header names and values).
fn header_map_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let text = |pattern: &str| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(pattern))
    };
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::Object,
            Type::Null,
        ]))
        .property_names(Some(text("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")))
        .additional_properties(Some(text("^[^\\x00-\\x08\\x0A-\\x1F\\x7F]*$")))
        .build()
}

#[derive(Debug, PartialEq, Eq)]
pub enum OutcomeError {
    /// Not the documented shape; the message says what is wrong.
    Invalid(String),
    TooLarge {
        limit: usize,
    },
}

/// A checked outcome: its exact text and the hash of its canonical form (two
/// completions "carry the same outcome" when these hashes match).
#[derive(Debug, Clone)]
pub struct Outcome {
    pub json: String,
    pub canonical_hash: [u8; 32],
}

impl Outcome {
    pub fn parse(raw: &RawValue, max_bytes: usize) -> Result<Self, OutcomeError> {
        let json = raw.get();
        if json.len() > max_bytes {
            return Err(OutcomeError::TooLarge { limit: max_bytes });
        }
        if !json.starts_with('{') {
            return Err(OutcomeError::Invalid(
                "the outcome must be a JSON object".into(),
            ));
        }
        let shape: Shape =
            serde_json::from_str(json).map_err(|e| OutcomeError::Invalid(e.to_string()))?;
        if !(100..=599).contains(&shape.status_code) {
            return Err(OutcomeError::Invalid("status_code must be 100-599".into()));
        }
        if shape.resource_id.as_ref().is_some_and(|r| r.len() > 1024) {
            return Err(OutcomeError::Invalid(
                "resource_id is over 1024 bytes".into(),
            ));
        }
        // A client may replay these headers verbatim: a name or value that
        // is not valid HTTP (CR, LF, other control bytes) would let a stored
        // outcome inject headers of its own.
        if let Some(headers) = &shape.headers {
            for (name, value) in headers {
                if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(OutcomeError::Invalid(format!(
                        "{name:?} is not a header name"
                    )));
                }
                if http::HeaderValue::from_str(value).is_err() {
                    return Err(OutcomeError::Invalid(format!(
                        "the value of header {name:?} is not a valid header value"
                    )));
                }
            }
        }
        let canonical_hash = outcome_hash(json);
        Ok(Self {
            json: json.to_owned(),
            canonical_hash,
        })
    }
}

/// The canonical (RFC 8785) hash of the outcome, so re-sent outcomes that
/// differ only in spelling count as the same. An outcome holding numbers a
/// double cannot carry exactly (64-bit ids, say) is still a valid outcome: it
/// is then compared by its exact bytes instead, under a distinct prefix.
fn outcome_hash(json: &str) -> [u8; 32] {
    canonical_hash(json).unwrap_or_else(|_| {
        let mut h = Sha256::new();
        h.update(b"idemkey-raw-outcome\0");
        h.update(json.as_bytes());
        h.finalize().into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<Outcome, OutcomeError> {
        let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
        Outcome::parse(&raw, 1024)
    }

    #[test]
    fn a_full_outcome_is_kept_verbatim() {
        let json = r#"{"status_code": 201, "headers": {"Location": "/c/1"}, "body": {"id": 1.50}, "resource_id": "ch_1"}"#;
        assert_eq!(parse(json).unwrap().json, json);
    }

    #[test]
    fn server_errors_are_outcomes_too() {
        assert!(parse(r#"{"status_code": 500, "body": "boom"}"#).is_ok());
    }

    #[test]
    fn equal_outcomes_hash_alike_whatever_their_spelling() {
        let a = parse(r#"{"status_code":200,"body":{"a":1,"b":2}}"#).unwrap();
        let b = parse(r#"{ "body": {"b":2, "a":1.0}, "status_code": 200 }"#).unwrap();
        let c = parse(r#"{"status_code":200,"body":{"a":1,"b":3}}"#).unwrap();
        assert_eq!(a.canonical_hash, b.canonical_hash);
        assert_ne!(a.canonical_hash, c.canonical_hash);
    }

    #[test]
    fn outcomes_with_numbers_beyond_a_double_are_kept_and_compared_by_bytes() {
        let json = r#"{"status_code":200,"body":{"id":12345678901234567890}}"#;
        let a = parse(json).unwrap();
        assert_eq!(a.json, json);
        assert_eq!(a.canonical_hash, parse(json).unwrap().canonical_hash);
        let other = parse(r#"{"status_code":200,"body":{"id":12345678901234567891}}"#).unwrap();
        assert_ne!(a.canonical_hash, other.canonical_hash);
    }

    #[test]
    fn malformed_outcomes_are_refused() {
        for bad in [
            r#"{"body": 1}"#,
            r#"{"status_code": 99}"#,
            r#"{"status_code": 600}"#,
            r#"{"status_code": "200"}"#,
            r#"{"status_code": 200, "headers": {"a": 1}}"#,
            r#"{"status_code": 200, "headers": {"bad name": "x"}}"#,
            r#"{"status_code": 200, "extra": true}"#,
            r#"[200]"#,
        ] {
            assert!(matches!(parse(bad), Err(OutcomeError::Invalid(_))), "{bad}");
        }
    }

    #[test]
    fn headers_that_would_inject_others_are_refused() {
        for bad in [
            r#"{"status_code": 200, "headers": {"x-a": "b\r\nSet-Cookie: s=1"}}"#,
            r#"{"status_code": 200, "headers": {"x-a": "b\nx-b: c"}}"#,
            r#"{"status_code": 200, "headers": {"x-a": "nul\u0000"}}"#,
            r#"{"status_code": 200, "headers": {"x-a\r\nx-b": "c"}}"#,
            r#"{"status_code": 200, "headers": {"": "c"}}"#,
            r#"{"status_code": 200, "headers": {"x:a": "c"}}"#,
        ] {
            assert!(matches!(parse(bad), Err(OutcomeError::Invalid(_))), "{bad}");
        }
        let fine =
            r#"{"status_code": 200, "headers": {"Location": "/c/1?a=b c", "X-Tab": "a\tb"}}"#;
        assert!(parse(fine).is_ok());
    }

    #[test]
    fn outcomes_over_the_limit_are_refused() {
        let big = format!(r#"{{"status_code":200,"body":"{}"}}"#, "x".repeat(2000));
        assert_eq!(
            parse(&big).unwrap_err(),
            OutcomeError::TooLarge { limit: 1024 }
        );
    }
}
