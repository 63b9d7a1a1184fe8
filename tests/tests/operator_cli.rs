//! The operator commands' read side (`idemkey keys get|list`) run as a real
//! process against a real server: their tables, their `--json` (the API's
//! JSON unchanged), their exit codes, and the tenant boundary — a token for
//! one tenant never shows another's keys, nor acts on them.

use idemkey_api::auth::Role;
use idemkey_tests::operator::{idemkey, owned};
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use serde_json::json;

#[tokio::test]
async fn keys_get_and_list_print_a_table_or_the_apis_json_and_exit_codes_say_what_failed() {
    let app = TestApp::spawn().await;
    let owner = owned(&app, "charges.create", "order-1").await;
    let done = app
        .complete(
            "charges.create",
            "order-1",
            &owner,
            json!({"status_code": 201, "body": {"charge": "ch_1"}}),
        )
        .await;
    assert_eq!(done.status, 200);
    owned(&app, "charges.create", "order/2").await;
    let t = Some(app.token.as_str());

    let table = idemkey(&app.address, t, &["keys", "list"]).await;
    let json = idemkey(&app.address, t, &["keys", "list", "--json"]).await;
    let api = app.request(reqwest::Method::GET, "/v1/keys").await.json();
    let get = idemkey(
        &app.address,
        t,
        &["keys", "get", "charges.create", "order-1"],
    )
    .await;
    let get_json = idemkey(
        &app.address,
        t,
        &["keys", "get", "charges.create", "order/2", "--json"],
    )
    .await;
    let missing = idemkey(
        &app.address,
        t,
        &["keys", "get", "charges.create", "order-9"],
    )
    .await;
    let bad_query = idemkey(&app.address, t, &["keys", "list", "--older-than", "soon"]).await;
    let no_token = idemkey(&app.address, None, &["keys", "list"]).await;
    let nobody = idemkey("http://127.0.0.1:9", t, &["keys", "list"]).await;

    assert_eq!(
        (table.code, json.code, get.code, get_json.code),
        (0, 0, 0, 0)
    );
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[0].starts_with("OPERATION") && lines[0].contains("STATE"),
        "{lines:?}"
    );
    assert!(
        lines[1].contains("order/2") && lines[1].contains("in_progress"),
        "newest first"
    );
    assert!(lines[2].contains("order-1") && lines[2].contains("completed"));
    assert_eq!(json.json(), api, "--json is the API's answer unchanged");
    assert!(get
        .stdout
        .lines()
        .any(|l| l.starts_with("state") && l.ends_with("completed")));
    assert!(
        get.stdout.contains(r#"201 {"charge":"ch_1"}"#),
        "{}",
        get.stdout
    );
    assert!(get.stdout.lines().any(|l| l.contains("claimed")) && get.stdout.contains("completed"));
    assert_eq!(
        get_json.json(),
        app.lookup("charges.create", "order/2").await.json()
    );
    assert_eq!(missing.code, 3, "not found");
    assert!(
        missing.stderr.starts_with("error: not_found (404)"),
        "{}",
        missing.stderr
    );
    assert!(missing.stdout.is_empty());
    assert_eq!(bad_query.code, 1);
    assert!(bad_query.stderr.contains("invalid_query (400)"));
    assert_eq!(no_token.code, 2, "usage");
    assert!(no_token.stderr.contains("IDEMKEY_TOKEN"));
    assert_eq!(nobody.code, 4, "no answer");
}

#[tokio::test]
async fn a_token_for_one_tenant_never_sees_another_tenants_keys() {
    let app = TestApp::spawn().await;
    owned(&app, "charges.create", "acme-order").await;
    let other = fresh_tenant();
    let other_admin = token(&other, &[Role::Admin, Role::Client, Role::Viewer]);
    let mine = idemkey(&app.address, Some(&app.token), &["keys", "list", "--json"]).await;

    let list = idemkey(&app.address, Some(&other_admin), &["keys", "list"]).await;
    let list_json = idemkey(
        &app.address,
        Some(&other_admin),
        &["keys", "list", "--json"],
    )
    .await;
    let get = idemkey(
        &app.address,
        Some(&other_admin),
        &["keys", "get", "charges.create", "acme-order"],
    )
    .await;
    let never = idemkey(
        &app.address,
        Some(&other_admin),
        &["keys", "get", "charges.create", "never-was"],
    )
    .await;
    let resolve = idemkey(
        &app.address,
        Some(&other_admin),
        &[
            "keys",
            "resolve",
            "charges.create",
            "acme-order",
            "--release",
        ],
    )
    .await;

    assert_eq!(mine.json()["items"].as_array().map(Vec::len), Some(1));
    assert_eq!((list.code, list.stdout.as_str()), (0, "no keys\n"));
    assert_eq!(list_json.json(), json!({"items": [], "next_cursor": null}));
    let release = idemkey(
        &app.address,
        Some(&other_admin),
        &[
            "keys",
            "release",
            "charges.create",
            "acme-order",
            "--owner-token",
            "x",
        ],
    )
    .await;
    assert_eq!(
        (get.code, never.code, resolve.code, release.code),
        (3, 3, 3, 3),
        "not found, never \"released\""
    );
    // Another tenant's key and one that never existed read the same.
    let first_line = |s: &str| s.split(" (request").next().unwrap_or_default().to_owned();
    assert_eq!(first_line(&get.stderr), first_line(&never.stderr));
    let still = app.lookup("charges.create", "acme-order").await;
    assert_eq!(
        (still.status, still.json()["state"].as_str()),
        (200, Some("in_progress"))
    );
}
