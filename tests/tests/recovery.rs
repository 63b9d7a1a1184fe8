//! Ambiguous outcomes: steps of multi-step effects, quarantine, resolve, the
//! audit trail and stuck-key listing — on every backend.

use idemkey_api::auth::Role;
use idemkey_tests::tokens::{claims_for, sign_hs256, TEST_KID, TEST_SECRET};
use idemkey_tests::TestApp;
use serde_json::{json, Value};

const OP: &str = "env.provision";

fn admin_named(app: &TestApp, sub: &str) -> String {
    let mut claims = claims_for(&app.tenant, &["admin"]);
    claims["sub"] = json!(sub);
    sign_hs256(TEST_KID, TEST_SECRET.as_bytes(), &claims)
}

fn events(record: &Value) -> Vec<String> {
    record["history"]
        .as_array()
        .expect("history")
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect()
}

async fn step(
    app: &TestApp,
    key: &str,
    name: &str,
    token: &str,
    provider_ref: &str,
) -> idemkey_tests::app::Answer {
    let url = format!("{}/steps/{name}", app.key_url(OP, key));
    let body = json!({"owner_token": token, "provider_ref": provider_ref});
    let response = app
        .client
        .put(url)
        .bearer_auth(&app.token)
        .json(&body)
        .send()
        .await
        .unwrap();
    idemkey_tests::app::Answer::from(response).await
}

async fn steps_are_recorded_once_with_their_own_effect_ids(app: TestApp) {
    let claimed = app.claim(OP, "e1", json!({"env": "e1"})).await;
    let token = claimed.owner_token();

    let first = step(&app, "e1", "database", &token, "db-123").await;
    let again = step(&app, "e1", "database", &token, "db-123").await;
    let conflict = step(&app, "e1", "database", &token, "db-999").await;
    let stale = step(&app, "e1", "dns", "not-the-owner", "dns-1").await;

    first.assert(200, "in_progress");
    again.assert(200, "in_progress");
    conflict.assert(409, "step_conflict");
    stale.assert(409, "lease_lost");
    let steps = &first.json()["steps"];
    assert_eq!(steps["database"]["provider_ref"], "db-123");
    let step_effect = steps["database"]["effect_id"].as_str().unwrap();
    let op_effect = claimed.json()["effect_id"].as_str().unwrap().to_owned();
    assert_eq!(
        step_effect,
        format!("{op_effect}.database"),
        "computable before the step runs"
    );
    assert_ne!(step_effect, claimed.json()["effect_id"].as_str().unwrap());
    assert_eq!(
        again.json()["steps"],
        *steps,
        "a repeated step changes nothing"
    );
    assert_eq!(events(&again.json()), ["claimed", "step"]);
    step(&app, "e1", "Bad Name", &token, "x")
        .await
        .assert(400, "invalid_step");
}

