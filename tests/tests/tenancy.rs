//! Tenant isolation over real HTTP: the tenant comes from the token only, and
//! another tenant's key is indistinguishable from a key that never existed
//! (SPEC §2, §4 "Other answers", §5).

use idemkey_api::auth::Role;
use idemkey_tests::app::Answer;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "charges.create";

fn charge(amount: u32) -> Value {
    json!({"amount": amount, "currency": "EUR", "customer": "cus_1"})
}

fn outcome(id: &str) -> Value {
    json!({"status_code": 201, "headers": {"Location": format!("/charges/{id}")}, "body": {"id": id}, "resource_id": id})
}

/// A client+viewer token for a second tenant on the same server.
fn tenant_b() -> String {
    token(&fresh_tenant(), &[Role::Client, Role::Viewer])
}

/// Everything a caller can observe of an answer, but the call's own
/// request id (which differs for every call, whoever's key it names).
fn observable(a: &Answer) -> (u16, &str, Option<&str>, String) {
    (
        a.status,
        a.content_type.as_str(),
        a.retry_after.as_deref(),
        a.body_but_request_id(),
    )
}

#[tokio::test]
async fn another_tenants_key_looks_exactly_like_a_key_that_never_existed() {
    let app = TestApp::spawn().await;
    let owner = app.claim(OP, "k1", charge(25)).await.owner_token();
    let b = tenant_b();

    let theirs = app.lookup_as(&b, OP, "k1").await;
    let never = app.lookup_as(&b, OP, "never-existed").await;

    theirs.assert(404, "not_found");
    assert_eq!(observable(&theirs), observable(&never));
    assert!(!theirs.text.contains(&app.tenant), "{}", theirs.text);
    // Still A's, in progress, owned by A.
    app.heartbeat(OP, "k1", &owner)
        .await
        .assert(200, "in_progress");
}

#[tokio::test]
async fn another_tenant_cannot_complete_heartbeat_or_release_a_key_even_with_its_owner_token() {
    let app = TestApp::spawn().await;
    let owner = app.claim(OP, "k1", charge(25)).await.owner_token();
    let before = app.lookup(OP, "k1").await.text;
    let b = tenant_b();
    let with_token = json!({"owner_token": owner});
    let completion = json!({"owner_token": owner, "outcome": outcome("ch_evil")});

    // B knows A's key name and (somehow) A's owner token.
    let complete = app
        .call_as(&b, OP, "k1", "complete", completion.clone())
        .await;
    let heartbeat = app
        .call_as(&b, OP, "k1", "heartbeat", with_token.clone())
        .await;
    let release = app
        .call_as(&b, OP, "k1", "release", with_token.clone())
        .await;

    // Each answer is exactly the one for a key that never existed.
    let never_complete = app.call_as(&b, OP, "nope", "complete", completion).await;
    let never_heartbeat = app
        .call_as(&b, OP, "nope", "heartbeat", with_token.clone())
        .await;
    let never_release = app.call_as(&b, OP, "nope", "release", with_token).await;
    for (theirs, never) in [
        (&complete, &never_complete),
        (&heartbeat, &never_heartbeat),
        (&release, &never_release),
    ] {
        theirs.assert(404, "not_found");
        assert_eq!(observable(theirs), observable(never));
    }
    // A's record is exactly as it was (not completed, lease not extended,
    // not released), and A's owner token still owns it.
    assert_eq!(app.lookup(OP, "k1").await.text, before);
    app.complete(OP, "k1", &owner, outcome("ch_a"))
        .await
        .assert(200, "completed");
    assert_eq!(
        app.claim(OP, "k1", charge(25)).await.json()["outcome"],
        outcome("ch_a")
    );
}

#[tokio::test]
async fn another_tenant_claiming_the_same_key_name_gets_its_own_fresh_key() {
    let app = TestApp::spawn().await;
    let a = app.claim(OP, "k1", charge(25)).await.json();
    let b = tenant_b();

    // A different request too: not key_reused, because it is not A's key.
    let theirs = app
        .call_as(&b, OP, "k1", "claim", json!({"request": charge(99)}))
        .await;

    theirs.assert(201, "claimed");
    let t = theirs.json();
    assert_eq!(t["attempt"], 1);
    assert_ne!(t["effect_id"], a["effect_id"]);
    assert_ne!(t["owner_token"], a["owner_token"]);
    let a_lookup = app.lookup(OP, "k1").await.json();
    let b_lookup = app.lookup_as(&b, OP, "k1").await.json();
    assert_eq!(a_lookup["attempt"], 1);
    assert_eq!(a_lookup["effect_id"], a["effect_id"]);
    assert_eq!(b_lookup["effect_id"], t["effect_id"]);
    assert_ne!(a_lookup["fingerprint"], b_lookup["fingerprint"]);
}

