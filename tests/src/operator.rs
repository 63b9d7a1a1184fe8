//! Running the operator commands of the `idemkey` binary (`idemkey keys …`,
//! `idemkey classes …`) as an operator's shell would, for the tests in
//! `tests/tests/operator_cli*.rs`.

use std::path::PathBuf;

use serde_json::{json, Value};
use tokio::process::Command;

use crate::process::binary;
use crate::TestApp;

/// What one command did: its exit code and what it printed.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Standard output as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {:?}", self.stdout))
    }
}

/// `idemkey <args>` with `--server` and `--token` from the environment, as
/// an operator's shell would set them.
pub async fn idemkey(server: &str, token: Option<&str>, args: &[&str]) -> Ran {
    let mut command = Command::new(binary());
    command.args(args).env_clear().env("IDEMKEY_SERVER", server);
    if let Some(t) = token {
        command.env("IDEMKEY_TOKEN", t);
    }
    let out = command.output().await.expect("run idemkey");
    let ran = Ran {
        code: out.status.code().expect("exited"),
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
        stderr: String::from_utf8(out.stderr).expect("utf-8"),
    };
    println!(
        "$ idemkey {}\n→ exit {}\n{}{}",
        args.join(" "),
        ran.code,
        ran.stdout,
        ran.stderr
    );
    ran
}

/// Claims `key` with this app's token; its owner token.
pub async fn owned(app: &TestApp, operation: &str, key: &str) -> String {
    let claim = app.claim(operation, key, json!({"amount": "5.00"})).await;
    assert_eq!(claim.status, 201, "{}", claim.text);
    claim.json()["owner_token"]
        .as_str()
        .expect("owner token")
        .to_owned()
}

/// A file in the temp dir holding `contents`.
pub fn scratch_file(name: &str, contents: &Value) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("idemkey-cli-{:016x}-{name}", rand::random::<u64>()));
    std::fs::write(&path, contents.to_string()).expect("write");
    path
}
