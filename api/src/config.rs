//! Configuration from `IDEMKEY_*` environment variables (SPEC section 10).
//!
//! An optional file named by `IDEMKEY_CONFIG_FILE` (lines of `NAME=value`)
//! may add variables; a variable already set in the environment wins. Every
//! error names the variable at fault.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use rand::RngCore;

use crate::archive::ArchiveLocation;
use crate::auth::{AuthSettings, MIN_HS256_SECRET_BYTES};
use crate::domain::duration::parse_duration;

/// Shortest effect-id key we accept (HS256 keys follow RFC 7518's 32 bytes,
/// see `auth::MIN_HS256_SECRET_BYTES`).
const MIN_SECRET_BYTES: usize = 16;
/// The kid of the development secret generated into the data directory.
pub const DEV_KID: &str = "dev";

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: String,
    /// `postgres://…` or `sqlite://…`; by default a SQLite file in the data
    /// directory.
    pub database_url: String,
    /// `redis://…`: Redis as a shared read cache of final outcomes, behind
    /// the in-process one. `None`: the in-process cache alone.
    pub redis_url: Option<String>,
    /// `IDEMKEY_CACHE`: `on` (default) or `off` — no outcome cache at all,
    /// for measuring what it saves.
    pub cache: bool,
    /// Where tiered outcomes go: `IDEMKEY_ARCHIVE_URL` (`s3://bucket/prefix`
    /// with the AWS variables, or `file:///path`); by default the
    /// `archive` directory in the data directory.
    pub archive: ArchiveLocation,
    pub data_dir: PathBuf,
    pub jwt_issuer: String,
    pub jwt_audience: String,
    /// `(kid, secret)` pairs; the first one signs `idemkey token`.
    pub jwt_secrets: Vec<(String, Vec<u8>)>,
    pub jwt_jwks_file: Option<PathBuf>,
    /// True when the only key is the generated development secret.
    pub dev_jwt_secret: bool,
    pub effect_secret: Vec<u8>,
    pub workers: bool,
    pub worker_interval: Duration,
    /// `IDEMKEY_TEST_FAILPOINT`: where the archive worker stops dead, for
    /// crash tests. Never set in production.
    pub failpoint: Option<String>,
    /// `IDEMKEY_TENANT_RATE_LIMIT`: API calls per second per tenant on this
    /// node; `None`: no limit.
    pub tenant_rate_limit: Option<std::num::NonZeroU32>,
    /// `IDEMKEY_DATABASE_POOL`: Postgres connections per node.
    pub database_pool: u32,
}

impl Config {
    /// Adds the variables of the optional `IDEMKEY_CONFIG_FILE` to the
    /// process environment (variables already set win). Call it before
    /// anything reads the environment, logging included.
    pub fn load_file() -> anyhow::Result<()> {
        if let Ok(file) = std::env::var("IDEMKEY_CONFIG_FILE") {
            dotenvy::from_path(&file)
                .with_context(|| format!("IDEMKEY_CONFIG_FILE: cannot read {file:?}"))?;
        }
        Ok(())
    }