/// The worked example of docs/protocol.md: a two-step provisioning whose
/// first owner dies after step one.
async fn a_new_owner_resumes_after_the_last_confirmed_step(app: TestApp) {
    let mut provider_calls: Vec<(String, String)> = Vec::new(); // (step, effect id)
    let request = json!({"env": "staging-7"});

    // Owner A: claims with a short lease, creates the database, dies.
    let a = app
        .call(
            OP,
            "env-7",
            "claim",
            json!({"request": request, "lease_ms": 1_000}),
        )
        .await;
    a.assert(201, "claimed");
    let a_token = a.owner_token();
    let db = step(&app, "env-7", "database", &a_token, "db-1").await;
    provider_calls.push((
        "database".into(),
        db.json()["steps"]["database"]["effect_id"]
            .as_str()
            .unwrap()
            .into(),
    ));

    // Owner B: a retry that waits out A's lease and takes over.
    let b = app
        .call(
            OP,
            "env-7",
            "claim",
            json!({"request": request, "wait_ms": 10_000}),
        )
        .await;
    b.assert(200, "recovering");
    let b_json = b.json();
    let done: Vec<&String> = b_json["steps"].as_object().unwrap().keys().collect();
    assert_eq!(done, ["database"], "B sees step one done");
    for name in ["database", "dns"] {
        if b_json["steps"].get(name).is_none() {
            let r = step(&app, "env-7", name, &b.owner_token(), "dns-1").await;
            provider_calls.push((
                name.into(),
                r.json()["steps"][name]["effect_id"]
                    .as_str()
                    .unwrap()
                    .into(),
            ));
        }
    }
    let outcome = json!({"status_code": 201, "body": {"database": "db-1", "dns": "dns-1"}});
    app.complete(OP, "env-7", &b.owner_token(), outcome.clone())
        .await
        .assert(200, "completed");

    // Each step ran once; A is fenced off; the history tells the story.
    assert_eq!(
        provider_calls
            .iter()
            .filter(|(s, _)| s == "database")
            .count(),
        1
    );
    assert_eq!(provider_calls.iter().filter(|(s, _)| s == "dns").count(), 1);
    step(&app, "env-7", "dns", &a_token, "dns-2")
        .await
        .assert(409, "lease_lost");
    let record = app.lookup(OP, "env-7").await.json();
    assert_eq!(
        events(&record),
        ["claimed", "step", "taken_over", "step", "completed"]
    );
    assert_eq!(record["history"][2]["attempt"], 2);
    assert_eq!(
        app.claim(OP, "env-7", request).await.json()["outcome"],
        outcome
    );
}

async fn a_quarantined_key_is_refused_until_an_admin_resolves_it(app: TestApp) {
    let token = app
        .claim(OP, "q1", json!({"charge": 1}))
        .await
        .owner_token();

    let quarantined = app
        .call(
            OP,
            "q1",
            "quarantine",
            json!({"owner_token": token, "reason": "provider timed out"}),
        )
        .await;

    quarantined.assert(200, "quarantined");
    assert_eq!(
        quarantined.json()["quarantine_reason"],
        "provider timed out"
    );
    app.claim(OP, "q1", json!({"charge": 1}))
        .await
        .assert(409, "quarantined");
    app.complete(OP, "q1", &token, json!({"status_code": 200}))
        .await
        .assert(409, "quarantined");
    // A viewer may not resolve; a client without the owner token may not either.
    let viewer = app.token_with(&[Role::Viewer]);
    let outcome = json!({"status_code": 201, "body": {"charge": "ch_found_at_provider"}});
    app.call_as(&viewer, OP, "q1", "resolve", json!({"outcome": outcome}))
        .await
        .assert(403, "forbidden");
    app.call(OP, "q1", "resolve", json!({"outcome": outcome}))
        .await
        .assert(400, "invalid_body");
    app.call(
        OP,
        "q1",
        "resolve",
        json!({"owner_token": "nope", "outcome": outcome}),
    )
    .await
    .assert(409, "lease_lost");

    let admin = admin_named(&app, "alice");
    let resolved = app
        .call_as(&admin, OP, "q1", "resolve", json!({"outcome": outcome}))
        .await;

    resolved.assert(200, "completed");
    let replay = app.claim(OP, "q1", json!({"charge": 1})).await;
    replay.assert(200, "completed");
    assert_eq!(replay.json()["outcome"], outcome);
    let record = app.lookup(OP, "q1").await.json();
    assert_eq!(events(&record), ["claimed", "quarantined", "resolved"]);
    assert_eq!(record["history"][2]["by"], "admin:alice");
    assert_eq!(record["history"][2]["resolution"], "completed");
    // Resolving again with the same outcome is harmless; another is refused.
    app.call_as(&admin, OP, "q1", "resolve", json!({"outcome": outcome}))
        .await
        .assert(200, "completed");
    app.call_as(
        &admin,
        OP,
        "q1",
        "resolve",
        json!({"outcome": {"status_code": 500}}),
    )
    .await
    .assert(409, "already_completed");
}