#[tokio::test]
async fn two_tenants_complete_the_same_key_name_and_each_replays_its_own_outcome() {
    let app = TestApp::spawn().await;
    let a_owner = app.claim(OP, "k1", charge(25)).await.owner_token();
    let b = tenant_b();
    let b_owner = app
        .call_as(&b, OP, "k1", "claim", json!({"request": charge(25)}))
        .await
        .owner_token();

    // A's token is useless on B's key and B's on A's.
    app.call_as(
        &b,
        OP,
        "k1",
        "complete",
        json!({"owner_token": a_owner, "outcome": outcome("ch_x")}),
    )
    .await
    .assert(409, "lease_lost");
    app.complete(OP, "k1", &b_owner, outcome("ch_x"))
        .await
        .assert(409, "lease_lost");
    let b_done = app
        .call_as(
            &b,
            OP,
            "k1",
            "complete",
            json!({"owner_token": b_owner, "outcome": outcome("ch_b")}),
        )
        .await;
    let a_done = app.complete(OP, "k1", &a_owner, outcome("ch_a")).await;

    b_done.assert(200, "completed");
    a_done.assert(200, "completed");
    let a_replay = app.claim(OP, "k1", charge(25)).await;
    let b_replay = app
        .call_as(&b, OP, "k1", "claim", json!({"request": charge(25)}))
        .await;
    a_replay.assert(200, "completed");
    b_replay.assert(200, "completed");
    assert_eq!(a_replay.json()["outcome"], outcome("ch_a"));
    assert_eq!(b_replay.json()["outcome"], outcome("ch_b"));
}

#[tokio::test]
async fn releasing_ones_own_key_leaves_the_other_tenants_key_alone() {
    let app = TestApp::spawn().await;
    let a_owner = app.claim(OP, "k1", charge(25)).await.owner_token();
    let b = tenant_b();
    let b_owner = app
        .call_as(&b, OP, "k1", "claim", json!({"request": charge(25)}))
        .await
        .owner_token();

    let released = app
        .call_as(&b, OP, "k1", "release", json!({"owner_token": b_owner}))
        .await;

    released.assert(200, "released");
    app.lookup_as(&b, OP, "k1").await.assert(404, "not_found");
    app.lookup(OP, "k1").await.assert(200, "in_progress");
    app.heartbeat(OP, "k1", &a_owner)
        .await
        .assert(200, "in_progress");
}

#[tokio::test]
async fn a_tenant_named_in_the_body_is_refused_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let owner = app.claim(OP, "k1", charge(25)).await.owner_token();
    let before = app.lookup(OP, "k1").await.text;
    let b = tenant_b();

    // B tries to claim and complete "as" A by naming A's tenant.
    let claim = app
        .call_as(
            &b,
            OP,
            "k1",
            "claim",
            json!({"request": charge(25), "tenant": app.tenant}),
        )
        .await;
    let complete = app
        .call_as(
            &b,
            OP,
            "k1",
            "complete",
            json!({"owner_token": owner, "outcome": outcome("ch_evil"), "tenant": app.tenant}),
        )
        .await;

    claim.assert(400, "invalid_body");
    complete.assert(400, "invalid_body");
    assert_eq!(app.lookup(OP, "k1").await.text, before);
    app.lookup_as(&b, OP, "k1").await.assert(404, "not_found");
}

#[tokio::test]
async fn there_is_no_route_that_takes_a_tenant_from_the_url() {
    let app = TestApp::spawn().await;
    app.claim(OP, "k1", charge(25)).await.assert(201, "claimed");
    let b = tenant_b();

    let url = format!("{}/v1/tenants/{}/keys/{OP}/k1", app.address, app.tenant);
    let response = app.client.get(url).bearer_auth(&b).send().await.unwrap();
    let answer = Answer::from(response).await;

    answer.assert(404, "no_route");
    assert!(!answer.text.contains("in_progress"), "{}", answer.text);
}
