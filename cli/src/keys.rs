//! `idemkey keys get|list|resolve|release|quarantine`: one API call each
//! (docs/protocol.md, docs/recovery.md), answered as a table or, with
//! `--json`, as the API's JSON. Which role each needs is the API's rule,
//! not the CLI's: the server decides, and its refusal is printed.

use clap::{ArgGroup, Subcommand};
use idemkey_client::{encode_segment, Method};
use serde_json::{json, Value};

use crate::connection::Connection;
use crate::exit::Failure;
use crate::render::{key_page, key_record};

/// The `keys` subcommands.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Show a key's record: state, attempt, steps, outcome, history.
    Get { operation: String, key: String },
    /// List the tenant's live keys, newest first (one page).
    List {
        /// in_progress, completed, quarantined or lease_expired.
        #[arg(long)]
        state: Option<String>,
        /// Only this operation class.
        #[arg(long)]
        operation: Option<String>,
        /// Only keys first claimed at least this long ago (15m, 2h, 7d).
        #[arg(long)]
        older_than: Option<String>,
        /// Page size, 1–500 (the server's default is 50).
        #[arg(long)]
        limit: Option<u32>,
        /// The `next_cursor` of the previous page.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Finish a quarantined (or, for an admin, stuck) key: complete it with
    /// an outcome, or release it so it may be claimed anew.
    #[command(group(ArgGroup::new("how").required(true).args(["release", "outcome_file"])))]
    Resolve {
        operation: String,
        key: String,
        /// Release the key (its record is removed).
        #[arg(long)]
        release: bool,
        /// Complete it with the outcome in this file (`-`: standard input),
        /// such as {"status_code": 201, "body": {...}}.
        #[arg(long, value_name = "FILE")]
        outcome_file: Option<String>,
        /// Why (kept with a release).
        #[arg(long, allow_hyphen_values = true)]
        reason: Option<String>,
        /// The key's current owner token, when the token is not an admin's.
        #[arg(long, allow_hyphen_values = true)]
        owner_token: Option<String>,
    },
    /// Give a claim back because no effect happened (the owner only).
    Release {
        operation: String,
        key: String,
        /// The claim's owner token.
        #[arg(long, allow_hyphen_values = true)]
        owner_token: String,
    },
    /// Mark a key's outcome ambiguous until a resolve (the owner only).
    Quarantine {
        operation: String,
        key: String,
        /// The claim's owner token.
        #[arg(long, allow_hyphen_values = true)]
        owner_token: String,
        /// Why (1–1024 bytes), kept on the record.
        #[arg(long, allow_hyphen_values = true)]
        reason: String,
    },
}

/// `released` for `{"status": "released"}`, else the record's table.
fn released_or_record(answer: &Value) -> Result<String, Failure> {
    if answer.get("status").and_then(Value::as_str) == Some("released") {
        Ok("released\n".to_owned())
    } else {
        key_record(answer)
    }
}

fn key_path(operation: &str, key: &str) -> String {
    format!(
        "/v1/keys/{}/{}",
        encode_segment(operation),
        encode_segment(key)
    )
}

/// Reads a JSON document from `file` (`-`: standard input).
pub fn read_json(file: &str) -> Result<Value, Failure> {
    let text = if file == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|e| Failure::usage(format!("{file}: {e}")))?;
    serde_json::from_str(&text).map_err(|e| Failure::usage(format!("{file}: not JSON: {e}")))
}

/// Runs one `keys` subcommand.
pub async fn run(conn: &Connection, command: KeysCommand) -> Result<(), Failure> {
    let client = conn.client()?;
    match command {
        KeysCommand::Get { operation, key } => {
            let record = client
                .send_json(Method::GET, &key_path(&operation, &key), None)
                .await?;
            conn.print(&record, key_record)
        }
        KeysCommand::List {
            state,
            operation,
            older_than,
            limit,
            cursor,
        } => {
            let params: Vec<String> = [
                ("state", state),
                ("operation", operation),
                ("older_than", older_than),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode_segment(&v))))
            .collect();
            let path = if params.is_empty() {
                "/v1/keys".to_owned()
            } else {
                format!("/v1/keys?{}", params.join("&"))
            };
            let page = client.send_json(Method::GET, &path, None).await?;
            conn.print(&page, key_page)
        }
        KeysCommand::Resolve {
            operation,
            key,
            release,
            outcome_file,
            reason,
            owner_token,
        } => {
            // The server says what happened; a key it does not know is
            // `not_found` (exit 3), never "released": the SDK's own
            // resolve and release count a 404 as done (a retry whose first
            // try was applied), which would tell an operator that another
            // tenant's key, or a mistyped one, was released.
            let mut body = if release {
                json!({"release": true})
            } else {
                json!({"outcome": read_json(outcome_file.as_deref().unwrap_or("-"))?})
            };
            if let Some(r) = reason {
                body["reason"] = json!(r);
            }
            if let Some(t) = owner_token {
                body["owner_token"] = json!(t);
            }
            let path = format!("{}/resolve", key_path(&operation, &key));
            let answer = client.send_json(Method::POST, &path, Some(&body)).await?;
            conn.print(&answer, released_or_record)
        }
        KeysCommand::Release {
            operation,
            key,
            owner_token,
        } => {
            let path = format!("{}/release", key_path(&operation, &key));
            let body = json!({"owner_token": owner_token});
            let answer = client.send_json(Method::POST, &path, Some(&body)).await?;
            conn.print(&answer, released_or_record)
        }
        KeysCommand::Quarantine {
            operation,
            key,
            owner_token,
            reason,
        } => {
            // The SDK's call is the retry-safe one (a retry that finds the
            // key quarantined by its first try answers the record); the
            // record is then read back as the server writes it.
            client
                .quarantine(&operation, &key, &owner_token, &reason)
                .await?;
            let raw = client
                .send_json(Method::GET, &key_path(&operation, &key), None)
                .await?;
            conn.print(&raw, key_record)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::KeysCommand;

    #[derive(Parser)]
    struct Keys {
        #[command(subcommand)]
        command: KeysCommand,
    }

    /// Owner tokens are URL-safe base64, so one in 32 starts with `-`; such
    /// a token (or a reason) is a value, never taken for an option.
    #[test]
    fn a_value_may_start_with_a_hyphen() {
        let token = "-rQx7kP2vW9mZ1cT4bN8sL0yH3fJ6dG5aE2uV7iO";
        let calls = [
            vec![
                "quarantine",
                "op",
                "k",
                "--owner-token",
                token,
                "--reason",
                "-1 ms late",
            ],
            vec!["release", "op", "k", "--owner-token", token],
            vec![
                "resolve",
                "op",
                "k",
                "--release",
                "--owner-token",
                token,
                "--reason",
                "-",
            ],
        ];
        for call in calls {
            let args = std::iter::once("keys").chain(call.iter().copied());
            let parsed = Keys::try_parse_from(args).map(|k| format!("{:?}", k.command));
            let parsed = parsed.unwrap_or_else(|e| panic!("{call:?}: {e}"));
            assert!(parsed.contains(token), "{call:?} parsed as {parsed}");
        }
    }
}