async fn the_owner_may_release_its_quarantined_key_and_the_release_is_kept(app: TestApp) {
    let token = app
        .claim(OP, "q2", json!({"charge": 2}))
        .await
        .owner_token();
    app.call(
        OP,
        "q2",
        "quarantine",
        json!({"owner_token": token, "reason": "unsure"}),
    )
    .await;

    let released = app
        .call(
            OP,
            "q2",
            "resolve",
            json!({"owner_token": token, "release": true, "reason": "provider has no record"}),
        )
        .await;

    released.assert(200, "released");
    app.lookup(OP, "q2").await.assert(404, "not_found");
    app.claim(OP, "q2", json!({"charge": 2}))
        .await
        .assert(201, "claimed");
    app.sql("update key_release set reason = reason where key = 'q2' and actor = 'owner' and reason = 'provider has no record'")
        .await;
}

async fn only_stuck_or_quarantined_keys_can_be_resolved(app: TestApp) {
    let admin = app.token_with(&[Role::Admin]);
    app.claim(OP, "r1", json!({"x": 1}))
        .await
        .assert(201, "claimed");

    let live = app
        .call_as(&admin, OP, "r1", "resolve", json!({"release": true}))
        .await;
    app.expire_lease("r1").await;
    let stuck = app
        .call_as(&admin, OP, "r1", "resolve", json!({"release": true}))
        .await;
    let unknown = app
        .call_as(&admin, OP, "r9", "resolve", json!({"release": true}))
        .await;

    live.assert(409, "not_quarantined");
    stuck.assert(200, "released");
    unknown.assert(404, "not_found");
    app.call_as(
        &admin,
        OP,
        "r1",
        "resolve",
        json!({"release": true, "outcome": {"status_code": 200}}),
    )
    .await
    .assert(400, "invalid_body");
}

async fn listing_finds_stuck_keys_and_pages_stably_while_keys_change(app: TestApp) {
    for i in 0..7 {
        app.claim(OP, &format!("l{i}"), json!({"i": i}))
            .await
            .assert(201, "claimed");
    }
    app.expire_lease("l1").await;
    app.expire_lease("l4").await;
    let list = |query: String| {
        let app = &app;
        async move {
            let url = format!("{}/v1/keys?{query}", app.address);
            let r = app
                .client
                .get(url)
                .bearer_auth(&app.token)
                .send()
                .await
                .unwrap();
            idemkey_tests::app::Answer::from(r).await
        }
    };
    let keys = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["key"].as_str().unwrap().to_owned())
            .collect()
    };

    let stuck = list("state=lease_expired".into()).await.json();
    let mut stuck_keys = keys(&stuck);
    stuck_keys.sort();
    assert_eq!(stuck_keys, ["l1", "l4"]);

    // Page through all seven, three at a time, while new keys arrive.
    let first = list("limit=3".into()).await.json();
    assert_eq!(keys(&first), ["l6", "l5", "l4"], "newest first");
    app.claim(OP, "late-1", json!({}))
        .await
        .assert(201, "claimed");
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = list(format!("limit=3&cursor={cursor}")).await.json();
    app.claim(OP, "late-2", json!({}))
        .await
        .assert(201, "claimed");
    let cursor = second["next_cursor"].as_str().unwrap().to_owned();
    let third = list(format!("limit=3&cursor={cursor}")).await.json();
    assert_eq!(keys(&second), ["l3", "l2", "l1"]);
    assert_eq!(keys(&third), ["l0"]);
    assert!(third["next_cursor"].is_null());

    // Another tenant sees none of it.
    let other = idemkey_tests::tokens::token("someone-else", &[Role::Viewer]);
    let url = format!("{}/v1/keys", app.address);
    let theirs: Value = app
        .client
        .get(url)
        .bearer_auth(other)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["items"], json!([]));
    list("state=stuck".into())
        .await
        .assert(400, "invalid_query");
}

idemkey_tests::on_every_backend!(
    steps_are_recorded_once_with_their_own_effect_ids,
    a_new_owner_resumes_after_the_last_confirmed_step,
    a_quarantined_key_is_refused_until_an_admin_resolves_it,
    the_owner_may_release_its_quarantined_key_and_the_release_is_kept,
    only_stuck_or_quarantined_keys_can_be_resolved,
    listing_finds_stuck_keys_and_pages_stably_while_keys_change,
);
