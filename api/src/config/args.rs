//! The `IDEMKEY_*` variables as clap arguments: each field names its
//! variable, its default and the parser that checks its value. Secrets are
//! read into [`SecretString`]s, so no `Debug` output shows them; their
//! rules (length, placeholders, lists) are applied in `secrets`.
//!
//! Clap reads the variables itself ([`env_command`]); tests hand in a map
//! instead ([`vars_command`]). Either way a value clap refuses becomes an
//! error that starts with the variable's name ([`refusal`]).

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue};
use clap::{Arg, ArgAction, Command};
use secrecy::{ExposeSecret, SecretString};

use crate::domain::duration::parse_duration;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, env = "IDEMKEY_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,
    #[arg(long, env = "IDEMKEY_LISTEN", default_value = "127.0.0.1:8080", value_parser = address)]
    pub listen: String,
    #[arg(long, env = "IDEMKEY_METRICS_LISTEN", value_parser = address)]
    pub metrics_listen: Option<String>,
    #[arg(long, env = "IDEMKEY_DATABASE_URL", value_parser = secret)]
    pub database_url: Option<SecretString>,
    #[arg(long, env = "IDEMKEY_REDIS_URL", value_parser = redis_url)]
    pub redis_url: Option<SecretString>,
    #[arg(long, env = "IDEMKEY_CACHE", default_value = "on", value_parser = on_off, action = ArgAction::Set)]
    pub cache: bool,
    /// Read with the AWS variables by `ArchiveLocation`.
    #[arg(long, env = "IDEMKEY_ARCHIVE_URL")]
    pub archive_url: Option<String>,
    #[arg(long, env = "IDEMKEY_JWT_ISSUER", default_value = "idemkey")]
    pub jwt_issuer: String,
    #[arg(long, env = "IDEMKEY_JWT_AUDIENCE", default_value = "idemkey")]
    pub jwt_audience: String,
    /// `kid=secret` pairs, comma-separated.
    #[arg(long, env = "IDEMKEY_JWT_SECRETS", value_parser = secret)]
    pub jwt_secrets: Option<SecretString>,
    #[arg(long, env = "IDEMKEY_JWT_JWKS_FILE")]
    pub jwt_jwks_file: Option<PathBuf>,
    #[arg(long, env = "IDEMKEY_SECRET", value_parser = secret)]
    pub secret: Option<SecretString>,
    /// Comma-separated, newest first.
    #[arg(long, env = "IDEMKEY_SESSION_SECRET", value_parser = secret)]
    pub session_secret: Option<SecretString>,
    #[arg(long, env = "IDEMKEY_WORKERS", default_value = "on", value_parser = on_off, action = ArgAction::Set)]
    pub workers: bool,
    #[arg(long, env = "IDEMKEY_WORKER_INTERVAL", default_value = "30s", value_parser = interval)]
    pub worker_interval: Duration,
    #[arg(long, env = "IDEMKEY_WEBHOOK_ATTEMPTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub webhook_attempts: u32,
    #[arg(long, env = "IDEMKEY_WEBHOOK_BACKOFF", default_value = "30s", value_parser = interval)]
    pub webhook_backoff: Duration,
    #[arg(long, env = "IDEMKEY_TEST_FAILPOINT")]
    pub test_failpoint: Option<String>,
    #[arg(long, env = "IDEMKEY_TENANT_RATE_LIMIT", default_value = "off", value_parser = rate_limit)]
    pub tenant_rate_limit: RateLimit,
    #[arg(long, env = "IDEMKEY_DATABASE_POOL", default_value_t = crate::store::DEFAULT_POOL, value_parser = pool)]
    pub database_pool: u32,
    #[arg(long, env = "IDEMKEY_BATCH_MAX", default_value_t = crate::store::MAX_BATCH, value_parser = batch_max)]
    pub batch_max: usize,
    #[arg(long, env = "IDEMKEY_QUOTA_MAX_KEYS", default_value = "unlimited", value_parser = quota)]
    pub quota_max_keys: QuotaLimit,
    #[arg(long, env = "IDEMKEY_QUOTA_MAX_OUTCOME_BYTES", default_value = "unlimited", value_parser = quota)]
    pub quota_max_outcome_bytes: QuotaLimit,
}

