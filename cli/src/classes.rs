//! `idemkey classes get|set|delete <operation>`: an operation class's
//! policy (role admin). `set` sends the whole policy from a file; members
//! it leaves out take their defaults, as the API's PUT does.

use clap::Subcommand;
use idemkey_client::{encode_segment, Method};

use crate::connection::Connection;
use crate::exit::Failure;
use crate::keys::read_json;
use crate::render::policy;

/// The `classes` subcommands.
#[derive(Debug, Subcommand)]
pub enum ClassesCommand {
    /// Show the class's policy (the defaults when it has none).
    Get { operation: String },
    /// Set the class's whole policy from a JSON file.
    Set {
        operation: String,
        /// The policy (`-`: standard input), such as {"replay_window": "7d", "lease": "2m"}.
        #[arg(long, value_name = "FILE")]
        file: String,
    },
    /// Return the class to the defaults.
    Delete { operation: String },
}

/// Runs one `classes` subcommand.
pub async fn run(conn: &Connection, command: ClassesCommand) -> Result<(), Failure> {
    let client = conn.client()?;
    let path = |op: &str| format!("/v1/operation-classes/{}", encode_segment(op));
    let answer = match command {
        ClassesCommand::Get { operation } => {
            client
                .send_json(Method::GET, &path(&operation), None)
                .await?
        }
        ClassesCommand::Set { operation, file } => {
            let body = read_json(&file)?;
            client
                .send_json(Method::PUT, &path(&operation), Some(&body))
                .await?
        }
        ClassesCommand::Delete { operation } => {
            client
                .send_json(Method::DELETE, &path(&operation), None)
                .await?
        }
    };
    conn.print(&answer, policy)
}
