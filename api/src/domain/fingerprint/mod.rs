//! Request fingerprints: the SHA-256 of a request's canonical protected input
//! (SPEC sections 2 and 4). One scoped key maps to one fingerprint, so two
//! requests get the same fingerprint exactly when they mean the same thing
//! under the operation class's rules, whatever their field order, whitespace or
//! number spelling.
//!
//! [`fingerprint_request`] works in this order:
//!
//! 1. **Parse** the text with serde_json; invalid JSON is
//!    [`FingerprintError::InvalidJson`].
//! 2. **Check every number** in the text, before any rule runs (so a number in
//!    an excluded field is checked too). RFC 8785 writes each number as the
//!    shortest decimal that round-trips its IEEE-754 double; a literal whose
//!    exact value differs from that decimal (`9007199254740993`,
//!    `0.10000000000000000001`, `1e400`, `1e-400`, and also `2^60` written out
//!    in full, which JCS would print as `1152921504606847000`) is
//!    [`FingerprintError::NumberOutOfRange`], because a silent rounding would
//!    let different requests collide. `1.0`, `1e3`, `25.00` and
//!    `9007199254740992` pass. serde_json drops number text, so the literals
//!    are read from the JSON text itself (see `numbers`).
//! 3. **Normalise decimal fields**: each `decimal_fields` pointer that resolves
//!    (in the original document) to a plain decimal string
//!    (`-?[0-9]+(\.[0-9]+)?`) gets its leading zeros and trailing fractional
//!    zeros stripped (`"025.00"` → `"25"`, `"0.50"` → `"0.5"`, `"-0.0"` → `"0"`).
//!    Other strings, numbers and missing paths are left alone.
//! 4. **Exclude**: each `exclude` pointer's value is removed, in the order
//!    listed (removing an array element shifts the later ones; `""` leaves
//!    `null`). A missing path is not an error.
//! 5. **Include**: if `include` is non-empty, the protected input becomes an
//!    object mapping each include pointer *string* to the value found there,
//!    e.g. `{"/amount": "25", "/currency": "EUR"}`; pointers that resolve to
//!    nothing are left out (so a missing field and an absent field agree).
//! 6. **Canonicalise** with RFC 8785 (numbers written as doubles, keys sorted by
//!    UTF-16 code units) and hash the bytes with SHA-256.
//!
//! With empty rules the fingerprint is the SHA-256 of the RFC 8785 form of the
//! whole request; [`canonical_hash`] is exactly that, used to compare outcomes.

pub mod fields;
mod numbers;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum FingerprintError {
    #[error("fingerprint must be exactly 64 lowercase hex characters")]
    InvalidHex,
    #[error("request is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("number {0} cannot be represented exactly as an IEEE-754 double")]
    NumberOutOfRange(String),
    #[error("invalid JSON pointer {0:?}")]
    InvalidPointer(String),
}

/// SHA-256 of the canonical protected input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// Parses a client's precomputed fingerprint: exactly 64 lowercase hex chars.
    pub fn parse_hex(s: &str) -> Result<Self, FingerprintError> {
        let lower_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        if s.len() != 64 || !s.bytes().all(lower_hex) {
            return Err(FingerprintError::InvalidHex);
        }
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(s, &mut bytes).map_err(|_| FingerprintError::InvalidHex)?;
        Ok(Self(bytes))
    }

    /// Lowercase hex, the form clients send and the API returns.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    pub const fn from_bytes(b: [u8; 32]) -> Self {
        Self(b)
    }

    /// `None` unless `b` is exactly 32 bytes (e.g. a column read back from storage).
    pub fn from_slice(b: &[u8]) -> Option<Self> {
        <[u8; 32]>::try_from(b).ok().map(Self)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Which parts of the request are protected (SPEC section 6, "fingerprint").
/// Every entry is an RFC 6901 JSON pointer; see the module doc for the order.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FingerprintRules {
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub decimal_fields: Vec<String>,
}

impl FingerprintRules {
    /// The rules' identity as a record stores it: the SHA-256 of their JSON,
    /// or `None` for the default rules (no include, exclude or decimal
    /// fields), which need no lookup.
    pub fn digest(&self) -> Option<[u8; 32]> {
        (*self != Self::default()).then(|| Sha256::digest(self.to_json()).into())
    }