    /// Reads the process environment.
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Builds a configuration from any variable source (tests pass a map).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let data_dir = PathBuf::from(var("IDEMKEY_DATA_DIR").unwrap_or_else(|| "./data".into()));
        let listen = var("IDEMKEY_LISTEN").unwrap_or_else(|| "127.0.0.1:8080".into());
        if std::net::ToSocketAddrs::to_socket_addrs(&listen).is_err() {
            bail!("IDEMKEY_LISTEN: expected host:port, got {listen:?}");
        }
        let jwt_jwks_file = var("IDEMKEY_JWT_JWKS_FILE").map(PathBuf::from);
        // The generated development secret exists only when no keys at all
        // are configured: naming a JWKS file must not leave the server
        // accepting tokens signed with a secret lying in the data directory.
        let jwt_secrets = match (var("IDEMKEY_JWT_SECRETS"), &jwt_jwks_file) {
            (Some(list), _) => parse_secrets(&list)?,
            (None, Some(_)) => Vec::new(),
            (None, None) => vec![(
                DEV_KID.to_owned(),
                stored_secret(&data_dir, "jwt-dev-secret")?,
            )],
        };
        let effect_secret = match var("IDEMKEY_SECRET") {
            Some(s) if s.len() < MIN_SECRET_BYTES => {
                bail!("IDEMKEY_SECRET: must be at least {MIN_SECRET_BYTES} bytes")
            }
            Some(s) => s.into_bytes(),
            None => stored_secret(&data_dir, "effect-secret")?,
        };
        let cache = match var("IDEMKEY_CACHE").as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => bail!("IDEMKEY_CACHE: expected on or off, got {other:?}"),
        };
        let workers = match var("IDEMKEY_WORKERS").as_deref() {
            None | Some("on") => true,
            Some("off") => false,
            Some(other) => bail!("IDEMKEY_WORKERS: expected on or off, got {other:?}"),
        };
        let worker_interval = match var("IDEMKEY_WORKER_INTERVAL") {
            None => Duration::from_secs(30),
            Some(s) => parse_duration(&s)
                .filter(|d| !d.is_zero())
                .with_context(|| {
                    format!("IDEMKEY_WORKER_INTERVAL: expected a duration such as 30s, got {s:?}")
                })?,
        };
        let tenant_rate_limit = match var("IDEMKEY_TENANT_RATE_LIMIT").as_deref() {
            None | Some("off") => None,
            Some(s) => Some(s.parse::<std::num::NonZeroU32>().ok().with_context(|| {
                format!(
                    "IDEMKEY_TENANT_RATE_LIMIT: expected calls per second (a positive integer) or off, got {s:?}"
                )
            })?),
        };
        let database_pool = match var("IDEMKEY_DATABASE_POOL") {
            None => crate::store::DEFAULT_POOL,
            Some(s) => s
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .with_context(|| {
                    format!("IDEMKEY_DATABASE_POOL: expected 1-1000 connections, got {s:?}")
                })?,
        };
        let redis_url = var("IDEMKEY_REDIS_URL");
        if let Some(url) = &redis_url {
            let supported = ["redis://", "redis+unix://", "unix://"];
            if !supported.iter().any(|scheme| url.starts_with(scheme)) {
                bail!(
                    "IDEMKEY_REDIS_URL: expected redis://[:password@]host[:port][/db] \
                     (TLS is not supported in this build), got {:?}",
                    crate::store::redact(url)
                );
            }
        }
        let archive = ArchiveLocation::from_vars(&var, &data_dir)?;
        Ok(Self {
            listen,
            database_url: var("IDEMKEY_DATABASE_URL")
                .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("idemkey.db").display())),
            redis_url,
            cache,
            archive,
            jwt_issuer: var("IDEMKEY_JWT_ISSUER").unwrap_or_else(|| "idemkey".into()),
            jwt_audience: var("IDEMKEY_JWT_AUDIENCE").unwrap_or_else(|| "idemkey".into()),
            jwt_secrets,
            dev_jwt_secret: var("IDEMKEY_JWT_SECRETS").is_none() && jwt_jwks_file.is_none(),
            jwt_jwks_file,
            effect_secret,
            workers,
            worker_interval,
            failpoint: var("IDEMKEY_TEST_FAILPOINT"),
            tenant_rate_limit,
            database_pool,
            data_dir,
        })
    }

    pub fn auth_settings(&self) -> AuthSettings {
        AuthSettings {
            issuer: self.jwt_issuer.clone(),
            audience: self.jwt_audience.clone(),
            hs256: self.jwt_secrets.clone(),
            jwks: self.jwt_jwks_file.clone(),
        }
    }
}

fn parse_secrets(list: &str) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    list.split(',')
        .map(str::trim)
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let Some((kid, secret)) = pair.split_once('=') else {
                bail!("IDEMKEY_JWT_SECRETS: expected kid=secret pairs separated by commas");
            };
            if kid.is_empty() {
                bail!("IDEMKEY_JWT_SECRETS: a secret has an empty kid");
            }
            if secret.len() < MIN_HS256_SECRET_BYTES {
                bail!("IDEMKEY_JWT_SECRETS: the secret of kid {kid:?} is shorter than {MIN_HS256_SECRET_BYTES} bytes");
            }
            Ok((kid.to_owned(), secret.as_bytes().to_vec()))
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .and_then(|secrets| {
            if secrets.is_empty() {
                bail!("IDEMKEY_JWT_SECRETS: no kid=secret pair given");
            }
            Ok(secrets)
        })
}