/// A default quota: a whole number (bytes may end in `KiB`, `MiB`, `GiB`)
/// or `unlimited`.
#[derive(Debug, Clone, Copy)]
pub struct QuotaLimit(pub Option<u64>);

/// `IDEMKEY_TENANT_RATE_LIMIT`: calls per second per tenant, or `off`.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit(pub Option<NonZeroU32>);

/// The arguments, read by clap from the process environment. A variable set
/// to the empty string counts as unset.
pub fn env_command() -> Command {
    base().mut_args(|arg| {
        let empty = arg
            .get_env()
            .and_then(std::env::var_os)
            .is_some_and(|value| value.is_empty());
        if empty {
            arg.env(None)
        } else {
            arg
        }
    })
}

/// The arguments, with clap's own environment reading switched off, and the
/// command line that gives them `var`'s values.
pub fn vars_command(var: &impl Fn(&str) -> Option<String>) -> (Command, Vec<String>) {
    let mut given = Vec::new();
    let command = base().mut_args(|arg| {
        let value = arg.get_env().and_then(|name| name.to_str()).and_then(var);
        if let (Some(value), Some(long)) = (value.filter(|v| !v.is_empty()), arg.get_long()) {
            given.push(format!("--{long}={value}"));
        }
        arg.env(None)
    });
    (command, given)
}

fn base() -> Command {
    <Args as clap::Args>::augment_args(Command::new("idemkey").no_binary_name(true))
}

/// A refused value as an error that names its variable and says what was
/// expected (the parser's own words).
pub fn refusal(error: clap::Error) -> anyhow::Error {
    let long = match error.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => arg
            .trim_start_matches("--")
            .split([' ', '='])
            .next()
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    };
    let variable = base()
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long.as_str()))
        .and_then(Arg::get_env)
        .map(|name| name.to_string_lossy().into_owned());
    let why = std::error::Error::source(&error)
        .map(ToString::to_string)
        .unwrap_or_else(|| error.kind().to_string());
    match variable {
        Some(variable) => anyhow::anyhow!("{variable}: {why}"),
        None => anyhow::anyhow!("configuration: {error}"),
    }
}

fn address(s: &str) -> Result<String, String> {
    match std::net::ToSocketAddrs::to_socket_addrs(s) {
        Ok(_) => Ok(s.to_owned()),
        Err(_) => Err(format!("expected host:port, got {s:?}")),
    }
}

fn secret(s: &str) -> Result<SecretString, String> {
    Ok(SecretString::from(s))
}

fn redis_url(s: &str) -> Result<SecretString, String> {
    let supported = ["redis://", "redis+unix://", "unix://"];
    if !supported.iter().any(|scheme| s.starts_with(scheme)) {
        return Err(format!(
            "expected redis://[:password@]host[:port][/db] \
             (TLS is not supported in this build), got {:?}",
            crate::store::redact(s)
        ));
    }
    secret(s)
}

fn on_off(s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("expected on or off, got {other:?}")),
    }
}

fn interval(s: &str) -> Result<Duration, String> {
    parse_duration(s)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("expected a duration such as 30s, got {s:?}"))
}

fn rate_limit(s: &str) -> Result<RateLimit, String> {
    if s == "off" {
        return Ok(RateLimit(None));
    }
    s.parse::<NonZeroU32>()
        .map(|n| RateLimit(Some(n)))
        .map_err(|_| format!("expected calls per second (a positive integer) or off, got {s:?}"))
}

fn quota(s: &str) -> Result<QuotaLimit, String> {
    if s == "unlimited" {
        return Ok(QuotaLimit(None));
    }
    crate::domain::quota::parse_size(s)
        .map(|n| QuotaLimit(Some(n)))
        .ok_or_else(|| {
            format!("expected a whole number (bytes may end in KiB, MiB or GiB) or unlimited, got {s:?}")
        })
}

fn batch_max(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|n| (1..=1000).contains(n))
        .ok_or_else(|| format!("expected 1-1000 calls per batch, got {s:?}"))
}

fn pool(s: &str) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|n| (1..=1000).contains(n))
        .ok_or_else(|| format!("expected 1-1000 connections, got {s:?}"))
}

/// The value of an optional secret, for the rules in `secrets`.
pub fn exposed(secret: &Option<SecretString>) -> Option<&str> {
    secret.as_ref().map(|s| s.expose_secret())
}
