//! Garage (an S3-compatible store) for tests: the machine's shared node, or
//! a private one.
//!
//! `scripts/garage.sh` (run by `scripts/test.sh`) starts the shared node on
//! 127.0.0.1:3900 and writes the AWS variables to an env file, which
//! [`shared_garage`] reads. Tests that stop the store start a private node on
//! free ports with the same script, so they never disturb anyone else.
//! Nothing is skipped: without Garage these tests fail, saying how to start it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use idemkey_api::archive::S3Settings;

/// An S3 bucket and the settings that reach it.
#[derive(Debug, Clone)]
pub struct S3Target {
    pub bucket: String,
    pub settings: S3Settings,
}

fn tools_dir() -> PathBuf {
    std::env::var_os("IDEMKEY_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/idemkey-tools")
        })
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// Reads an env file written by `scripts/garage.sh`.
fn read_env(file: &Path) -> S3Target {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| {
        panic!(
            "Garage's env file {} cannot be read ({e}): run scripts/garage.sh \
             (scripts/test.sh does) before these tests",
            file.display()
        )
    });
    let vars: HashMap<&str, &str> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    let var = |name: &str| vars.get(name).map(|v| v.to_string());
    S3Target {
        bucket: var("IDEMKEY_TEST_ARCHIVE_BUCKET").expect("bucket in the env file"),
        settings: S3Settings {
            endpoint: var("AWS_ENDPOINT_URL"),
            region: var("AWS_REGION"),
            access_key_id: var("AWS_ACCESS_KEY_ID"),
            secret_access_key: var("AWS_SECRET_ACCESS_KEY"),
            session_token: None,
        },
    }
}

/// The shared Garage node (`IDEMKEY_TEST_GARAGE_ENV` names another env file).
pub fn shared_garage() -> S3Target {
    let file = std::env::var_os("IDEMKEY_TEST_GARAGE_ENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools_dir().join("garage/env"));
    read_env(&file)
}

/// A private Garage node in a scratch directory on free ports; killed and
/// removed when dropped.
pub struct GarageServer {
    pub target: S3Target,
    dir: PathBuf,
    s3_port: u16,
    rpc_port: u16,
}

impl GarageServer {
    /// Starts a node with a bucket and key, and waits until it serves S3.
    pub fn start() -> Self {
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port()
        };
        let dir = std::env::temp_dir().join(format!("garage-{:016x}", rand::random::<u64>()));
        let (s3_port, rpc_port) = (free_port(), free_port());
        run_script(&dir, s3_port, rpc_port);
        let target = read_env(&dir.join("env"));
        Self {
            target,
            dir,
            s3_port,
            rpc_port,
        }
    }

    /// Starts a stopped node again on its own data, ports, bucket and key.
    pub fn restart(&self) {
        run_script(&self.dir, self.s3_port, self.rpc_port);
        let target = read_env(&self.dir.join("env"));
        assert_eq!(target.bucket, self.target.bucket);
    }

    /// Kills the node (like a crash).
    pub fn stop(&self) {
        let Ok(pid) = std::fs::read_to_string(self.dir.join("garage.pid")) else {
            return;
        };
        // Forget the pid first: it must never be signalled twice.
        let _ = std::fs::remove_file(self.dir.join("garage.pid"));
        let _ = Command::new("kill").args(["-9", pid.trim()]).status();
        // Wait until its S3 port stops answering.
        let addr = self
            .target
            .settings
            .endpoint
            .as_deref()
            .and_then(|e| e.strip_prefix("http://"))
            .expect("an http endpoint")
            .to_owned();
        for _ in 0..100 {
            if std::net::TcpStream::connect(&addr).is_err() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the private Garage at {addr} still answers after kill");
    }
}

/// Runs `scripts/garage.sh` for a private node; it returns once the node
/// serves S3 with its bucket and key.
fn run_script(dir: &Path, s3_port: u16, rpc_port: u16) {
    let status = Command::new("bash")
        .arg(workspace_root().join("scripts/garage.sh"))
        .env("IDEMKEY_GARAGE_DIR", dir)
        .env("IDEMKEY_GARAGE_S3_PORT", s3_port.to_string())
        .env("IDEMKEY_GARAGE_RPC_PORT", rpc_port.to_string())
        .status()
        .expect("bash scripts/garage.sh");
    assert!(
        status.success(),
        "scripts/garage.sh failed for a private node"
    );
}

impl Drop for GarageServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
