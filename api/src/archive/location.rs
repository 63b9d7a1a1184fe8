//! Where the archive lives, from `IDEMKEY_ARCHIVE_URL` and the standard AWS
//! variables (SPEC section 10).
//!
//! - `s3://bucket[/prefix]`: an S3-compatible store. Endpoint, region and
//!   credentials come from `AWS_ENDPOINT_URL`, `AWS_REGION`,
//!   `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`);
//!   whatever is unset is left to the AWS SDK's usual chain (profile files,
//!   instance roles).
//! - `file:///path`: a local directory.
//! - unset: `<data dir>/archive`.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::bail;

/// The AWS settings read from the environment; `None` leaves a value to the
/// SDK's default chain.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl S3Settings {
    pub fn from_vars(var: &impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let settings = Self {
            endpoint: var("AWS_ENDPOINT_URL"),
            region: var("AWS_REGION"),
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY"),
            session_token: var("AWS_SESSION_TOKEN"),
        };
        match (&settings.access_key_id, &settings.secret_access_key) {
            (Some(_), None) => bail!("AWS_SECRET_ACCESS_KEY: must be set with AWS_ACCESS_KEY_ID"),
            (None, Some(_)) => bail!("AWS_ACCESS_KEY_ID: must be set with AWS_SECRET_ACCESS_KEY"),
            _ => {}
        }
        if let Some(endpoint) = &settings.endpoint {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                bail!(
                    "AWS_ENDPOINT_URL: expected http://host[:port] or https://…, got {endpoint:?}"
                );
            }
        }
        Ok(settings)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveLocation {
    /// Objects named `<prefix>/<segment name>` (no prefix: the bare name).
    S3 {
        bucket: String,
        prefix: String,
        settings: S3Settings,
    },
    LocalDir(PathBuf),
}

impl ArchiveLocation {
    /// Reads `IDEMKEY_ARCHIVE_URL` (and, for `s3://`, the AWS variables).
    pub fn from_vars(
        var: &impl Fn(&str) -> Option<String>,
        data_dir: &Path,
    ) -> anyhow::Result<Self> {
        let Some(url) = var("IDEMKEY_ARCHIVE_URL") else {
            return Ok(Self::LocalDir(data_dir.join("archive")));
        };
        if let Some(path) = url.strip_prefix("file://") {
            if path.is_empty() {
                bail!("IDEMKEY_ARCHIVE_URL: file:// needs a directory, as in file:///var/lib/idemkey/archive");
            }
            return Ok(Self::LocalDir(PathBuf::from(path)));
        }
        let Some(rest) = url.strip_prefix("s3://") else {
            bail!("IDEMKEY_ARCHIVE_URL: expected s3://bucket/prefix or file:///path, got {url:?}");
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if !valid_bucket(bucket) {
            bail!("IDEMKEY_ARCHIVE_URL: {bucket:?} is not a bucket name (3-63 characters of a-z, 0-9, '.', '-')");
        }
        Ok(Self::S3 {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
            settings: S3Settings::from_vars(var)?,
        })
    }
}

fn valid_bucket(b: &str) -> bool {
    (3..=63).contains(&b.len())
        && b.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'.' || c == b'-')
        && !b.starts_with(['.', '-'])
        && !b.ends_with(['.', '-'])
}
