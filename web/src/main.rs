//! The `idemkey` binary: glue only. Its commands are the server's (`serve`,
//! the default, `migrate`, `token`: idemkey_api::cli) and the operator's
//! (`keys`, `classes`: the idemkey-cli crate, a client of a running server).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

// mimalloc: glibc's malloc and free were ~8 % of a cached replay's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "idemkey",
    version,
    about = "A multi-tenant idempotency service, and its operator commands"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Server(idemkey_api::cli::Command),
    #[command(flatten)]
    Operator(idemkey_cli::Command),
}

#[actix_web::main]
async fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Some(Command::Operator(command)) => Ok(idemkey_cli::run(command).await),
        Some(Command::Server(command)) => {
            idemkey_api::cli::run_command(command, idemkey_web::mount).await?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            idemkey_api::cli::run_command(idemkey_api::cli::Command::Serve, idemkey_web::mount)
                .await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
