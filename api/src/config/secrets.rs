//! The secrets of the configuration: how given values are checked, and how
//! missing ones are generated into the data directory and read back.
//!
//! Every secret — given or generated — is at least [`MIN_SECRET_BYTES`]
//! long and does not look like a placeholder left in an example file; a
//! secret file in the data directory must be private (mode 0600 or
//! stricter) and is never read through a symbolic link. Any doubt stops the
//! server at start-up with an error that names the variable.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::{bail, Context};
use rand::RngCore;
use secrecy::SecretSlice;

use crate::private_fs::{self, Place};

/// Shortest secret accepted anywhere (RFC 7518's minimum for HS256 keys,
/// applied to every secret).
pub const MIN_SECRET_BYTES: usize = 32;

/// Why a value is not a usable secret, if it is not.
pub fn weakness(secret: &[u8]) -> Option<String> {
    if secret.len() < MIN_SECRET_BYTES {
        return Some(format!(
            "is {} bytes; at least {MIN_SECRET_BYTES} are required (generate one with `openssl rand -hex 32`)",
            secret.len()
        ));
    }
    if looks_like_a_placeholder(secret) {
        return Some(
            "looks like a placeholder from an example, not a secret (generate one with `openssl rand -hex 32`)"
                .to_owned(),
        );
    }
    None
}

/// Placeholder-looking: starts with a word examples use for "put yours
/// here", or is one short pattern repeated (`secretsecret…`, `xxxx…`).
fn looks_like_a_placeholder(secret: &[u8]) -> bool {
    const PREFIXES: [&str; 9] = [
        "change-me",
        "change_me",
        "changeme",
        "change me",
        "placeholder",
        "example",
        "replace-me",
        "replace_me",
        "replaceme",
    ];
    let lower = secret.to_ascii_lowercase();
    let starts = PREFIXES
        .iter()
        .any(|prefix| lower.starts_with(prefix.as_bytes()));
    let repeated = (1..=8).any(|period| {
        lower.len() > period
            && lower
                .iter()
                .enumerate()
                .all(|(i, b)| *b == lower[i % period])
    });
    starts || repeated
}

/// Checks one configured secret; the error names `variable` (and `which`
/// one of a list), never the value.
pub fn check(variable: &str, which: Option<&str>, secret: &[u8]) -> anyhow::Result<()> {
    match (weakness(secret), which) {
        (None, _) => Ok(()),
        (Some(why), None) => bail!("{variable}: the secret {why}"),
        (Some(why), Some(which)) => bail!("{variable}: {which} {why}"),
    }
}

/// `IDEMKEY_JWT_SECRETS`: `kid=secret` pairs, comma-separated.
pub fn parse_jwt_secrets(list: &str) -> anyhow::Result<Vec<(String, SecretSlice<u8>)>> {
    const VAR: &str = "IDEMKEY_JWT_SECRETS";
    let mut secrets = Vec::new();
    for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((kid, secret)) = pair.split_once('=') else {
            bail!("{VAR}: expected kid=secret pairs separated by commas");
        };
        if kid.is_empty() {
            bail!("{VAR}: a secret has an empty kid");
        }
        check(
            VAR,
            Some(&format!("the secret of kid {kid:?}")),
            secret.as_bytes(),
        )?;
        secrets.push((kid.to_owned(), secret.as_bytes().to_vec().into()));
    }
    if secrets.is_empty() {
        bail!("{VAR}: no kid=secret pair given");
    }
    Ok(secrets)
}

/// A comma-separated list of secrets, newest first
/// (`IDEMKEY_SESSION_SECRET`).
pub fn parse_secret_list(variable: &str, list: &str) -> anyhow::Result<Vec<SecretSlice<u8>>> {
    let secrets: Vec<Vec<u8>> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.as_bytes().to_vec())
        .collect();
    if secrets.is_empty() {
        bail!("{variable}: no secret given");
    }
    for (i, secret) in secrets.iter().enumerate() {
        let which = (secrets.len() > 1).then(|| format!("secret number {} of the list", i + 1));
        check(variable, which.as_deref(), secret)?;
    }
    Ok(secrets.into_iter().map(SecretSlice::from).collect())
}

/// A single secret (`IDEMKEY_SECRET`).
pub fn parse_secret(variable: &str, value: &str) -> anyhow::Result<SecretSlice<u8>> {
    check(variable, None, value.as_bytes())?;
    Ok(value.as_bytes().to_vec().into())
}

/// The secret kept in `data_dir/name` for `variable` when it is unset,
/// created on first use.
///
/// Creation is atomic even with several processes starting at once: 32
/// random bytes (64 hex characters) go to a private temporary file that is
/// hard-linked into place, which fails if another process got there first
/// — then we read theirs. Reading refuses a symbolic link, a file the group
/// or others may access, and a short or placeholder content.
pub fn stored_secret(
    data_dir: &Path,
    name: &str,
    variable: &str,
) -> anyhow::Result<SecretSlice<u8>> {
    let path = data_dir.join(name);
    if let Some(secret) = read_secret_file(&path, variable)? {
        return Ok(secret.into());
    }
    private_fs::create_dir(data_dir)
        .with_context(|| format!("IDEMKEY_DATA_DIR: cannot create {}", data_dir.display()))?;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    match private_fs::write_atomically(&path, hex::encode(bytes).as_bytes(), Place::KeepExisting) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(e)
                .with_context(|| format!("IDEMKEY_DATA_DIR: cannot write {}", path.display()))
        }
    }
    let secret = read_secret_file(&path, variable)?.with_context(|| {
        format!(
            "IDEMKEY_DATA_DIR: {} vanished as it was written",
            path.display()
        )
    })?;
    Ok(secret.into())
}

/// The trimmed content of a secret file, `None` if there is none.
fn read_secret_file(path: &Path, variable: &str) -> anyhow::Result<Option<Vec<u8>>> {
    let shown = path.display();
    let unset = format!("{variable} is unset, so its secret is kept in {shown}, but");
    let mut file = match private_fs::open_no_follow(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            bail!("{unset} that is a symbolic link; replace it with the file itself or set {variable}")
        }
        Err(e) => return Err(e).with_context(|| format!("{unset} it cannot be read")),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        bail!("{unset} that is not a regular file");
    }
    let mode = meta.mode() & 0o777;
    if private_fs::shared(mode) {
        bail!(
            "{unset} the group or others may access it (mode {mode:04o}); \
             run `chmod 600 {shown}` (and `chmod 700` its directory) or set {variable}"
        );
    }
    let mut text = Vec::new();
    file.read_to_end(&mut text)
        .with_context(|| format!("{unset} it cannot be read"))?;
    let secret = text.trim_ascii().to_vec();
    if let Some(why) = weakness(&secret) {
        bail!("{unset} the secret in it {why}");
    }
    Ok(Some(secret))
}