/// A random secret kept in the data directory, created on first use.
///
/// Creation is atomic even with several processes starting at once: the
/// secret is written to a private temporary file and hard-linked into place,
/// which fails if another process got there first — then we read theirs.
fn stored_secret(data_dir: &Path, name: &str) -> anyhow::Result<Vec<u8>> {
    let path = data_dir.join(name);
    if let Ok(existing) = fs::read_to_string(&path) {
        return Ok(existing.trim().as_bytes().to_vec());
    }
    fs::create_dir_all(data_dir)
        .with_context(|| format!("IDEMKEY_DATA_DIR: cannot create {}", data_dir.display()))?;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let tmp = data_dir.join(format!(".{name}.{}", std::process::id()));
    let mut file = fs::File::create(&tmp)
        .with_context(|| format!("IDEMKEY_DATA_DIR: cannot write {}", tmp.display()))?;
    file.write_all(hex::encode(bytes).as_bytes())?;
    file.sync_all()?;
    let linked = fs::hard_link(&tmp, &path);
    let _ = fs::remove_file(&tmp);
    if let Err(e) = linked {
        if e.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(e)
                .with_context(|| format!("IDEMKEY_DATA_DIR: cannot write {}", path.display()));
        }
    }
    Ok(fs::read_to_string(&path)?.trim().as_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> anyhow::Result<Config> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_vars(|name| map.get(name).cloned())
    }

    const SECRETS: (&str, &str) = (
        "IDEMKEY_JWT_SECRETS",
        "k1=0123456789abcdef0123456789abcdef,k2=fedcba9876543210fedcba9876543210",
    );
    const EFFECT: (&str, &str) = ("IDEMKEY_SECRET", "0123456789abcdef");

    #[test]
    fn defaults_follow_the_contract() {
        let c = config(&[SECRETS, EFFECT]).unwrap();
        assert_eq!(c.listen, "127.0.0.1:8080");
        assert_eq!(c.jwt_issuer, "idemkey");
        assert_eq!(c.jwt_audience, "idemkey");
        assert_eq!(c.data_dir, PathBuf::from("./data"));
        assert_eq!(c.database_url, "sqlite://./data/idemkey.db");
        assert!(c.workers);
        assert_eq!(c.worker_interval, Duration::from_secs(30));
        assert_eq!(c.jwt_secrets[0].0, "k1");
        assert_eq!(c.jwt_secrets.len(), 2);
        assert_eq!(c.redis_url, None);
        assert_eq!(
            c.archive,
            ArchiveLocation::LocalDir(PathBuf::from("./data/archive"))
        );
        let c = config(&[
            SECRETS,
            EFFECT,
            ("IDEMKEY_REDIS_URL", "redis://127.0.0.1:6379/2"),
        ]);
        assert_eq!(
            c.unwrap().redis_url.as_deref(),
            Some("redis://127.0.0.1:6379/2")
        );
    }

    #[test]
    fn errors_name_the_variable_at_fault() {
        let cases = [
            ("IDEMKEY_LISTEN", "nonsense"),
            ("IDEMKEY_WORKERS", "maybe"),
            ("IDEMKEY_CACHE", "maybe"),
            ("IDEMKEY_WORKER_INTERVAL", "soon"),
            ("IDEMKEY_JWT_SECRETS", "k1"),
            ("IDEMKEY_JWT_SECRETS", "k1=short"),
            ("IDEMKEY_SECRET", "short"),
            ("IDEMKEY_REDIS_URL", "rediss://cache.internal:6380"),
            ("IDEMKEY_REDIS_URL", "127.0.0.1:6379"),
            ("IDEMKEY_ARCHIVE_URL", "https://s3.amazonaws.com/bucket"),
            ("IDEMKEY_ARCHIVE_URL", "/var/lib/idemkey/archive"),
            ("IDEMKEY_ARCHIVE_URL", "file://"),
            ("IDEMKEY_ARCHIVE_URL", "s3://"),
            ("IDEMKEY_ARCHIVE_URL", "s3://Upper_Case/prefix"),
        ];
        for (name, value) in cases {
            let err = config(&[SECRETS, EFFECT, (name, value)]).unwrap_err();
            assert!(format!("{err:#}").contains(name), "{name}: {err:#}");
        }
    }

    #[test]
    fn the_archive_url_picks_s3_or_a_local_directory() {
        let s3 = config(&[
            SECRETS,
            EFFECT,
            ("IDEMKEY_ARCHIVE_URL", "s3://idemkey-prod/tiered/eu/"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:3900"),
            ("AWS_REGION", "garage"),
            ("AWS_ACCESS_KEY_ID", "GK123"),
            ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
        ])
        .unwrap();
        let ArchiveLocation::S3 {
            bucket,
            prefix,
            settings,
        } = s3.archive
        else {
            panic!("expected an S3 archive")
        };
        assert_eq!(
            (bucket.as_str(), prefix.as_str()),
            ("idemkey-prod", "tiered/eu")
        );
        assert_eq!(settings.endpoint.as_deref(), Some("http://127.0.0.1:3900"));
        assert_eq!(settings.region.as_deref(), Some("garage"));
        assert_eq!(settings.access_key_id.as_deref(), Some("GK123"));
        assert!(!format!("{settings:?}").contains("s3cr3t"));

        let bare = config(&[SECRETS, EFFECT, ("IDEMKEY_ARCHIVE_URL", "s3://bucket")]).unwrap();
        assert!(matches!(
            bare.archive,
            ArchiveLocation::S3 { ref prefix, ref settings, .. }
                if prefix.is_empty() && *settings == Default::default()
        ));

        let file = config(&[
            SECRETS,
            EFFECT,
            ("IDEMKEY_ARCHIVE_URL", "file:///srv/archive"),
        ]);
        assert_eq!(
            file.unwrap().archive,
            ArchiveLocation::LocalDir(PathBuf::from("/srv/archive"))
        );
    }

    #[test]
    fn half_a_pair_of_aws_credentials_is_refused() {
        let s3 = ("IDEMKEY_ARCHIVE_URL", "s3://bucket/p");
        let err = config(&[SECRETS, EFFECT, s3, ("AWS_ACCESS_KEY_ID", "GK1")]).unwrap_err();
        assert!(
            format!("{err:#}").contains("AWS_SECRET_ACCESS_KEY"),
            "{err:#}"
        );
        let err =
            config(&[SECRETS, EFFECT, s3, ("AWS_ENDPOINT_URL", "localhost:3900")]).unwrap_err();
        assert!(format!("{err:#}").contains("AWS_ENDPOINT_URL"), "{err:#}");
        // The AWS variables matter only for an s3:// archive.
        assert!(config(&[SECRETS, EFFECT, ("AWS_ACCESS_KEY_ID", "GK1")]).is_ok());
    }

    #[test]
    fn a_jwks_file_alone_brings_no_development_secret() {
        let c = config(&[EFFECT, ("IDEMKEY_JWT_JWKS_FILE", "/etc/idemkey/jwks.json")]).unwrap();
        assert!(c.jwt_secrets.is_empty());
    }

    #[test]
    fn generated_secrets_persist_in_the_data_dir() {
        let dir = std::env::temp_dir().join(format!("idemkey-config-{}", rand::random::<u64>()));
        let dir_s = dir.to_str().unwrap();
        let first = config(&[("IDEMKEY_DATA_DIR", dir_s)]).unwrap();
        let second = config(&[("IDEMKEY_DATA_DIR", dir_s)]).unwrap();
        assert_eq!(first.effect_secret, second.effect_secret);
        assert_eq!(first.jwt_secrets, second.jwt_secrets);
        assert_eq!(first.jwt_secrets[0].0, DEV_KID);
        assert_ne!(first.effect_secret, first.jwt_secrets[0].1);
        fs::remove_dir_all(dir).unwrap();
    }
}
