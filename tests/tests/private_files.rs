//! What the embedded default writes is private: the data directory and
//! every directory in it are 0700, every file 0600 — the generated secrets,
//! the SQLite database and its companions, the local archive's segments.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use idemkey_tests::app::Answer;
use idemkey_tests::process::{run_command, ServerProcess};
use idemkey_tests::tiering::{quick_tiering, until};
use serde_json::{json, Value};

async fn send(
    server: &ServerProcess,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Answer {
    let mut request = reqwest::Client::new()
        .request(method, format!("{}{path}", server.address))
        .bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    Answer::from(request.send().await.expect("request")).await
}

/// Every entry under `root` with its permission bits.
fn modes(root: &Path) -> Vec<(PathBuf, bool, u32)> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read dir") {
            let path = entry.expect("entry").path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue; // removed meanwhile (a temporary file)
            };
            if meta.is_dir() {
                pending.push(path.clone());
            }
            found.push((path, meta.is_dir(), meta.mode() & 0o777));
        }
    }
    found
}

#[tokio::test]
async fn the_data_directory_and_every_file_written_in_it_are_private() {
    // Arrange: no configuration but fast workers, in an empty directory.
    let dir = std::env::temp_dir().join(format!("idemkey-private-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let vars = HashMap::from([("IDEMKEY_WORKER_INTERVAL".to_owned(), "200ms".to_owned())]);
    let server = ServerProcess::start_in(&dir, &vars).await;
    let admin = run_command(&dir, &["token", "--tenant", "acme", "--roles", "admin"]).await;
    let admin = admin.trim();

    // Act: a key that is completed and then tiered to the local archive.
    let class = "/v1/operation-classes/charges.create";
    let put = send(
        &server,
        reqwest::Method::PUT,
        class,
        admin,
        Some(quick_tiering()),
    )
    .await;
    assert_eq!(put.status, 200, "{}", put.text);
    let claim = "/v1/keys/charges.create/k1/claim";
    let claimed = send(
        &server,
        reqwest::Method::POST,
        claim,
        admin,
        Some(json!({"request": 1})),
    )
    .await;
    claimed.assert(201, "claimed");
    let done = json!({"owner_token": claimed.owner_token(), "outcome": {"status_code": 201}});
    send(
        &server,
        reqwest::Method::POST,
        "/v1/keys/charges.create/k1/complete",
        admin,
        Some(done),
    )
    .await
    .assert(200, "completed");
    until("k1 is archived", Duration::from_secs(60), || async {
        let found = send(
            &server,
            reqwest::Method::GET,
            "/v1/keys/charges.create/k1",
            admin,
            None,
        )
        .await;
        found.json()["tier"] == "archived"
    })
    .await;

    // Assert: while the server runs, everything under ./data is private.
    let data = dir.join("data");
    let entries = modes(&data);
    let names: Vec<String> = entries
        .iter()
        .map(|(p, _, _)| p.strip_prefix(&data).unwrap().display().to_string())
        .collect();
    for expected in [
        "jwt-dev-secret",
        "effect-secret",
        "session-secret",
        "idemkey.db",
        "idemkey.db-wal",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("archive/") && n.ends_with(".seg")),
        "a segment in {names:?}"
    );
    let mut open = Vec::new();
    let data_mode = std::fs::metadata(&data).unwrap().mode() & 0o777;
    if data_mode != 0o700 {
        open.push(format!("data {data_mode:04o}"));
    }
    for ((path, is_dir, mode), name) in entries.iter().zip(&names) {
        let wanted = if *is_dir { 0o700 } else { 0o600 };
        if *mode != wanted {
            open.push(format!(
                "{name} {mode:04o} (wanted {wanted:04o}) {}",
                path.display()
            ));
        }
    }
    assert!(open.is_empty(), "not private: {open:#?}");
    server.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
