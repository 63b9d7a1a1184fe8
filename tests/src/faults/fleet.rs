//! The processes of one round: several `idemkey` servers on one database
//! (each may be killed and started again, on a new port) and the fake
//! provider whose ledger tells how many times each effect really ran.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, RwLock};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Mutex;

use crate::process::{sibling_binary, ServerProcess};

/// The servers' current addresses, shared with the clients. A killed
/// server keeps its old address until it is back, so clients that pick it
/// meet a refused connection, as they would in production.
#[derive(Clone, Default)]
pub struct Addresses(Arc<RwLock<Vec<String>>>);

impl Addresses {
    /// A server chosen at random.
    pub fn pick(&self) -> (usize, String) {
        let all = self.0.read().expect("addresses");
        let i = rand::random_range(0..all.len());
        (i, all[i].clone())
    }

    pub fn get(&self, i: usize) -> String {
        self.0.read().expect("addresses")[i].clone()
    }

    fn set(&self, i: usize, address: String) {
        self.0.write().expect("addresses")[i] = address;
    }
}

/// `idemkey` server processes, each started with its own variables.
pub struct Fleet {
    pub addresses: Addresses,
    vars: Vec<HashMap<String, String>>,
    nodes: Vec<Mutex<Option<ServerProcess>>>,
}

impl Fleet {
    /// Starts one server per entry of `vars`, all at once.
    pub async fn start(vars: Vec<HashMap<String, String>>) -> Self {
        let mut starting = Vec::new();
        for v in &vars {
            let v = v.clone();
            starting.push(tokio::spawn(async move { ServerProcess::start(&v).await }));
        }
        let mut nodes = Vec::new();
        let mut addresses = Vec::new();
        for handle in starting {
            let node = handle.await.expect("server start");
            addresses.push(node.address.clone());
            nodes.push(Mutex::new(Some(node)));
        }
        Self {
            addresses: Addresses(Arc::new(RwLock::new(addresses))),
            vars,
            nodes,
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Kills server `i` with SIGKILL (no graceful shutdown, like a crash).
    pub async fn kill(&self, i: usize) {
        if let Some(node) = self.nodes[i].lock().await.take() {
            node.stop().await;
        }
    }

    /// Starts server `i` again (after `kill`) with its variables.
    pub async fn restart(&self, i: usize) {
        let mut slot = self.nodes[i].lock().await;
        if slot.is_none() {
            let node = ServerProcess::start(&self.vars[i]).await;
            self.addresses.set(i, node.address.clone());
            *slot = Some(node);
        }
    }
}

/// The fake provider (`tests/src/bin/fake_provider.rs`), which never
/// deduplicates: every `POST /charges` charges again.
pub struct Provider {
    pub url: String,
    _process: Child,
}

impl Provider {
    pub async fn start() -> Self {
        let mut process = Command::new(sibling_binary("fake-provider"))
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start fake-provider");
        let stdout = process.stdout.take().expect("provider stdout");
        let line = BufReader::new(stdout)
            .lines()
            .next_line()
            .await
            .expect("provider output")
            .expect("the provider's address");
        let url = format!("http://{}", line.trim_start_matches("listening on "));
        Self {
            url,
            _process: process,
        }
    }

    /// How many charges each reference (effect id) got.
    pub async fn charges_by_reference(&self) -> HashMap<String, u64> {
        let stats: Value = reqwest::get(format!("{}/stats", self.url))
            .await
            .expect("provider stats")
            .json()
            .await
            .expect("stats JSON");
        stats["by_reference"]
            .as_object()
            .expect("by_reference")
            .iter()
            .map(|(r, n)| (r.clone(), n.as_u64().expect("a count")))
            .collect()
    }

    /// The first charge made with `reference`, if any.
    pub async fn find(&self, reference: &str) -> Option<String> {
        let found = reqwest::get(format!("{}/charges/{reference}", self.url))
            .await
            .expect("provider lookup");
        if found.status() == 404 {
            return None;
        }
        let body: Value = found.json().await.expect("charge JSON");
        body["id"].as_str().map(str::to_owned)
    }
}
