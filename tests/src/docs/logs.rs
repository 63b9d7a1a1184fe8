//! A real `idemkey` process whose every log line a test can read, in text
//! or JSON, and the comparison of a documented log line with real ones.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::expect::line_matches;

/// A server process started with the embedded default in `dir`, logging at
/// `rust_log` in `format` (`text` or `json`); killed when dropped.
pub struct LoggingServer {
    pub address: String,
    lines: Arc<Mutex<Vec<String>>>,
    _child: Child,
}

impl LoggingServer {
    pub async fn start(dir: &Path, rust_log: &str, format: &str) -> Self {
        let mut child = Command::new(crate::process::binary())
            .arg("serve")
            .current_dir(dir)
            .env_clear()
            .env("IDEMKEY_LISTEN", "127.0.0.1:0")
            .env("IDEMKEY_LOG_FORMAT", format)
            .env("RUST_LOG", rust_log)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn idemkey");
        let mut reader = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let announced = async {
            loop {
                let line = reader
                    .next_line()
                    .await
                    .expect("stderr")
                    .expect("idemkey exited before listening");
                sink.lock().expect("lines").push(line.clone());
                if line.contains("idemkey listening") {
                    break address_in(&line);
                }
            }
        };
        let address = tokio::time::timeout(Duration::from_secs(60), announced)
            .await
            .expect("idemkey announced its address within 60 s");
        tokio::spawn(async move {
            while let Ok(Some(line)) = reader.next_line().await {
                sink.lock().expect("lines").push(line);
            }
        });
        Self {
            address,
            lines,
            _child: child,
        }
    }

    /// Every line logged so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }

    /// Waits until a line containing `needle` was logged, and returns it.
    pub async fn wait_for(&self, needle: &str) -> String {
        for _ in 0..100 {
            if let Some(line) = self.lines().into_iter().find(|l| l.contains(needle)) {
                return line;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no log line containing {needle:?} within 10 s")
    }
}

/// The bound address in a `idemkey listening` line, text or JSON.
fn address_in(line: &str) -> String {
    let addr = match serde_json::from_str::<Value>(line) {
        Ok(json) => json["fields"]["addr"]
            .as_str()
            .expect("fields.addr")
            .to_owned(),
        Err(_) => line
            .split("addr=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .expect("addr=")
            .to_owned(),
    };
    format!("http://{addr}")
}

/// Whether a real JSON log line has exactly the documented line's form:
/// the same members at every level, arrays of the same length, and every
/// documented string value matching (`…` standing for any run of
/// characters; other values must be equal).
pub fn same_form(documented: &Value, real: &Value) -> Result<(), String> {
    match (documented, real) {
        (Value::Object(doc), Value::Object(real)) => {
            let doc_keys: Vec<&String> = doc.keys().collect();
            let real_keys: Vec<&String> = real.keys().collect();
            if doc_keys != real_keys {
                return Err(format!(
                    "members {doc_keys:?} documented, {real_keys:?} logged"
                ));
            }
            for (key, value) in doc {
                same_form(value, &real[key]).map_err(|e| format!("{key}: {e}"))?;
            }
            Ok(())
        }
        (Value::Array(doc), Value::Array(real)) if doc.len() == real.len() => {
            doc.iter().zip(real).try_for_each(|(d, r)| same_form(d, r))
        }
        (Value::String(doc), Value::String(real)) if line_matches(doc, real) => Ok(()),
        (doc, real) if doc == real => Ok(()),
        (doc, real) => Err(format!("{doc} documented, {real} logged")),
    }
}

/// The messages of documented log lines (`idemkey listening addr=…`,
/// `store ready backend="postgres" url=…`, `archive not reachable; …`):
/// each inline code span of `markdown` up to its first field or `…`.
pub fn useful_messages(markdown: &str) -> Vec<String> {
    super::code_spans_and_links(markdown)
        .into_iter()
        .filter(|(_, is_link)| !is_link)
        .map(|(code, _)| {
            let mut message = Vec::new();
            for word in code.split(' ') {
                let is_field = word.split_once('=').is_some_and(|(name, _)| {
                    !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                });
                if is_field || word.contains('…') {
                    break;
                }
                message.push(word);
            }
            message.join(" ")
        })
        .filter(|message| !message.is_empty())
        .collect()
}

/// Whether a string literal in `api/src` or `web/src` holds `message`.
pub fn logged_in_source(message: &str) -> bool {
    let mut stack = vec![
        super::repo_root().join("api/src"),
        super::repo_root().join("web/src"),
    ];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("source dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && std::fs::read_to_string(&path).is_ok_and(|text| text.contains(message))
            {
                return true;
            }
        }
    }
    false
}