    /// The rules as stored beside their digest.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("rules are strings and serialise")
    }

    /// Every entry must be a valid RFC 6901 pointer: `""` or starting with `/`,
    /// with `~` only in the escapes `~0` and `~1`. The error names the first bad one.
    pub fn validate(&self) -> Result<(), FingerprintError> {
        let all = self
            .include
            .iter()
            .chain(&self.exclude)
            .chain(&self.decimal_fields);
        match all.into_iter().find(|p| !is_valid_pointer(p)) {
            Some(bad) => Err(FingerprintError::InvalidPointer(bad.clone())),
            None => Ok(()),
        }
    }
}

/// Canonicalise a client's `request` JSON text under `rules` and hash it.
pub fn fingerprint_request(
    request_json: &str,
    rules: &FingerprintRules,
) -> Result<Fingerprint, FingerprintError> {
    match protected_input(request_json, rules)? {
        Protected::Whole(doc) => hash(&doc).map(Fingerprint),
        Protected::Picked(picked) => {
            let picked: BTreeMap<&str, &Value> =
                picked.iter().map(|(p, v)| (p.as_str(), v)).collect();
            hash(&picked).map(Fingerprint)
        }
    }
}

/// The protected input: steps 1–5 of the module doc.
pub(crate) enum Protected {
    /// No include rule: the whole document, normalised and without the
    /// excluded fields.
    Whole(Value),
    /// The value at each include pointer that resolves, by pointer.
    Picked(Vec<(String, Value)>),
}

pub(crate) fn protected_input(
    request_json: &str,
    rules: &FingerprintRules,
) -> Result<Protected, FingerprintError> {
    rules.validate()?;
    let mut doc = parse_exact(request_json)?;
    for pointer in &rules.decimal_fields {
        if let Some(Value::String(s)) = doc.pointer_mut(pointer) {
            if let Some(normalised) = numbers::normalise_decimal(s) {
                *s = normalised;
            }
        }
    }
    for pointer in &rules.exclude {
        remove_at(&mut doc, pointer);
    }
    if rules.include.is_empty() {
        return Ok(Protected::Whole(doc));
    }
    let picked: BTreeMap<&str, &Value> = (rules.include.iter())
        .filter_map(|p| doc.pointer(p).map(|v| (p.as_str(), v)))
        .collect();
    Ok(Protected::Picked(
        picked
            .into_iter()
            .map(|(p, v)| (p.to_owned(), v.clone()))
            .collect(),
    ))
}

/// Hash arbitrary JSON text canonically with no rules (used to compare
/// outcomes). Numbers get the same exactness check as requests, so two texts
/// hash alike only if they hold the same values.
pub fn canonical_hash(json: &str) -> Result<[u8; 32], FingerprintError> {
    hash(&parse_exact(json)?)
}

fn parse_exact(json: &str) -> Result<Value, FingerprintError> {
    match serde_json::from_str::<Value>(json) {
        Ok(mut doc) => {
            numbers::check_exact(json)?;
            numbers::as_doubles(&mut doc);
            Ok(doc)
        }
        // serde_json itself rejects `1e400`; name the literal rather than the syntax.
        Err(e) => {
            numbers::check_exact(json)?;
            Err(FingerprintError::InvalidJson(e.to_string()))
        }
    }
}

pub(crate) fn hash<T: serde::Serialize>(value: &T) -> Result<[u8; 32], FingerprintError> {
    let canonical = serde_json_canonicalizer::to_vec(value)
        .map_err(|e| FingerprintError::InvalidJson(e.to_string()))?;
    Ok(Sha256::digest(&canonical).into())
}

fn is_valid_pointer(p: &str) -> bool {
    let escapes_ok = p
        .split('~')
        .skip(1)
        .all(|rest| rest.starts_with(['0', '1']));
    (p.is_empty() || p.starts_with('/')) && escapes_ok
}

fn remove_at(doc: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        *doc = Value::Null; // "" names the whole document
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            let canonical_index = last == "0" || !last.starts_with('0');
            match last.parse::<usize>() {
                Ok(i) if canonical_index && !last.starts_with('+') && i < items.len() => {
                    items.remove(i);
                }
                _ => {}
            }
        }
        _ => {}
    }
}
