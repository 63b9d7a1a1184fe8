//! The documents a newcomer reads (README.md and docs/*.md) must be true:
//! their shell examples run against a real server, their metrics table is
//! what `/metrics` serves, their log lines are what the server logs.
//!
//! The convention for fenced blocks in those documents:
//!
//! - A ```sh (or ```bash) block **runs**. Every such block of a document
//!   runs in order in one bash process (`set -eo pipefail`; variables carry
//!   over from block to block), in the working directory of a server this
//!   test started with no configuration — the embedded default, as after
//!   `cargo run` — with `IDEMKEY` set to that server's address and the
//!   workspace's `idemkey` binary first on `PATH`. Examples use
//!   `${IDEMKEY:-http://127.0.0.1:8080}`, so they run as shown by hand too.
//! - A ```text block right after it (nothing but blank lines between) is
//!   what it must print: `…` stands for any run of characters (a line of
//!   just `…` for any lines); HTTP header lines and blank lines may be left
//!   out, and a header line that is shown must be printed with its answer;
//!   every other line must be shown, in order. A runnable block with no
//!   output block must print nothing.
//! - ```sh no-run: shown, never run — commands that cannot run here (the
//!   whole test suite, starting another server, deploy commands, kubectl,
//!   the benchmark, perf). Other shell languages (```console, ```shell)
//!   are refused: write ```sh or ```sh no-run.
//! - In docs/operations.md, ```text log and ```json log blocks are log lines
//!   as the server prints them, checked against real lines in the text and
//!   JSON formats.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use idemkey_api::auth::Role;
use idemkey_tests::docs::expect::line_matches;
use idemkey_tests::docs::logs::{logged_in_source, same_form, useful_messages, LoggingServer};
use idemkey_tests::docs::metrics::{
    counted_statements, disagreements, documented, registered, scraped,
};
use idemkey_tests::docs::run::{examples, run_document};
use idemkey_tests::docs::{dangling_paths, documents, fenced_blocks, read, section};
use idemkey_tests::process::ServerProcess;
use idemkey_tests::TestApp;
use serde_json::{json, Value};

