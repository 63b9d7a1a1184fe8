//! Running a document's shell examples, in order, in one bash process, and
//! comparing what each printed with the output the document shows after it.
//! The convention is stated in `tests/tests/docs_examples.rs`.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;

use super::expect::output_matches;
use super::{fenced_blocks, Block};

/// Info-string languages of shell blocks.
const SHELLS: [&str; 5] = ["sh", "bash", "shell", "console", "zsh"];
/// The languages whose blocks run (unless marked `no-run`).
const RUNNABLE: [&str; 2] = ["sh", "bash"];
/// The flag that keeps a shell block from running.
pub const NO_RUN: &str = "no-run";

/// A shell block that runs, and the output its document shows for it.
#[derive(Debug, Clone)]
pub struct Example {
    pub block: Block,
    /// The `text` block right after it; `None`: it must print nothing.
    pub shown: Option<Block>,
}

/// The examples of a document, or what breaks the convention in it.
pub fn examples(doc: &str, markdown: &str) -> Result<Vec<Example>, Vec<String>> {
    let blocks = fenced_blocks(markdown);
    let mut examples = Vec::new();
    let mut problems = Vec::new();
    for (at, block) in blocks.iter().enumerate() {
        let language = block.language();
        if !SHELLS.contains(&language) {
            continue;
        }
        let flags: Vec<&str> = block.info.split_whitespace().skip(1).collect();
        if flags.iter().any(|flag| *flag != NO_RUN) {
            problems.push(format!(
                "{doc}:{}: unknown flag in ```{}: only `{NO_RUN}` is known",
                block.line, block.info
            ));
        }
        if block.has_flag(NO_RUN) {
            continue;
        }
        if !RUNNABLE.contains(&language) {
            problems.push(format!(
                "{doc}:{}: a ```{language} block: write ```sh (it runs) or ```sh {NO_RUN}",
                block.line
            ));
            continue;
        }
        let shown = blocks
            .get(at + 1)
            .filter(|next| next.follows_block && next.language() == "text")
            .cloned();
        examples.push(Example {
            block: block.clone(),
            shown,
        });
    }
    if problems.is_empty() {
        Ok(examples)
    } else {
        Err(problems)
    }
}

const MARK: &str = "@@idemkey-docs-example@@";

/// The script that runs `examples` in order, each announced by a marker
/// line on standard output.
pub fn script(examples: &[Example]) -> String {
    let mut script = String::from("set -eo pipefail\n");
    for (at, example) in examples.iter().enumerate() {
        script.push_str(&format!("printf '\\n{MARK} {at}\\n'\n"));
        script.push_str(&example.block.text);
        script.push('\n');
    }
    script.push_str(&format!("printf '\\n{MARK} end\\n'\n"));
    script
}

/// Runs the examples of `doc` with bash in `dir`, with `IDEMKEY` set to
/// `address` and the workspace's `idemkey` first on `PATH`; returns every
/// example whose output differs from what the document shows (empty when
/// all hold).
pub async fn run_document(doc: &str, dir: &Path, address: &str) -> Vec<String> {
    let markdown = super::read(doc);
    let examples = match examples(doc, &markdown) {
        Ok(examples) => examples,
        Err(problems) => return problems,
    };
    assert!(!examples.is_empty(), "{doc} has no example to run");
    let bin_dir = crate::process::binary()
        .parent()
        .expect("target/debug")
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let child = Command::new("bash")
        .arg("-c")
        .arg(script(&examples))
        .current_dir(dir)
        .env_clear()
        .env("PATH", path)
        .env("HOME", dir)
        .env("LANG", "C.UTF-8")
        .env("IDEMKEY", address)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bash");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{doc}: the examples ran for more than 120 s"))
        .expect("bash output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    compare(doc, &examples, &stdout, &stderr)
}

/// Splits what the script printed by its markers and compares each
/// example's part with its shown output.
fn compare(doc: &str, examples: &[Example], stdout: &str, stderr: &str) -> Vec<String> {
    let mut printed: Vec<String> = Vec::new();
    let mut finished = false;
    for line in stdout.lines() {
        match line.strip_prefix(MARK) {
            Some(" end") => finished = true,
            Some(_) => printed.push(String::new()),
            None => {
                if let Some(part) = printed.last_mut() {
                    part.push_str(line);
                    part.push('\n');
                }
            }
        }
    }
    let mut failures = Vec::new();
    for (at, example) in examples.iter().enumerate() {
        let line = example.block.line;
        let Some(part) = printed.get(at) else { break };
        if !finished && at + 1 == printed.len() {
            failures.push(format!(
                "{doc}:{line}: the example failed (bash -e stopped in it).\n\
                 It printed:\n{part}\nStandard error:\n{stderr}"
            ));
            break;
        }
        let shown = example.shown.as_ref().map_or("", |b| b.text.as_str());
        if !output_matches(shown, part) {
            let place = example
                .shown
                .as_ref()
                .map_or("no output block".to_owned(), |b| format!("line {}", b.line));
            failures.push(format!(
                "{doc}:{line}: the example printed\n{part}\nbut the document shows ({place})\n{shown}"
            ));
        }
    }
    if printed.is_empty() {
        failures.push(format!(
            "{doc}: bash ran nothing. Standard error:\n{stderr}"
        ));
    }
    failures
}
