//! The archive: where tiered outcomes live once they leave the database
//! (SPEC section 7, "Tiering").
//!
//! Outcomes are packed into **segments**, immutable objects written once and
//! read back by byte range. Two implementations of one seam:
//! - [`Archive::S3`]: an S3-compatible object store (AWS S3, Garage, MinIO…);
//! - [`Archive::LocalDir`]: a directory on local disk (the embedded default).
//!
//! **What the seam guarantees.**
//! - [`Archive::put_segment`] returns only once the object has been read back
//!   whole and its length and SHA-256 match what was sent. We verify by a
//!   read-back rather than by trusting a checksum the server returns: third
//!   party S3 servers differ in which checksum headers they honour (the SDK
//!   is told to send and check checksums only "when required"), whereas a
//!   read-back proves exactly what a later byte-range read will see.
//!   Segments are bounded batches, so reading one back is cheap.
//! - [`Archive::read_range`] returns exactly `len` bytes or an error: a short
//!   read is never handed on.
//! - Errors say whether the store **answered** that an object is absent
//!   ([`ArchiveError::Missing`]) or could not answer at all
//!   ([`ArchiveError::Unavailable`]). Callers turn `Unavailable` into 503;
//!   a timeout, a refused connection, a server error or a failed check is
//!   never reported as `Missing`, so it can never make a key look new.
//! - Names are unique by construction ([`SegmentName::generate`]): Garage
//!   ignores `If-None-Match` on writes, so we never rely on a conditional put
//!   to avoid overwriting a segment.
//!
//! The tiering worker (`crate::tiering`) writes segments in the format of
//! [`segment`]; lookups and claims of a tiered key read one outcome back by
//! byte range (`crate::engine`).

mod local;
mod location;
mod name;
mod s3;
pub mod segment;

use bytes::Bytes;
use sha2::{Digest, Sha256};

pub use local::LocalDir;
pub use location::{ArchiveLocation, S3Settings};
pub use name::{InvalidSegmentName, SegmentName};
pub use s3::S3Archive;

/// The archive could not answer (store down, slow, refusing us, or a copy
/// that failed its check). Callers answer 503, never "new".
#[derive(Debug, thiserror::Error)]
#[error("the archive could not answer: {0}")]
pub struct ArchiveUnavailable(pub String);

/// Why a read from the archive failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The store answered that no object has this name.
    #[error("segment {0} is not in the archive")]
    Missing(SegmentName),
    #[error(transparent)]
    Unavailable(#[from] ArchiveUnavailable),
}

impl ArchiveError {
    fn unavailable(what: impl Into<String>) -> Self {
        Self::Unavailable(ArchiveUnavailable(what.into()))
    }
}

/// A segment as written and verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentInfo {
    pub name: SegmentName,
    pub len: u64,
    pub sha256: [u8; 32],
}

impl SegmentInfo {
    /// What `bytes` stored under `name` must read back as.
    pub fn of(name: SegmentName, bytes: &[u8]) -> Self {
        Self {
            name,
            len: bytes.len() as u64,
            sha256: Sha256::digest(bytes).into(),
        }
    }

    pub fn sha256_hex(&self) -> String {
        hex::encode(self.sha256)
    }
}

/// The configured archive.
#[derive(Clone)]
pub enum Archive {
    S3(S3Archive),
    LocalDir(LocalDir),
}

impl Archive {
    /// Opens the archive at `location`. A local directory is created here;
    /// an object store is not contacted (see [`Self::check`]).
    pub async fn open(location: &ArchiveLocation) -> anyhow::Result<Self> {
        Ok(match location {
            ArchiveLocation::LocalDir(root) => Self::LocalDir(LocalDir::open(root)?),
            ArchiveLocation::S3 {
                bucket,
                prefix,
                settings,
            } => Self::S3(S3Archive::connect(bucket, prefix, settings).await),
        })
    }

    /// What the start-up log line says.
    pub fn describe(&self) -> String {
        match self {
            Self::S3(s3) => s3.describe(),
            Self::LocalDir(dir) => dir.describe(),
        }
    }

    /// Asks the store whether it can serve us (the bucket exists and our
    /// credentials reach it; the directory is writable).
    pub async fn check(&self) -> Result<(), ArchiveUnavailable> {
        match self {
            Self::S3(s3) => s3.check().await,
            Self::LocalDir(dir) => dir.check().await,
        }
    }

    /// Writes `bytes` as the segment `name`, then reads it back and checks
    /// its length and SHA-256. Only an `Ok` means the copy is good.
    pub async fn put_segment(
        &self,
        name: &SegmentName,
        bytes: Bytes,
    ) -> Result<SegmentInfo, ArchiveUnavailable> {
        let info = SegmentInfo::of(name.clone(), &bytes);
        match self {
            Self::S3(s3) => s3.put(name, bytes).await?,
            Self::LocalDir(dir) => dir.put(name, bytes).await?,
        }
        match self.verify(&info).await {
            Ok(()) => Ok(info),
            Err(ArchiveError::Missing(_)) => Err(ArchiveUnavailable(format!(
                "segment {name} was written but cannot be read back"
            ))),
            Err(ArchiveError::Unavailable(e)) => Err(e),
        }
    }

    /// Reads the whole of `info.name` and checks it against `info`.
    pub async fn verify(&self, info: &SegmentInfo) -> Result<(), ArchiveError> {
        let bytes = match self {
            Self::S3(s3) => s3.read_all(&info.name).await?,
            Self::LocalDir(dir) => dir.read_all(&info.name).await?,
        };
        if bytes.len() as u64 != info.len {
            return Err(ArchiveError::unavailable(format!(
                "segment {} has length {}, expected {}",
                info.name,
                bytes.len(),
                info.len
            )));
        }
        let sha256: [u8; 32] = Sha256::digest(&bytes).into();
        if sha256 != info.sha256 {
            return Err(ArchiveError::unavailable(format!(
                "segment {} has sha256 {}, expected {}",
                info.name,
                hex::encode(sha256),
                info.sha256_hex()
            )));
        }
        Ok(())
    }

    /// Exactly `len` bytes of segment `name` from `offset`.
    pub async fn read_range(
        &self,
        name: &SegmentName,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ArchiveError> {
        if offset.checked_add(len).is_none() {
            return Err(ArchiveError::unavailable(format!(
                "range {offset}+{len} of segment {name} overflows"
            )));
        }
        let bytes = match self {
            Self::S3(s3) => s3.read_range(name, offset, len).await?,
            Self::LocalDir(dir) => dir.read_range(name, offset, len).await?,
        };
        if bytes.len() as u64 != len {
            return Err(ArchiveError::unavailable(format!(
                "read {} bytes of segment {name} at {offset}, expected {len}",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// Deletes segment `name`. Deleting an absent segment succeeds, so a
    /// cleanup interrupted half-way can simply run again.
    pub async fn delete(&self, name: &SegmentName) -> Result<(), ArchiveUnavailable> {
        match self {
            Self::S3(s3) => s3.delete(name).await,
            Self::LocalDir(dir) => dir.delete(name).await,
        }
    }

    /// Whether the store says segment `name` exists.
    pub async fn exists(&self, name: &SegmentName) -> Result<bool, ArchiveUnavailable> {
        match self {
            Self::S3(s3) => s3.exists(name).await,
            Self::LocalDir(dir) => dir.exists(name).await,
        }
    }
}
