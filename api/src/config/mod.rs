//! Configuration from `IDEMKEY_*` environment variables, read by clap
//! (`args`: each variable with its default and its parser).
//!
//! An optional file named by `IDEMKEY_CONFIG_FILE` (lines of `NAME=value`)
//! may add variables; a variable already set in the environment wins. Every
//! error names the variable at fault. Secrets (and the URLs, which may carry
//! passwords) are kept in `secrecy` types: `Debug` shows none of them.

mod args;
#[cfg(test)]
mod reading_tests;
mod secrets;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::FromArgMatches;
use secrecy::{ExposeSecret, SecretSlice, SecretString};

use self::args::Args;
use crate::archive::ArchiveLocation;
use crate::auth::AuthSettings;

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
    pub database_url: SecretString,
    /// `redis://…`: Redis as a shared read cache of final outcomes, behind
    /// the in-process one. `None`: the in-process cache alone.
    pub redis_url: Option<SecretString>,
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
    pub jwt_secrets: Vec<(String, SecretSlice<u8>)>,
    pub jwt_jwks_file: Option<PathBuf>,
    /// True when the only key is the generated development secret.
    pub dev_jwt_secret: bool,
    pub effect_secret: SecretSlice<u8>,
    /// `IDEMKEY_SESSION_SECRET`: the dashboard's keys for sessions and CSRF
    /// tokens, newest first; the first signs, every one verifies.
    pub session_secrets: Vec<SecretSlice<u8>>,
    pub workers: bool,
    pub worker_interval: Duration,
    /// `IDEMKEY_WEBHOOK_ATTEMPTS` and `IDEMKEY_WEBHOOK_BACKOFF`: how webhook
    /// deliveries are retried.
    pub webhook_retries: crate::workers::webhooks::Retries,
    /// `IDEMKEY_TEST_FAILPOINT`: where the archive worker stops dead, for
    /// crash tests. Never set in production.
    pub failpoint: Option<String>,
    /// `IDEMKEY_TENANT_RATE_LIMIT`: API calls per second per tenant on this
    /// node; `None`: no limit.
    pub tenant_rate_limit: Option<std::num::NonZeroU32>,
    /// `IDEMKEY_DATABASE_POOL`: Postgres connections per node.
    pub database_pool: u32,
    /// `IDEMKEY_BATCH_MAX`: claims (or completions) in one batch at most;
    /// 1 runs every call alone.
    pub batch_max: usize,
    /// `IDEMKEY_QUOTA_MAX_KEYS`, `IDEMKEY_QUOTA_MAX_OUTCOME_BYTES`: every
    /// tenant's quota unless `idemkey quota` set its own; none by default.
    pub quota_defaults: crate::domain::quota::Limits,
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

    /// Reads the process environment (clap reads the variables).
    pub fn from_env() -> anyhow::Result<Self> {
        let matches = args::env_command()
            .try_get_matches_from(Vec::<String>::new())
            .map_err(args::refusal)?;
        let args = Args::from_arg_matches(&matches).map_err(args::refusal)?;
        Self::from_args(args, &|name: &str| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        })
    }

    /// Builds a configuration from any variable source (tests pass a map).
    /// A variable set to the empty string counts as unset.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let (command, given) = args::vars_command(&var);
        let matches = command.try_get_matches_from(given).map_err(args::refusal)?;
        let args = Args::from_arg_matches(&matches).map_err(args::refusal)?;
        Self::from_args(args, &var)
    }

    /// The configuration the parsed variables make: secrets checked (or
    /// generated into the data directory), the archive's location read with
    /// the AWS variables from `var`.
    fn from_args(args: Args, var: &impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let data_dir = args.data_dir;
        // The generated development secret exists only when no keys at all
        // are configured: naming a JWKS file must not leave the server
        // accepting tokens signed with a secret lying in the data directory.
        let jwt_secrets = match (args::exposed(&args.jwt_secrets), &args.jwt_jwks_file) {
            (Some(list), _) => secrets::parse_jwt_secrets(list)?,
            (None, Some(_)) => Vec::new(),
            (None, None) => vec![(
                DEV_KID.to_owned(),
                secrets::stored_secret(&data_dir, "jwt-dev-secret", "IDEMKEY_JWT_SECRETS")?,
            )],
        };
        let effect_secret = match args::exposed(&args.secret) {
            Some(s) => secrets::parse_secret("IDEMKEY_SECRET", s)?,
            None => secrets::stored_secret(&data_dir, "effect-secret", "IDEMKEY_SECRET")?,
        };
        let session_secrets = match args::exposed(&args.session_secret) {
            Some(list) => secrets::parse_secret_list("IDEMKEY_SESSION_SECRET", list)?,
            None => vec![secrets::stored_secret(
                &data_dir,
                "session-secret",
                "IDEMKEY_SESSION_SECRET",
            )?],
        };
        let archive_url = args.archive_url;
        let archive = ArchiveLocation::from_vars(
            &|name: &str| match name {
                "IDEMKEY_ARCHIVE_URL" => archive_url.clone(),
                other => var(other).filter(|v| !v.is_empty()),
            },
            &data_dir,
        )?;
        let database_url = args.database_url.unwrap_or_else(|| {
            SecretString::from(format!(
                "sqlite://{}",
                data_dir.join("idemkey.db").display()
            ))
        });
        Ok(Self {
            listen: args.listen,
            metrics_listen: args.metrics_listen,
            database_url,
            redis_url: args.redis_url,
            cache: args.cache,
            archive,
            jwt_issuer: args.jwt_issuer,
            jwt_audience: args.jwt_audience,
            jwt_secrets,
            dev_jwt_secret: args.jwt_secrets.is_none() && args.jwt_jwks_file.is_none(),
            jwt_jwks_file: args.jwt_jwks_file,
            effect_secret,
            session_secrets,
            workers: args.workers,
            worker_interval: args.worker_interval,
            webhook_retries: crate::workers::webhooks::Retries {
                attempts: args.webhook_attempts,
                backoff: args.webhook_backoff,
            },
            failpoint: args.test_failpoint,
            tenant_rate_limit: args.tenant_rate_limit.0,
            database_pool: args.database_pool,
            batch_max: args.batch_max,
            quota_defaults: crate::domain::quota::Limits {
                max_keys: args.quota_max_keys.0,
                max_outcome_bytes: args.quota_max_outcome_bytes.0,
            },
            data_dir,
        })
    }

    pub fn auth_settings(&self) -> AuthSettings {
        AuthSettings {
            issuer: self.jwt_issuer.clone(),
            audience: self.jwt_audience.clone(),
            hs256: self
                .jwt_secrets
                .iter()
                .map(|(kid, secret)| (kid.clone(), secret.expose_secret().to_vec()))
                .collect(),
            jwks: self.jwt_jwks_file.clone(),
        }
    }
}
