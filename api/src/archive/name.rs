//! Segment names: relative object names such as
//! `segments/2026/11/29/6f1c…e2.seg`, the same under a bucket prefix or a
//! local directory.
//!
//! A generated name carries 128 random bits, so two writers never pick the
//! same one and nothing relies on conditional puts. Parsed names are
//! restricted to `[A-Za-z0-9._-]` components that do not start with a dot:
//! a name can never climb out of the archive's directory (`..`) nor collide
//! with the dot-prefixed temporary files of [`super::LocalDir`].

use std::fmt;

use chrono::{Datelike, Utc};
use rand::RngCore;

/// Longest name we accept (S3 keys may be 1024 bytes; leave room for a prefix).
const MAX_LEN: usize = 512;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("a segment name is 1-{MAX_LEN} characters: /-separated components of [A-Za-z0-9._-], none empty or starting with a dot")]
pub struct InvalidSegmentName;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SegmentName(String);

impl SegmentName {
    /// A fresh, unique name under today's date (UTC).
    pub fn generate() -> Self {
        let now = Utc::now();
        let mut id = [0u8; 16];
        rand::rng().fill_bytes(&mut id);
        Self(format!(
            "segments/{:04}/{:02}/{:02}/{}.seg",
            now.year(),
            now.month(),
            now.day(),
            hex::encode(id)
        ))
    }

    /// A stored name (from a routing entry, say).
    pub fn parse(s: &str) -> Result<Self, InvalidSegmentName> {
        let component_ok = |c: &str| {
            !c.is_empty()
                && !c.starts_with('.')
                && c.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        };
        if s.is_empty() || s.len() > MAX_LEN || !s.split('/').all(component_ok) {
            return Err(InvalidSegmentName);
        }
        Ok(Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SegmentName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_are_dated_unique_and_parse_back() {
        let a = SegmentName::generate();
        let b = SegmentName::generate();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("segments/"), "{a}");
        assert!(a.as_str().ends_with(".seg"), "{a}");
        assert_eq!(a.as_str().split('/').count(), 5, "{a}");
        assert_eq!(SegmentName::parse(a.as_str()), Ok(a));
    }

    #[test]
    fn names_that_could_escape_or_collide_are_refused() {
        for bad in [
            "", "/abs", "a//b", "a/../b", "..", "a/.tmp", "a/b/", "sp ace", "a\\b",
        ] {
            assert_eq!(SegmentName::parse(bad), Err(InvalidSegmentName), "{bad:?}");
        }
        assert!(SegmentName::parse(&"a".repeat(MAX_LEN + 1)).is_err());
        assert!(SegmentName::parse("segments/2026/01/02/x-y_z.seg").is_ok());
    }
}
