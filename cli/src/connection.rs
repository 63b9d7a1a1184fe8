//! Where the commands connect and how they print: `--server`, `--token`,
//! `--json`, shared by every operator command.

use std::time::Duration;

use clap::Args;
use idemkey_client::{Client, ClientOptions};
use serde_json::Value;

use crate::exit::Failure;

/// The server, the token and the output format of an operator command.
#[derive(Debug, Clone, Args)]
pub struct Connection {
    /// The server's base URL (without /v1).
    #[arg(
        long,
        env = "IDEMKEY_SERVER",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub server: String,
    /// A bearer token for the tenant to act on (mint one with `idemkey token`).
    #[arg(long, env = "IDEMKEY_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Print the API's JSON answer as it is, for scripts.
    #[arg(long, global = true)]
    pub json: bool,
}

impl Connection {
    /// A client of the server. An operator waits at most a few seconds for
    /// a server that does not answer, rather than the SDK's 30 s.
    pub fn client(&self) -> Result<Client, Failure> {
        let token = self.token.as_deref().filter(|t| !t.is_empty()).ok_or_else(|| {
            Failure::usage(
                "no token: pass --token or set IDEMKEY_TOKEN (`idemkey token --tenant T --roles viewer` mints one)",
            )
        })?;
        let options = ClientOptions {
            retry_for: Duration::from_secs(5),
            ..ClientOptions::default()
        };
        Client::with_options(&self.server, token, options).map_err(Failure::from)
    }

    /// Prints `answer` as JSON (with `--json`) or through `table`.
    pub fn print(
        &self,
        answer: &Value,
        table: impl FnOnce(&Value) -> Result<String, Failure>,
    ) -> Result<(), Failure> {
        if self.json {
            println!("{answer}");
        } else {
            print!("{}", table(answer)?);
        }
        Ok(())
    }
}
