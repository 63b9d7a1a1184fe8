//! Configuration from `IDEMKEY_*` environment variables (SPEC section 10).
//!
//! An optional file named by `IDEMKEY_CONFIG_FILE` (lines of `NAME=value`)
//! may add variables; a variable already set in the environment wins. Every
//! error names the variable at fault.

mod secrets;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::archive::ArchiveLocation;
use crate::auth::AuthSettings;
use crate::domain::duration::parse_duration;

pub use secrets::{weakness, MIN_SECRET_BYTES};

/// The kid of the development secret generated into the data directory.
pub const DEV_KID: &str = "dev";

#[derive(Debug, Clone)]
pub struct Config {
    pub listen: String,
    /// `IDEMKEY_METRICS_LISTEN`: a second listener, meant for a private
    /// address, that serves `/metrics` without credentials. `None`: only the
    /// API listener serves it, to tokens with the `metrics` role.
    pub metrics_listen: Option<String>,
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
    /// `IDEMKEY_SESSION_SECRET`: the dashboard's keys for sessions and CSRF
    /// tokens, newest first; the first signs, every one verifies.
    pub session_secrets: Vec<Vec<u8>>,
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
        let metrics_listen = var("IDEMKEY_METRICS_LISTEN");
        if let Some(addr) = &metrics_listen {
            if std::net::ToSocketAddrs::to_socket_addrs(addr).is_err() {
                bail!("IDEMKEY_METRICS_LISTEN: expected host:port, got {addr:?}");
            }
        }
        let jwt_jwks_file = var("IDEMKEY_JWT_JWKS_FILE").map(PathBuf::from);
        // The generated development secret exists only when no keys at all
        // are configured: naming a JWKS file must not leave the server
        // accepting tokens signed with a secret lying in the data directory.
        let jwt_secrets = match (var("IDEMKEY_JWT_SECRETS"), &jwt_jwks_file) {
            (Some(list), _) => secrets::parse_jwt_secrets(&list)?,
            (None, Some(_)) => Vec::new(),
            (None, None) => vec![(
                DEV_KID.to_owned(),
                secrets::stored_secret(&data_dir, "jwt-dev-secret", "IDEMKEY_JWT_SECRETS")?,
            )],
        };
        let effect_secret = match var("IDEMKEY_SECRET") {
            Some(s) => secrets::parse_secret("IDEMKEY_SECRET", &s)?,
            None => secrets::stored_secret(&data_dir, "effect-secret", "IDEMKEY_SECRET")?,
        };
        let session_secrets = match var("IDEMKEY_SESSION_SECRET") {
            Some(list) => secrets::parse_secret_list("IDEMKEY_SESSION_SECRET", &list)?,
            None => vec![secrets::stored_secret(
                &data_dir,
                "session-secret",
                "IDEMKEY_SESSION_SECRET",
            )?],
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
            metrics_listen,
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
            session_secrets,
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
