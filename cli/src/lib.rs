//! The operator commands of the `idemkey` binary: `idemkey keys …` and
//! `idemkey classes …`, a client of a running server's API built on the Rust
//! client (`idemkey-client`), never on the server's crates — so an operator
//! sees exactly what any client of the API sees, with the same roles and the
//! same tenant boundary (the token decides both; docs/cli.md).
//!
//! Guarantees a script can rely on:
//! - `--json` prints the API's success body as the server sent it, one JSON
//!   document on standard output, and nothing else there;
//! - the default output is a table for people; its layout may change;
//! - every failure prints the problem's `code` and title on standard error
//!   and exits non-zero with a code that says what kind of failure it was
//!   ([`exit`]): 1 refused, 2 usage, 3 not found, 4 no answer.
//!
//! Nothing here runs inside the server: the hot path knows nothing of it.

mod classes;
mod connection;
pub mod exit;
mod keys;
mod render;
mod table;

use std::process::ExitCode;

use clap::Subcommand;

pub use connection::Connection;

/// The operator commands, flattened into the `idemkey` binary's own.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Look up, list, resolve, release or quarantine keys of the token's tenant.
    Keys {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Show, set or reset an operation class's policy (role admin).
    Classes {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: classes::ClassesCommand,
    },
}

/// Runs one operator command and answers the process's exit code.
pub async fn run(command: Command) -> ExitCode {
    let result = match command {
        Command::Keys {
            connection,
            command,
        } => keys::run(&connection, command).await,
        Command::Classes {
            connection,
            command,
        } => classes::run(&connection, command).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("{failure}");
            ExitCode::from(failure.exit_code())
        }
    }
}
