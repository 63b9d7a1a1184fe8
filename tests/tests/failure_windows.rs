//! The seeds' failure windows, each as a test: a real client process
//! (`charge-worker`) dies at a durability boundary, a retry follows, and the
//! real provider process (`fake-provider`, which never deduplicates) tells
//! how many times the card was really charged. Never twice.

use std::process::Stdio;

use idemkey_api::auth::Role;
use idemkey_tests::app::test_vars;
use idemkey_tests::db::fresh_database;
use idemkey_tests::process::{sibling_binary, ServerProcess};
use idemkey_tests::tokens::{fresh_tenant, token};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

struct World {
    idemkey: ServerProcess,
    /// Kept so the provider process lives (and is killed) with the world.
    _provider: Child,
    provider_url: String,
    token: String,
}

impl World {
    async fn start() -> Self {
        let idemkey = ServerProcess::start(&test_vars(&fresh_database().await)).await;
        let mut provider = Command::new(sibling_binary("fake-provider"))
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start fake-provider");
        let stdout = provider.stdout.take().unwrap();
        let line = BufReader::new(stdout)
            .lines()
            .next_line()
            .await
            .unwrap()
            .expect("provider address");
        let provider_url = format!("http://{}", line.trim_start_matches("listening on "));
        let token = token(&fresh_tenant(), &[Role::Client]);
        Self {
            idemkey,
            _provider: provider,
            provider_url,
            token,
        }
    }

    /// Runs one worker to its end; returns its exit code and what it printed.
    async fn worker(&self, key: &str, crash_at: &str) -> (i32, String) {
        let out = Command::new(sibling_binary("charge-worker"))
            .args([
                &self.idemkey.address,
                &self.token,
                key,
                &self.provider_url,
                crash_at,
            ])
            .output()
            .await
            .expect("run charge-worker");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.is_empty() || out.status.code() == Some(86),
            "worker stderr: {stderr}"
        );
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
        )
    }

    async fn charges(&self) -> u64 {
        let stats: Value = reqwest::get(format!("{}/stats", self.provider_url))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        stats["charges"].as_u64().unwrap()
    }

    /// A worker dies at `crash_at`; a plain retry follows. Returns the number
    /// of charges and the retry's final answer.
    async fn crash_then_retry(&self, crash_at: &str) -> (u64, Value) {
        let (code, _) = self.worker("order-1", crash_at).await;
        assert_eq!(code, 86, "the first worker died at {crash_at}");
        let (code, answer) = self.worker("order-1", "none").await;
        assert_eq!(code, 0, "the retry finished");
        (self.charges().await, serde_json::from_str(&answer).unwrap())
    }
}

fn charge_of(answer: &Value) -> &str {
    answer["outcome"]["body"]["charge"]
        .as_str()
        .expect("an outcome with a charge")
}

#[tokio::test]
async fn a_crash_before_the_claim_leaves_nothing_behind() {
    let world = World::start().await;
    let (charges, answer) = world.crash_then_retry("before_claim").await;
    assert_eq!(charges, 1);
    assert_eq!(answer["state"], "completed");
    assert_eq!(charge_of(&answer), "ch_1");
}

#[tokio::test]
async fn a_crash_after_the_claim_before_the_effect_is_recovered_and_charged_once() {
    let world = World::start().await;
    let (charges, answer) = world.crash_then_retry("after_claim").await;
    assert_eq!(charges, 1);
    assert_eq!(
        answer["attempt"], 2,
        "the retry took over the dead owner's lease"
    );
    assert_eq!(charge_of(&answer), "ch_1");
}

#[tokio::test]
async fn a_crash_after_the_effect_before_complete_finds_the_charge_instead_of_repeating_it() {
    let world = World::start().await;
    let (charges, answer) = world.crash_then_retry("after_effect").await;
    assert_eq!(charges, 1, "the provider was asked, not charged again");
    assert_eq!(answer["attempt"], 2);
    assert_eq!(charge_of(&answer), "ch_1");
}

#[tokio::test]
async fn a_crash_after_complete_before_reading_the_answer_replays_the_outcome() {
    let world = World::start().await;
    let (charges, answer) = world.crash_then_retry("after_complete").await;
    assert_eq!(charges, 1);
    assert_eq!(answer["status"], "completed");
    assert_eq!(answer["replayed"], true);
    assert_eq!(charge_of(&answer), "ch_1");
}

#[tokio::test]
async fn two_simultaneous_first_attempts_charge_once_and_agree() {
    let world = World::start().await;
    let (a, b) = tokio::join!(
        world.worker("order-2", "none"),
        world.worker("order-2", "none")
    );
    assert_eq!((a.0, b.0), (0, 0));
    let (a, b): (Value, Value) = (
        serde_json::from_str(&a.1).unwrap(),
        serde_json::from_str(&b.1).unwrap(),
    );
    assert_eq!(world.charges().await, 1);
    assert_eq!(charge_of(&a), charge_of(&b));
}
