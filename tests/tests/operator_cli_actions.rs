//! The operator commands that change things (`idemkey classes set|delete`,
//! `idemkey keys quarantine|resolve|release`) run as a real process against
//! a real server: what each needs of the token, what it prints, and that the
//! server's state changed as it says.

use idemkey_api::auth::Role;
use idemkey_tests::operator::{idemkey, owned, scratch_file};
use idemkey_tests::TestApp;
use serde_json::json;

#[tokio::test]
async fn classes_get_set_and_delete_a_policy_with_an_admin_token() {
    let app = TestApp::spawn().await;
    let admin = app.token_with(&[Role::Admin]);
    let policy = scratch_file(
        "policy.json",
        &json!({"replay_window": "7d", "lease": "2m", "fingerprint": {"include": ["/amount"]}}),
    );
    let invalid = scratch_file("invalid.json", &json!({"replay_window": "forever"}));
    let p = policy.to_str().expect("path");

    let viewer = idemkey(
        &app.address,
        Some(&app.token),
        &["classes", "get", "payouts.send"],
    )
    .await;
    let set = idemkey(
        &app.address,
        Some(&admin),
        &["classes", "set", "payouts.send", "--file", p],
    )
    .await;
    let get = idemkey(
        &app.address,
        Some(&admin),
        &["classes", "get", "payouts.send", "--json"],
    )
    .await;
    let refused = idemkey(
        &app.address,
        Some(&admin),
        &[
            "classes",
            "set",
            "payouts.send",
            "--file",
            invalid.to_str().expect("path"),
        ],
    )
    .await;
    let unreadable = idemkey(
        &app.address,
        Some(&admin),
        &[
            "classes",
            "set",
            "payouts.send",
            "--file",
            "/nonexistent.json",
        ],
    )
    .await;
    let deleted = idemkey(
        &app.address,
        Some(&admin),
        &["classes", "delete", "payouts.send"],
    )
    .await;

    assert_eq!(viewer.code, 1);
    assert!(
        viewer.stderr.starts_with("error: forbidden (403)"),
        "{}",
        viewer.stderr
    );
    assert_eq!(set.code, 0);
    assert!(set
        .stdout
        .lines()
        .any(|l| l.starts_with("replay_window") && l.ends_with("7d")));
    assert!(set
        .stdout
        .lines()
        .any(|l| l.starts_with("fingerprint.include") && l.ends_with("/amount")));
    assert_eq!(get.json()["lease"], "2m");
    assert_eq!(get.json()["default"], false);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("invalid_policy (400)"),
        "{}",
        refused.stderr
    );
    assert_eq!(unreadable.code, 2);
    assert_eq!(deleted.code, 0);
    assert!(deleted
        .stdout
        .lines()
        .any(|l| l.starts_with("default") && l.contains("yes")));
    let now = idemkey(
        &app.address,
        Some(&admin),
        &["classes", "get", "payouts.send", "--json"],
    )
    .await;
    assert_eq!(now.json()["replay_window"], "1d", "back to the defaults");
    assert_eq!(now.json()["default"], true);
}

#[tokio::test]
async fn quarantine_resolve_and_release_keys_from_the_command_line() {
    let app = TestApp::spawn().await;
    let admin = app.token_with(&[Role::Admin]);
    let client = Some(app.token.as_str());
    let (op, a) = ("env.provision", app.address.as_str());
    let owner1 = owned(&app, op, "env-1").await;
    let owner2 = owned(&app, op, "env-2").await;
    let owner3 = owned(&app, op, "env-3").await;
    let outcome = scratch_file(
        "outcome.json",
        &json!({"status_code": 201, "body": {"env": "env-1"}}),
    );

    let q1 = idemkey(
        a,
        client,
        &[
            "keys",
            "quarantine",
            op,
            "env-1",
            "--owner-token",
            &owner1,
            "--reason",
            "dns timed out",
        ],
    )
    .await;
    idemkey(
        a,
        client,
        &[
            "keys",
            "quarantine",
            op,
            "env-2",
            "--owner-token",
            &owner2,
            "--reason",
            "charge timed out",
        ],
    )
    .await;
    let stuck = idemkey(
        a,
        client,
        &["keys", "list", "--state", "quarantined", "--json"],
    )
    .await;
    let viewer = idemkey(
        a,
        Some(&app.token_with(&[Role::Viewer])),
        &["keys", "resolve", op, "env-1", "--release"],
    )
    .await;
    let resolved = idemkey(
        a,
        Some(&admin),
        &[
            "keys",
            "resolve",
            op,
            "env-1",
            "--outcome-file",
            outcome.to_str().expect("path"),
        ],
    )
    .await;
    let released = idemkey(
        a,
        Some(&admin),
        &[
            "keys",
            "resolve",
            op,
            "env-2",
            "--release",
            "--reason",
            "no record at the provider",
            "--json",
        ],
    )
    .await;
    let live = idemkey(
        a,
        Some(&admin),
        &["keys", "resolve", op, "env-3", "--release"],
    )
    .await;
    let given_back = idemkey(
        a,
        client,
        &["keys", "release", op, "env-3", "--owner-token", &owner3],
    )
    .await;
    let neither = idemkey(a, Some(&admin), &["keys", "resolve", op, "env-3"]).await;

    assert_eq!(q1.code, 0);
    assert!(q1
        .stdout
        .lines()
        .any(|l| l.starts_with("quarantine_reason") && l.ends_with("dns timed out")));
    let stuck = stuck.json();
    let keys: Vec<&str> = stuck["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["key"].as_str())
        .collect();
    assert_eq!(keys, ["env-2", "env-1"]);
    assert!(viewer.code == 1 && viewer.stderr.contains("forbidden"));
    assert_eq!(resolved.code, 0);
    assert!(resolved
        .stdout
        .lines()
        .any(|l| l.starts_with("state") && l.ends_with("completed")));
    assert!(
        resolved.stdout.contains("resolved"),
        "the history shows the resolve"
    );
    assert_eq!(
        app.lookup(op, "env-1").await.json()["outcome"]["body"]["env"],
        "env-1"
    );
    assert_eq!(
        (released.code, released.json()),
        (0, json!({"status": "released"}))
    );
    assert_eq!(app.lookup(op, "env-2").await.status, 404);
    assert_eq!(live.code, 1, "a live lease is not resolved");
    assert!(
        live.stderr.contains("not_quarantined (409)"),
        "{}",
        live.stderr
    );
    assert_eq!(
        (given_back.code, given_back.stdout.as_str()),
        (0, "released\n")
    );
    assert_eq!(app.lookup(op, "env-3").await.status, 404);
    assert_eq!(neither.code, 2, "--release or --outcome-file is required");
}
