//! Redis for tests: the machine's shared server, or a private one.
//!
//! Tests that only read and write their own keys use the shared server on
//! 6379 (every key carries a fresh tenant). Tests that flush, stop or restart
//! Redis start a private `redis-server` on a free port, so they never disturb
//! anyone else using the shared one.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

/// The shared Redis (`IDEMKEY_TEST_REDIS_URL` overrides it).
pub fn shared_redis_url() -> String {
    std::env::var("IDEMKEY_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A private `redis-server` keeping nothing on disk; killed when dropped.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = Self { port, child: None };
        server.restart().await;
        server
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Runs `redis-cli` against this server and returns its output.
    pub async fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .await
            .expect("redis-cli (run scripts/services.sh)");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub async fn flushall(&self) {
        assert_eq!(self.cli(&["flushall"]).await, "OK");
    }

    /// Kills the server (like a crash: nothing is saved anyway).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Starts the server again on the same port (empty) and waits for it.
    pub async fn restart(&mut self) {
        self.stop().await;
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server (run scripts/services.sh)");
        self.child = Some(child);
        for _ in 0..100 {
            if self.cli(&["ping"]).await == "PONG" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server on port {} did not answer", self.port);
    }
}
