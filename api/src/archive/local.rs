//! The local-directory archive (the embedded default).
//!
//! A segment `segments/2026/11/29/x.seg` is the file of that relative path
//! under the root. **Writes are atomic and durable**: the bytes go to a
//! dot-prefixed temporary file in the same directory, which is fsynced,
//! renamed to the final name, and then the directories from the segment's
//! up to the root are fsynced so the new entries survive a power cut. A
//! reader therefore sees a complete segment or none. A crash mid-write can
//! leave a `.…tmp` file behind; no segment name can start with a dot, so it
//! is never mistaken for a segment.
//!
//! **Everything is private**: directories are created 0700 and segments
//! 0600, opened create-new without following links (see
//! [`crate::private_fs`]).
//!
//! File I/O runs on tokio's blocking pool.

use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;

use super::{ArchiveError, ArchiveUnavailable, SegmentName};
use crate::private_fs::{self, Place};

#[derive(Clone)]
pub struct LocalDir {
    root: Arc<PathBuf>,
}

impl LocalDir {
    /// The archive rooted at `root`, created if missing.
    pub fn open(root: &Path) -> anyhow::Result<Self> {
        private_fs::create_dir(root).with_context(|| {
            format!(
                "IDEMKEY_ARCHIVE_URL: cannot create the archive directory {}",
                root.display()
            )
        })?;
        Ok(Self {
            root: Arc::new(root.to_path_buf()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn describe(&self) -> String {
        format!("local directory {}", self.root.display())
    }

    /// The file holding segment `name`.
    pub fn path_of(&self, name: &SegmentName) -> PathBuf {
        self.root.join(name.as_str())
    }

    pub async fn check(&self) -> Result<(), ArchiveUnavailable> {
        let root = self.root.clone();
        blocking(move || {
            let probe = root.join(format!(
                ".probe-{}.tmp",
                hex::encode(rand::random::<[u8; 8]>())
            ));
            private_fs::create_new(&probe)?.write_all(b"ok")?;
            fs::remove_file(&probe)
        })
        .await
        .map_err(|e| unavailable("cannot write to the archive directory", e))
    }

    pub async fn put(&self, name: &SegmentName, bytes: Bytes) -> Result<(), ArchiveUnavailable> {
        let (root, path) = (self.root.clone(), self.path_of(name));
        blocking(move || write_atomically(&root, &path, &bytes))
            .await
            .map_err(|e| {
                unavailable(
                    &format!("cannot write segment {}", path_display(&self.root, name)),
                    e,
                )
            })
    }

    pub async fn read_all(&self, name: &SegmentName) -> Result<Bytes, ArchiveError> {
        let path = self.path_of(name);
        let read = blocking(move || fs::read(path)).await;
        self.answer(name, read.map(Bytes::from))
    }

    pub async fn read_range(
        &self,
        name: &SegmentName,
        offset: u64,
        len: u64,
    ) -> Result<Bytes, ArchiveError> {
        let path = self.path_of(name);
        let read = blocking(move || {
            let mut file = File::open(path)?;
            file.seek(SeekFrom::Start(offset))?;
            let mut buf = Vec::with_capacity(usize::try_from(len).unwrap_or(0).min(1 << 26));
            file.take(len).read_to_end(&mut buf)?;
            Ok(buf)
        })
        .await;
        // A short read is caught by `Archive::read_range`'s length check.
        self.answer(name, read.map(Bytes::from))
    }

    pub async fn delete(&self, name: &SegmentName) -> Result<(), ArchiveUnavailable> {
        let path = self.path_of(name);
        match blocking(move || fs::remove_file(path)).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                Err(unavailable(&format!("cannot delete segment {name}"), e))
            }
            _ => Ok(()),
        }
    }

    pub async fn exists(&self, name: &SegmentName) -> Result<bool, ArchiveUnavailable> {
        let path = self.path_of(name);
        match blocking(move || fs::metadata(path)).await {
            Ok(meta) => Ok(meta.is_file()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(unavailable(&format!("cannot look up segment {name}"), e)),
        }
    }

    /// "Not found" from the file system is `Missing`; anything else is
    /// `Unavailable`.
    fn answer(&self, name: &SegmentName, read: io::Result<Bytes>) -> Result<Bytes, ArchiveError> {
        read.map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ArchiveError::Missing(name.clone()),
            _ => unavailable(&format!("cannot read segment {name}"), e).into(),
        })
    }
}

fn write_atomically(root: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(root);
    private_fs::create_dir(dir)?;
    private_fs::write_atomically(path, bytes, Place::Replace)?;
    // The rename, and any directories just created, reach the disk.
    for d in dir.ancestors() {
        File::open(d)?.sync_all()?;
        if d == root {
            break;
        }
    }
    Ok(())
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(io::Error::other(e)))
}

fn unavailable(what: &str, e: io::Error) -> ArchiveUnavailable {
    ArchiveUnavailable(format!("{what}: {e}"))
}

fn path_display(root: &Path, name: &SegmentName) -> String {
    root.join(name.as_str()).display().to_string()
}
