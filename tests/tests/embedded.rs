//! The embedded default: the real binary, an empty directory, no
//! environment at all — the README's curl session works, and the data
//! survives a crash and restart.

use std::collections::HashMap;

use idemkey_tests::app::Answer;
use idemkey_tests::process::{run_command, ServerProcess};
use serde_json::{json, Value};

async fn post(server: &ServerProcess, token: &str, path: &str, body: Value) -> Answer {
    let url = format!("{}/v1/keys/charges.create/{path}", server.address);
    let response = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request");
    Answer::from(response).await
}

#[tokio::test]
async fn the_readme_session_works_with_no_configuration_and_survives_a_restart() {
    // Arrange: an empty working directory and no variables but the port.
    let dir = std::env::temp_dir().join(format!("idemkey-embedded-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let vars = HashMap::new();
    let server = ServerProcess::start_in(&dir, &vars).await;
    assert!(
        dir.join("data/idemkey.db").exists(),
        "the SQLite file lives in ./data"
    );

    // The README's session: mint a token, claim, complete, replay, reuse.
    let token = run_command(
        &dir,
        &["token", "--tenant", "acme", "--roles", "client,viewer"],
    )
    .await;
    let token = token.trim();
    let request = json!({"amount": "25.00", "currency": "EUR", "customer": "cus_42"});
    let claimed = post(
        &server,
        token,
        "order-1001/claim",
        json!({"request": request}),
    )
    .await;
    claimed.assert(201, "claimed");
    let outcome = json!({"status_code": 201, "body": {"charge": "ch_1"}, "resource_id": "ch_1"});
    let body = json!({"owner_token": claimed.owner_token(), "outcome": outcome});
    post(&server, token, "order-1001/complete", body)
        .await
        .assert(200, "completed");
    let reordered =
        json!({"request": {"customer": "cus_42", "currency": "EUR", "amount": "25.00"}});
    let replay = post(&server, token, "order-1001/claim", reordered.clone()).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], outcome);
    let changed = json!({"request": {"amount": "99.00", "currency": "EUR", "customer": "cus_42"}});
    post(&server, token, "order-1001/claim", changed)
        .await
        .assert(422, "key_reused");

    // Act: crash and start again on the same directory.
    server.stop().await;
    let server = ServerProcess::start_in(&dir, &vars).await;

    // Assert: the same token still works and the replay is unchanged.
    let after = post(&server, token, "order-1001/claim", reordered).await;
    after.assert(200, "completed");
    assert_eq!(after.text, replay.text);
    server.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}
