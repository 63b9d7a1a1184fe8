//! Real `idemkey` processes, for tests that need several server processes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The `idemkey` binary next to the test executable (target/<profile>/).
pub fn binary() -> PathBuf {
    sibling_binary("idemkey")
}

/// A binary of this workspace next to the test executable; fails loudly if
/// it was not built (`cargo build --workspace --bins`; scripts/test.sh does).
pub fn sibling_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build --workspace --bins`; scripts/test.sh does)",
        bin.display()
    );
    bin
}

/// A running server process; killed when dropped.
pub struct ServerProcess {
    pub address: String,
    /// The private `/metrics` listener's base URL (`IDEMKEY_METRICS_LISTEN`).
    pub metrics_address: Option<String>,
    child: Child,
    log: Arc<Log>,
}

/// The lines a process wrote to standard error after announcing itself.
#[derive(Default)]
struct Log {
    lines: Mutex<Vec<String>>,
    grew: Notify,
}

impl ServerProcess {
    /// Starts `idemkey serve` on a free port with `vars` as its whole
    /// environment (`RUST_LOG` is `info` unless `vars` sets it) and waits
    /// for the line announcing the bound address.
    pub async fn start(vars: &HashMap<String, String>) -> Self {
        Self::start_in(&std::env::temp_dir(), vars).await
    }

    /// Like `start`, with `dir` as the working directory (where the embedded
    /// default keeps `./data`).
    pub async fn start_in(dir: &std::path::Path, vars: &HashMap<String, String>) -> Self {
        let mut child = Command::new(binary())
            .arg("serve")
            .current_dir(dir)
            .env_clear()
            .envs(vars)
            .env("IDEMKEY_LISTEN", "127.0.0.1:0")
            // `info` unless the test asks for more.
            .env(
                "RUST_LOG",
                vars.get("RUST_LOG").map_or("info", String::as_str),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn idemkey");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let mut metrics_address = None;
        let announced = async {
            loop {
                let line = lines
                    .next_line()
                    .await
                    .expect("read stderr")
                    .expect("idemkey exited before listening");
                if let Some(rest) = line.split("addr=").nth(1) {
                    let addr = rest.split_whitespace().next().expect("addr value");
                    if line.contains("idemkey metrics listening") {
                        metrics_address = Some(format!("http://{addr}"));
                    } else if line.contains("idemkey listening") {
                        break format!("http://{addr}");
                    }
                }
            }
        };
        let address = tokio::time::timeout(std::time::Duration::from_secs(60), announced)
            .await
            .expect("idemkey did not announce its address within 60 s");
        // Keep draining stderr (so the process never blocks on a full pipe)
        // into a log that tests can wait on.
        let log = Arc::new(Log::default());
        let sink = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                sink.lines.lock().expect("log lock").push(line);
                sink.grew.notify_waiters();
            }
        });
        Self {
            address,
            metrics_address,
            child,
            log,
        }
    }

    /// Waits until the process logs a line containing `needle`; panics
    /// after `timeout`.
    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> String {
        let found = async {
            loop {
                let grew = self.log.grew.notified();
                if let Some(line) = self
                    .log
                    .lines
                    .lock()
                    .expect("log lock")
                    .iter()
                    .find(|line| line.contains(needle))
                {
                    return line.clone();
                }
                grew.await;
            }
        };
        tokio::time::timeout(timeout, found)
            .await
            .unwrap_or_else(|_| panic!("no log line containing {needle:?} within {timeout:?}"))
    }

    /// Kills the process (SIGKILL: no chance to tidy up, like a crash).
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }

    /// Asks the process to stop gracefully (SIGTERM, as an orchestrator
    /// does) and waits up to `timeout` for it to exit; whether it exited
    /// successfully.
    pub async fn terminate(mut self, timeout: Duration) -> bool {
        let pid = self.child.id().expect("the process is running");
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("idemkey did not stop within {timeout:?} of SIGTERM"))
            .expect("wait for idemkey")
            .success()
    }
}

/// Runs `idemkey <args>` in `dir` with an empty environment and returns its
/// standard output; panics if it fails.
pub async fn run_command(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(binary())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .output()
        .await
        .expect("run idemkey");
    assert!(
        out.status.success(),
        "idemkey {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}
