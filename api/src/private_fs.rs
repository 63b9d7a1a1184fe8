//! Files only this process's user may read: the data directory (0700) and
//! everything the service writes in it (0600) — generated secrets, the SQLite
//! database and its `-wal`/`-shm` companions, the local archive's segments.
//!
//! New files are always opened *create-new* (`O_EXCL`) with `O_NOFOLLOW`
//! and mode 0600 under a fresh random name, then renamed or linked into
//! place: a file or symbolic link planted at the final name beforehand is
//! never written through, and a reader sees the whole file or none. The
//! mode is given at creation, so there is no moment when the file is
//! readable by others (the umask can only remove bits).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Mode of every directory the service creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the service writes.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and any missing parents, each 0700. An existing directory
/// keeps its mode (it may be a mount point we do not own).
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Opens a new file at `path` for writing: 0600, failing if anything —
/// a file or a symbolic link — already has that name.
pub fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Opens an existing file for reading without following a symbolic link at
/// its last component.
pub fn open_no_follow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Whether `mode` lets the group or others do anything at all.
pub fn shared(mode: u32) -> bool {
    mode & 0o077 != 0
}

/// A fresh, unguessable name beside `path` for writing before the final
/// rename: dot-prefixed, so it never looks like the file it becomes.
pub fn temporary_beside(path: &Path) -> PathBuf {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let random = hex::encode(rand::random::<[u8; 8]>());
    path.with_file_name(format!(".{name}.{random}.tmp"))
}

/// How [`write_atomically`] puts the file in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `rename`: replaces a file already there.
    Replace,
    /// `link`: fails with `AlreadyExists` if the name is taken (the first of
    /// several processes wins; the others read its file).
    KeepExisting,
}

/// Writes `bytes` to a fresh private temporary file beside `path`, fsyncs
/// it, and puts it at `path`; the temporary name is removed either way.
/// The directory itself is not fsynced here.
pub fn write_atomically(path: &Path, bytes: &[u8], place: Place) -> io::Result<()> {
    let tmp = temporary_beside(path);
    let written = (|| {
        let mut file = create_new(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        match place {
            Place::Replace => fs::rename(&tmp, path),
            Place::KeepExisting => fs::hard_link(&tmp, path),
        }
    })();
    if written.is_err() || place == Place::KeepExisting {
        let _ = fs::remove_file(&tmp);
    }
    written
}

/// Makes sure the file at `path` exists and is private before another
/// library (SQLite) opens it: creates it empty with mode 0600 if missing,
/// and takes group and other permissions away from an existing one.
/// Returns the mode the file had when it was found too open.
pub fn ensure_private_file(path: &Path) -> io::Result<Option<u32>> {
    match create_new(path) {
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let meta = fs::symlink_metadata(path)?;
            if meta.file_type().is_symlink() {
                // Let the opener decide; we never chmod through a link.
                return Ok(None);
            }
            let mode = meta.mode() & 0o777;
            if !shared(mode) {
                return Ok(None);
            }
            fs::set_permissions(path, fs::Permissions::from_mode(mode & 0o700))?;
            Ok(Some(mode))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("idemkey-private-{:016x}", rand::random::<u64>()));
        create_dir(&dir).unwrap();
        dir
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    #[test]
    fn directories_are_created_private_with_their_parents() {
        let root = scratch();
        let deep = root.join("a/b/c");
        create_dir(&deep).unwrap();
        for dir in [root.join("a"), root.join("a/b"), deep] {
            assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        }
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn files_are_written_private_and_never_through_a_planted_link() {
        let root = scratch();
        let target = root.join("victim");
        fs::write(&target, b"untouched").unwrap();
        let planted = root.join("secret");
        std::os::unix::fs::symlink(&target, &planted).unwrap();

        let err = write_atomically(&planted, b"new", Place::KeepExisting).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&target).unwrap(), b"untouched");
        assert!(create_new(&planted).is_err(), "create-new refuses a link");

        let fresh = root.join("fresh");
        write_atomically(&fresh, b"bytes", Place::KeepExisting).unwrap();
        assert_eq!(mode(&fresh), 0o600);
        write_atomically(&fresh, b"other", Place::Replace).unwrap();
        assert_eq!(
            (mode(&fresh), fs::read(&fresh).unwrap()),
            (0o600, b"other".to_vec())
        );
        let left: Vec<_> = fs::read_dir(&root).unwrap().collect();
        assert_eq!(left.len(), 3, "no temporary file is left behind");
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn an_open_file_is_made_private_before_it_is_used() {
        let root = scratch();
        let db = root.join("idemkey.db");
        assert_eq!(ensure_private_file(&db).unwrap(), None);
        assert_eq!(mode(&db), 0o600);
        fs::set_permissions(&db, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(ensure_private_file(&db).unwrap(), Some(0o644));
        assert_eq!(mode(&db), 0o600);
        fs::remove_dir_all(root).unwrap();
    }
}
