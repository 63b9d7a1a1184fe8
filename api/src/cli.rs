//! The server's commands of the `idemkey` binary: `serve` (the default),
//! `migrate`, `token` and the operator's `quota`. The binary
//! (web/src/main.rs) adds the operator's API commands (`keys`, `classes`:
//! the `idemkey-cli` crate) beside them.

mod quota;

use std::net::TcpListener;

use anyhow::Context;
use clap::{Parser, Subcommand};
use secrecy::ExposeSecret;

use crate::auth::{mint, Role, RoleSet};
use crate::config::Config;
use crate::domain::duration::parse_duration;
use crate::domain::TenantId;
use crate::startup::{open_store, Application, Mount};

#[derive(Parser)]
#[command(
    name = "idemkey",
    version,
    about = "A multi-tenant idempotency service"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

/// The server's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API (the default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Print a signed JWT for a tenant (signed with the first HS256 secret).
    Token {
        #[arg(long)]
        tenant: String,
        /// Comma-separated roles: client, viewer, admin, metrics.
        #[arg(long, value_delimiter = ',', default_value = "client")]
        roles: Vec<String>,
        /// Lifetime, such as 90s, 15m or 2h.
        #[arg(long, default_value = "1h")]
        ttl: String,
    },
    /// Per-tenant quota overrides (the operator's; see docs/operations.md).
    #[command(subcommand)]
    Quota(quota::QuotaCommand),
}

/// Runs the command line. `mount` adds the dashboard's routes to `serve`.
pub async fn run(mount: Mount) -> anyhow::Result<()> {
    run_command(Cli::parse().command.unwrap_or(Command::Serve), mount).await
}

/// Runs one of the server's commands (already parsed).
pub async fn run_command(command: Command, mount: Mount) -> anyhow::Result<()> {
    Config::load_file()?;
    let telemetry = crate::telemetry::init();
    let result = run_parsed(command, mount).await;
    // The last requests' spans, when they are exported.
    tokio::task::spawn_blocking(move || telemetry.shutdown())
        .await
        .ok();
    result
}

async fn run_parsed(command: Command, mount: Mount) -> anyhow::Result<()> {
    let config = Config::from_env()?;
    match command {
        Command::Serve => serve(&config, mount).await,
        Command::Migrate => {
            open_store(&config).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::Quota(command) => {
            print!("{}", quota::run(&config, command).await?);
            Ok(())
        }
        Command::Token { tenant, roles, ttl } => {
            println!("{}", token(&config, &tenant, &roles, &ttl)?);
            Ok(())
        }
    }
}

async fn serve(config: &Config, mount: Mount) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&config.listen)
        .with_context(|| format!("IDEMKEY_LISTEN: cannot listen on {}", config.listen))?;
    let app = Application::build(config, listener, mount).await?;
    if config.dev_jwt_secret {
        tracing::warn!(
            "development mode: tokens are signed with a secret generated into {}; \
             mint one with `idemkey token --tenant demo --roles client,viewer` \
             (`cargo run -q -- token …` from this directory). \
             Set IDEMKEY_JWT_SECRETS or IDEMKEY_JWT_JWKS_FILE for real use.",
            config.data_dir.display()
        );
    }
    app.run_until_stopped().await?;
    tracing::info!("idemkey stopped");
    Ok(())
}

fn token(config: &Config, tenant: &str, roles: &[String], ttl: &str) -> anyhow::Result<String> {
    let tenant = TenantId::parse(tenant).context("--tenant")?;
    let roles = roles
        .iter()
        .map(|r| Role::parse(r.trim()).with_context(|| format!("--roles: unknown role {r:?}")))
        .collect::<anyhow::Result<RoleSet>>()?;
    let ttl = parse_duration(ttl)
        .with_context(|| format!("--ttl: expected a duration such as 15m, got {ttl:?}"))?;
    let (kid, secret) = config
        .jwt_secrets
        .first()
        .context("no HS256 secret is configured (IDEMKEY_JWT_SECRETS)")?;
    mint(
        kid,
        secret.expose_secret(),
        &config.jwt_issuer,
        &config.jwt_audience,
        &tenant,
        roles,
        ttl,
    )
}