/// The documents whose examples the tests below run.
const RUN: [&str; 7] = [
    "README.md",
    "docs/cli.md",
    "docs/dashboard.md",
    "docs/operations.md",
    "docs/protocol.md",
    "docs/recovery.md",
    "docs/webhooks.md",
];

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "idemkey-docs-{name}-{:016x}",
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs `doc`'s examples against a fresh server on the embedded default.
async fn run_examples_of(doc: &str) {
    let dir = scratch_dir(&doc.replace(['/', '.'], "-"));
    let server = ServerProcess::start_in(&dir, &HashMap::new()).await;
    let failures = run_document(doc, &dir, &server.address).await;
    server.stop().await;
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_shell_block_runs_or_is_marked_no_run() {
    let mut problems = Vec::new();
    let mut with_examples = Vec::new();
    for doc in documents() {
        match examples(&doc, &read(&doc)) {
            Ok(found) if !found.is_empty() => with_examples.push(doc),
            Ok(_) => {}
            Err(found) => problems.extend(found),
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    assert_eq!(
        with_examples, RUN,
        "every document with examples is run by a test below"
    );
}

#[tokio::test]
async fn the_readme_examples_run() {
    run_examples_of("README.md").await;
}

#[tokio::test]
async fn the_protocol_examples_run() {
    run_examples_of("docs/protocol.md").await;
}

#[tokio::test]
async fn the_recovery_examples_run() {
    run_examples_of("docs/recovery.md").await;
}

#[tokio::test]
async fn the_operations_examples_run() {
    run_examples_of("docs/operations.md").await;
}

#[tokio::test]
async fn the_cli_examples_run() {
    run_examples_of("docs/cli.md").await;
}

#[tokio::test]
async fn the_dashboard_examples_run() {
    run_examples_of("docs/dashboard.md").await;
}

#[tokio::test]
async fn the_webhooks_examples_run() {
    run_examples_of("docs/webhooks.md").await;
}

#[test]
fn the_readme_starts_with_running_the_service_and_the_whole_suite() {
    let first = fenced_blocks(&read("README.md"))
        .into_iter()
        .next()
        .expect("a block");
    let commands: Vec<&str> = first
        .text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(commands, ["cargo run", "bash scripts/test.sh"], "{first:?}");
}

/// Every series family the server serves is in the table, with its type
/// and labels, and every documented one is served.
#[tokio::test]
async fn the_metrics_table_lists_every_served_metric() {
    let app = TestApp::spawn().await;
    let claimed = app.claim("charges.create", "k1", json!({"n": 1})).await;
    claimed.assert(201, "claimed");
    let owner = claimed.owner_token();
    let outcome = json!({"status_code": 201, "body": {"charge": "ch_1"}});
    app.complete("charges.create", "k1", &owner, outcome).await;
    app.claim("charges.create", "k1", json!({"n": 1})).await;
    app.claim("charges.create", "k1", json!({"n": 2})).await;
    app.lookup("charges.create", "k1").await;
    let second = app.claim("charges.create", "k2", json!({"n": 1})).await;
    let owner = second.owner_token();
    app.heartbeat("charges.create", "k2", &owner).await;
    app.release("charges.create", "k2", &owner).await;
    let response = app
        .client
        .get(format!("{}/metrics", app.address))
        .bearer_auth(app.token_with(&[Role::Metrics]))
        .send()
        .await
        .expect("scrape");
    assert_eq!(response.status(), 200);
    let scrape = scraped(&response.text().await.expect("text"));
    let table = documented(&read("docs/operations.md"));

    let problems = disagreements(&table, &registered(), &scrape);

    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
    assert!(
        scrape["idemkey_store_statements_total"].series.len() >= 5,
        "the calls above were counted: {:?}",
        scrape["idemkey_store_statements_total"]
    );
}

/// The statements the table names are exactly those the engine counts,
/// including the ones the scrape above never sent.
#[test]
fn the_metrics_table_names_every_counted_statement() {
    let table = documented(&read("docs/operations.md"));
    let statements = table
        .iter()
        .find(|doc| doc.name == "idemkey_store_statements_total")
        .and_then(|doc| doc.labels.iter().find(|l| l.name == "statement"))
        .expect("the statement label, with its values");
    assert_eq!(statements.values, counted_statements());
}

/// Digits as zeros: a documented line's timestamp and ids stand for any
/// of the same shape.
fn shape(line: &str) -> String {
    line.chars()
        .map(|c| if c.is_ascii_digit() { '0' } else { c })
        .collect()
}

/// The documented log lines have the form real ones have: a call refused
/// for its token, logged inside its request span, in text and in JSON.
#[tokio::test]
async fn the_documented_log_lines_are_real_ones() {
    let logs = section(&read("docs/operations.md"), "Logs");
    let blocks = fenced_blocks(&logs);
    let mut problems = Vec::new();
    for (format, info) in [("text", "text log"), ("json", "json log")] {
        let documented: Vec<&str> = blocks
            .iter()
            .filter(|b| b.info == info)
            .flat_map(|b| b.text.lines())
            .collect();
        assert!(!documented.is_empty(), "a ```{info} block in Logs");
        let dir = scratch_dir(&format!("logs-{format}"));
        let server = LoggingServer::start(&dir, "info,idemkey_api=debug", format).await;
        let refused = reqwest::Client::new()
            .get(format!("{}/v1/keys", server.address))
            .bearer_auth("not-a-token")
            .header("x-request-id", "4f1c2a9e0b7d4c3a8e6f5d2b1a0c9e8d")
            .send()
            .await
            .expect("request");
        assert_eq!(refused.status(), 401);
        server.wait_for("token refused").await;
        let real: Vec<String> = server.lines().iter().map(|l| shape(l)).collect();
        for line in documented {
            let line = shape(line);
            let found = if format == "text" {
                real.iter().any(|r| line_matches(&line, r))
            } else {
                let doc: Value = serde_json::from_str(&line).expect("a documented JSON line");
                let tried: Vec<String> = real
                    .iter()
                    .filter_map(|r| serde_json::from_str::<Value>(r).ok())
                    .filter(|r| r["fields"]["message"] == doc["fields"]["message"])
                    .map(|r| same_form(&doc, &r).err().unwrap_or_default())
                    .collect();
                if !tried.is_empty() && !tried.iter().any(String::is_empty) {
                    problems.push(format!(
                        "{line}\nhas another form than\n  {}",
                        tried.join("\n  ")
                    ));
                }
                !tried.is_empty()
            };
            if !found {
                problems.push(format!(
                    "no {format} line like\n{line}\nin\n{}",
                    real.join("\n")
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n\n"));
}

/// No document points at material a reader does not have: an internal
/// specification or issue numbers.
#[test]
fn the_docs_cite_no_internal_specification_or_issue() {
    let mut docs = documents();
    docs.push("deploy/README.md".into());
    let mut problems = Vec::new();
    for doc in docs {
        for (at, line) in read(&doc).lines().enumerate() {
            let lower = line.to_lowercase();
            let words: Vec<&str> = lower
                .split(|c: char| !c.is_ascii_alphanumeric() && c != '#' && c != '.')
                .collect();
            let cites = lower.contains("spec.md")
                || words.contains(&"spec")
                || words
                    .windows(2)
                    .any(|w| w[0] == "issue" && w[1].parse::<u32>().is_ok())
                || words.iter().any(|w| {
                    w.strip_prefix('#')
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                });
            if cites {
                problems.push(format!("{doc}:{}: {line}", at + 1));
            }
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

/// Every file or directory of the repository a document names (as inline
/// code or a link, from a top-level directory) exists: a moved module or a
/// renamed test leaves no dangling path behind.
#[test]
fn the_paths_the_docs_name_exist() {
    let missing: Vec<String> = documents().iter().flat_map(|d| dangling_paths(d)).collect();
    assert!(missing.is_empty(), "\n{}", missing.join("\n"));
}

/// Every message of the "Useful lines" in docs/operations.md is one the
/// server's source logs.
#[test]
fn the_useful_log_lines_are_logged_somewhere() {
    let logs = section(&read("docs/operations.md"), "Logs");
    let useful = logs
        .split_once("Useful lines:")
        .expect("a list of useful lines")
        .1;
    let messages = useful_messages(useful);
    assert!(messages.len() >= 8, "{messages:?}");
    let unknown: Vec<&String> = messages.iter().filter(|m| !logged_in_source(m)).collect();
    assert!(unknown.is_empty(), "not in api/src or web/src: {unknown:?}");
}

/// The benchmark suite's duration is stated once in the README and once in
/// docs/operations.md; both say what the last full run (in the README's
/// generated section) took, to the nearest minute.
#[test]
fn the_benchmarks_duration_is_the_same_everywhere() {
    let readme = read("README.md");
    let wall: u64 = readme
        .split(" s wall")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the generated section names the run's wall time (`… 409 s wall`)");
    let minutes = format!("about {} minutes", (wall + 30) / 60);
    let bench_block = fenced_blocks(&readme)
        .into_iter()
        .find(|b| b.text.contains("scripts/bench.sh"))
        .expect("the README's benchmark command");
    let operations = section(&read("docs/operations.md"), "Benchmarks");
    let mut stated = BTreeSet::new();
    for text in [bench_block.text.as_str(), operations.as_str()] {
        let words: Vec<&str> = text.split_whitespace().collect();
        for w in words.windows(3) {
            if w[0] == "about" && w[2].starts_with("minutes") {
                stated.insert(format!("about {} minutes", w[1]));
            }
        }
    }
    assert_eq!(
        stated,
        BTreeSet::from([minutes]),
        "the README's bench command and operations.md's Benchmarks state the last run's duration"
    );
}
