//! Bad addresses over real HTTP: keys too long or with characters outside
//! visible ASCII, operation names off their pattern, unknown routes and
//! known routes with the wrong method. Each gets its documented
//! problem+json error, and the record it was aimed at is unchanged
//! afterwards. Bad request bodies are in `bad_input.rs`.

use idemkey_tests::bad_input::{assert_unchanged, charge, completed_key, OP};
use idemkey_tests::TestApp;
use serde_json::json;

#[tokio::test]
async fn a_key_of_256_characters_is_invalid_but_255_is_fine() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;
    let long = "k".repeat(256);
    let longest = "k".repeat(255);

    let too_long = app.claim(OP, &long, charge(25)).await;
    let lookup_too_long = app.lookup(OP, &long).await;
    let fine = app.claim(OP, &longest, charge(25)).await;

    too_long.assert(400, "invalid_key");
    lookup_too_long.assert(400, "invalid_key");
    fine.assert(201, "claimed");
    assert_eq!(app.lookup(OP, &longest).await.json()["key"], longest);
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn a_key_with_a_control_character_space_or_non_ascii_is_invalid() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    // "k1" plus one character outside 0x21-0x7E, percent-encoded in the path.
    for encoded in ["k1%0A", "k1%20", "k1%09", "k1%7F", "k1%C3%A9", "k1%00"] {
        let url = format!("{}/v1/keys/{OP}/{encoded}/claim", app.address);

        let answer = app
            .post_raw(&url, json!({"request": charge(25)}).to_string())
            .await;

        answer.assert(400, "invalid_key");
    }
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn a_bad_operation_name_is_invalid_operation() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    for operation in [
        "Charges".to_owned(),
        "Charges.create".to_owned(),
        "-charges".to_owned(),
        ".charges".to_owned(),
        "charges%20create".to_owned(),
        "a".repeat(65),
    ] {
        let claim = app
            .call(&operation, "k1", "claim", json!({"request": charge(25)}))
            .await;
        let lookup = app.lookup(&operation, "k1").await;

        claim.assert(400, "invalid_operation");
        lookup.assert(400, "invalid_operation");
    }
    app.claim(&"a".repeat(64), "k1", charge(25))
        .await
        .assert(201, "claimed");
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn an_unknown_route_is_a_problem_json_404() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    let answers = [
        app.request(reqwest::Method::GET, "/v1/nope").await,
        app.request(reqwest::Method::GET, "/").await,
        app.request(
            reqwest::Method::POST,
            &format!("/v1/keys/{OP}/k1/frobnicate"),
        )
        .await,
        app.request(
            reqwest::Method::POST,
            &format!("/v1/keys/{OP}/k1/claim/extra"),
        )
        .await,
        app.request(reqwest::Method::GET, "/v2/keys/charges.create/k1")
            .await,
    ];

    for answer in &answers {
        answer.assert(404, "no_route");
    }
    assert_unchanged(&app, &before).await;
}

#[tokio::test]
async fn a_known_route_with_the_wrong_method_is_a_problem_json_error() {
    let app = TestApp::spawn().await;
    let before = completed_key(&app).await;

    let get_claim = app
        .request(reqwest::Method::GET, &format!("/v1/keys/{OP}/k1/claim"))
        .await;
    let delete_key = app
        .request(reqwest::Method::DELETE, &format!("/v1/keys/{OP}/k1"))
        .await;

    for answer in [&get_claim, &delete_key] {
        assert!(
            answer.status == 404 || answer.status == 405,
            "{}: {}",
            answer.status,
            answer.text
        );
        assert!(
            answer.content_type.starts_with("application/problem+json"),
            "every error is problem+json: {:?} {:?}",
            answer.content_type,
            answer.text
        );
    }
    assert_unchanged(&app, &before).await;
}
