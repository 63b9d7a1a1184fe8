//! The SQLite database's files are private: the database is created 0600
//! (and its directory 0700) before SQLite opens it, because SQLite gives its
//! `-wal` and `-shm` files the database file's mode. An existing file the
//! group or others could read is tightened, with a warning.

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::private_fs;

pub fn make_private(database: &Path) -> anyhow::Result<()> {
    if let Some(dir) = database.parent().filter(|d| !d.as_os_str().is_empty()) {
        private_fs::create_dir(dir)
            .with_context(|| format!("creating {} for the SQLite database", dir.display()))?;
    }
    tighten(database)?;
    // Left by a process that stopped without closing the database.
    for suffix in ["-wal", "-shm"] {
        let mut name = database.as_os_str().to_owned();
        name.push(suffix);
        let companion = PathBuf::from(name);
        if companion.exists() {
            tighten(&companion)?;
        }
    }
    Ok(())
}

fn tighten(path: &Path) -> anyhow::Result<()> {
    let was = private_fs::ensure_private_file(path)
        .with_context(|| format!("making the SQLite file {} private", path.display()))?;
    if let Some(mode) = was {
        tracing::warn!(
            file = %path.display(),
            was = format!("{mode:04o}"),
            "the SQLite file could be read by others; it is now private (0600)"
        );
    }
    Ok(())
}
