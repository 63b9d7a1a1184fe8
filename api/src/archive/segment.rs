//! The segment format: many outcomes in one object, each readable alone by
//! byte range.
//!
//! ```text
//! idemkey-segment 1\n
//! {"tenant":"…","operation":"…","key":"…","fingerprint":"<hex>","expires_at":"…","len":N}\n
//! <N bytes: the outcome exactly as stored>\n
//! … one header line and one outcome per record …
//! ```
//!
//! The routing entry holds the offset and length of the outcome bytes (not
//! the header) and their SHA-256, so a read needs no parsing. The header
//! lines make a segment self-describing: an operator can tell what a
//! segment holds, or rebuild routing entries, from the object alone.

use bytes::Bytes;
use serde::Serialize;
use sha2::{Digest, Sha256};

const MAGIC: &[u8] = b"idemkey-segment 1\n";

/// What a segment says about each outcome it holds.
#[derive(Debug, Serialize)]
pub struct SegmentEntry<'a> {
    pub tenant: &'a str,
    pub operation: &'a str,
    pub key: &'a str,
    pub fingerprint: String,
    pub expires_at: String,
}

/// An outcome's place in a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packed {
    pub offset: u64,
    pub len: u64,
    pub sha256: [u8; 32],
}

/// Builds one segment in memory (segments are bounded batches).
#[derive(Debug)]
pub struct SegmentWriter {
    buf: Vec<u8>,
}

impl Default for SegmentWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl SegmentWriter {
    pub fn new() -> Self {
        Self {
            buf: MAGIC.to_vec(),
        }
    }

    /// Appends one outcome and says where its bytes are.
    pub fn push(&mut self, entry: &SegmentEntry<'_>, outcome: &str) -> Packed {
        #[derive(Serialize)]
        struct Header<'a> {
            #[serde(flatten)]
            entry: &'a SegmentEntry<'a>,
            len: usize,
        }
        let header = serde_json::to_vec(&Header {
            entry,
            len: outcome.len(),
        })
        .expect("a header of strings and a number always serialises");
        self.buf.extend_from_slice(&header);
        self.buf.push(b'\n');
        let offset = self.buf.len() as u64;
        self.buf.extend_from_slice(outcome.as_bytes());
        self.buf.push(b'\n');
        Packed {
            offset,
            len: outcome.len() as u64,
            sha256: Sha256::digest(outcome.as_bytes()).into(),
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether no outcome has been pushed yet.
    pub fn is_empty(&self) -> bool {
        self.buf.len() == MAGIC.len()
    }

    pub fn finish(self) -> Bytes {
        Bytes::from(self.buf)
    }
}

/// Checks bytes read back from a routing entry: the outcome text, or why not.
pub fn open_outcome(bytes: &[u8], sha256: &[u8; 32]) -> Result<String, String> {
    let got: [u8; 32] = Sha256::digest(bytes).into();
    if &got != sha256 {
        return Err(format!(
            "outcome bytes have sha256 {}, the routing entry says {}",
            hex::encode(got),
            hex::encode(sha256)
        ));
    }
    String::from_utf8(bytes.to_vec()).map_err(|_| "outcome bytes are not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> SegmentEntry<'_> {
        SegmentEntry {
            tenant: "acme",
            operation: "charges.create",
            key,
            fingerprint: "ab".repeat(32),
            expires_at: "2026-11-30T00:00:00.000Z".into(),
        }
    }

    #[test]
    fn each_outcome_reads_back_alone_byte_for_byte() {
        let outcomes = [
            r#"{"status_code":201,"body":{"amount": 25.00}}"#,
            "{}",
            r#"{"body":"line\nbreak ✓"}"#,
        ];
        let mut w = SegmentWriter::new();
        assert!(w.is_empty());
        let packed: Vec<Packed> = outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| w.push(&entry(&format!("k{i}")), o))
            .collect();
        assert!(!w.is_empty());
        let bytes = w.finish();
        assert!(bytes.starts_with(MAGIC));
        for (outcome, p) in outcomes.iter().zip(&packed) {
            let range = &bytes[p.offset as usize..(p.offset + p.len) as usize];
            assert_eq!(open_outcome(range, &p.sha256).unwrap(), *outcome);
        }
    }

    #[test]
    fn a_segment_describes_itself() {
        let mut w = SegmentWriter::new();
        let p = w.push(&entry("k"), "{}");
        let bytes = w.finish();
        let header_line = std::str::from_utf8(&bytes[MAGIC.len()..p.offset as usize - 1]).unwrap();
        let header: serde_json::Value = serde_json::from_str(header_line).unwrap();
        assert_eq!(header["key"], "k");
        assert_eq!(header["len"], 2);
    }

    #[test]
    fn wrong_bytes_are_refused() {
        let mut w = SegmentWriter::new();
        let p = w.push(&entry("k"), "{\"a\":1}");
        let bytes = w.finish();
        let mut range = bytes[p.offset as usize..(p.offset + p.len) as usize].to_vec();
        range[0] = b'[';
        assert!(open_outcome(&range, &p.sha256).is_err());
        assert!(open_outcome(&range[1..], &p.sha256).is_err());
    }
}
