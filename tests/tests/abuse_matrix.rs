//! The abuse matrix: every route of the API, called the ways a careless or
//! hostile client would — no token, a forged, expired or foreign-signed
//! one, the wrong role, another tenant's token, a malformed or oversized
//! body — answers a problem document with the code the case calls for, and
//! afterwards every record of the tenant under attack is exactly as it was.
//! The dashboard's pages refuse visitors without a session and another
//! tenant's session alike, and a client that never finishes its request
//! holds nobody else up.

use std::time::Duration;

use idemkey_api::auth::Role;
use idemkey_api::routes::routes;
use idemkey_tests::app::Answer;
use idemkey_tests::bad_input::{assert_unchanged, completed_key, OP};
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::tokens::{claims_for, fresh_tenant, sign_hs256, token, unix_now, TEST_KID};
use idemkey_tests::{on_every_backend, TestApp};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

/// Routes anyone may call without a token.
const PUBLIC: [&str; 3] = ["/healthz", "/readyz", "/openapi.json"];

/// A route with its placeholders filled: the attacked tenant's key `k1`.
fn concrete(path: &str) -> String {
    path.replace("{operation}", OP)
        .replace("{key}", "k1")
        .replace("{step}", "charge")
        .replace("{webhook}", "wh_00000000000000000000")
}

fn method(name: &str) -> Method {
    Method::from_bytes(name.to_ascii_uppercase().as_bytes()).expect("a method")
}

/// Whether the route takes a JSON body.
fn has_body(method: &Method) -> bool {
    [Method::POST, Method::PUT].contains(method)
}

/// A body of the right shape for each route (the owner token is not the
/// owner's: these are all attempts by someone who is not the owner).
fn plausible_body(path: &str) -> Value {
    let owner = "o".repeat(43);
    if path.ends_with("/claim") {
        json!({"request": {"amount": 1}})
    } else if path.ends_with("/resolve") {
        json!({"release": true})
    } else if path.contains("/steps/") {
        json!({"owner_token": owner, "provider_ref": "p-1"})
    } else if path.ends_with("/complete") {
        json!({"owner_token": owner, "outcome": {"status_code": 200}})
    } else if path.ends_with("/webhooks") {
        json!({"url": "https://hooks.example.com/", "events": ["quarantined"]})
    } else if path.contains("/operation-classes/") {
        json!({"replay_window": "1s"})
    } else if path.ends_with("/quarantine") {
        json!({"owner_token": owner, "reason": "x"})
    } else {
        // release, heartbeat
        json!({ "owner_token": owner })
    }
}

async fn send(
    app: &TestApp,
    m: Method,
    path: &str,
    bearer: Option<&str>,
    body: Option<Vec<u8>>,
) -> Answer {
    let mut request = app.client.request(m, format!("{}{path}", app.address));
    if let Some(t) = bearer {
        request = request.bearer_auth(t);
    }
    if let Some(b) = body {
        request = request.header("content-type", "application/json").body(b);
    }
    Answer::from(request.send().await.expect("request")).await
}

#[track_caller]
fn assert_problem(answer: &Answer, status: u16, code: &str, case: &str) {
    assert_eq!(answer.status, status, "{case}: {}", answer.text);
    assert!(
        answer.content_type.starts_with("application/problem+json"),
        "{case}: {}",
        answer.content_type
    );
    assert_eq!(answer.json()["code"], code, "{case}: {}", answer.text);
}

/// Everything the attacked tenant holds, as its own admin reads it.
async fn snapshot(app: &TestApp) -> (String, String, String) {
    let admin = app.token_with(&[Role::Admin]);
    let class = send(
        app,
        Method::GET,
        &format!("/v1/operation-classes/{OP}"),
        Some(&admin),
        None,
    )
    .await;
    let list = send(app, Method::GET, "/v1/keys?limit=500", Some(&admin), None).await;
    (app.lookup(OP, "k1").await.text, class.text, list.text)
}

async fn every_route_refuses_who_may_not_call_it_and_changes_nothing(app: TestApp) {
    let before = completed_key(&app).await;
    app.put_class(OP, json!({"replay_window": "2h"})).await;
    let stored = snapshot(&app).await;
    let mut claims = claims_for(&app.tenant, &["client", "viewer", "admin"]);
    claims["exp"] = json!(unix_now() - 3600);
    let expired = sign_hs256(
        TEST_KID,
        idemkey_tests::tokens::TEST_SECRET.as_bytes(),
        &claims,
    );
    let forged = sign_hs256(
        TEST_KID,
        b"not-the-server-secret-0123456789abcdef",
        &claims_for(&app.tenant, &["client", "viewer", "admin"]),
    );
    let scraper = app.token_with(&[Role::Metrics]);
    let mut cases = 0;

    let all = routes();
    for route in all.iter().filter(|r| !PUBLIC.contains(&r.path.as_str())) {
        let m = method(route.method);
        let path = concrete(&route.path);
        let body = has_body(&m).then(|| plausible_body(&path).to_string().into_bytes());
        let case = |who: &str| format!("{} {path} {who}", route.method);
        for (who, bearer) in [
            ("without a token", None),
            ("with garbage", Some("not.a.token")),
            ("expired", Some(expired.as_str())),
            ("signed with another secret", Some(forged.as_str())),
        ] {
            let answer = send(&app, m.clone(), &path, bearer, body.clone()).await;
            assert_problem(&answer, 401, "unauthorized", &case(who));
            cases += 1;
        }
        let scraping = path == "/metrics";
        let answer = send(&app, m.clone(), &path, Some(&scraper), body.clone()).await;
        if scraping {
            assert_eq!(answer.status, 200, "{}", case("as the metrics role"));
        } else {
            assert_problem(
                &answer,
                403,
                "forbidden",
                &case("with the metrics role only"),
            );
        }
        cases += 1;
    }

    println!("{cases} refused calls over {} routes", all.len());
    assert_unchanged(&app, &before).await;
    assert_eq!(
        snapshot(&app).await,
        stored,
        "nothing of the tenant changed"
    );
}

async fn another_tenant_reaches_none_of_the_keys_or_classes(app: TestApp) {
    let before = completed_key(&app).await;
    app.put_class(OP, json!({"replay_window": "2h"})).await;
    let stored = snapshot(&app).await;
    let stranger = token(&fresh_tenant(), &[Role::Client, Role::Viewer, Role::Admin]);
    let mut cases = 0;

    // The claim last: it gives the stranger a `k1` of its own, which the
    // other calls would then find.
    let all_routes = routes();
    let mut routes: Vec<_> = all_routes
        .iter()
        .filter(|r| r.path.starts_with("/v1/"))
        .collect();
    routes.sort_by_key(|r| r.path.ends_with("/claim"));
    for route in routes {
        let m = method(route.method);
        let path = concrete(&route.path);
        let body = has_body(&m).then(|| plausible_body(&path).to_string().into_bytes());
        let answer = send(&app, m.clone(), &path, Some(&stranger), body).await;
        let case = format!("{} {path} as another tenant", route.method);
        match (route.path.as_str(), route.method) {
            // The stranger's own key and class: allowed, and theirs alone.
            (p, "post") if p.ends_with("/claim") => assert_eq!(answer.status, 201, "{case}"),
            // The tenant's webhook endpoint: as unknown as one never made.
            (p, _) if p.contains("{webhook}") => {
                assert_problem(&answer, 404, "webhook_not_found", &case)
            }
            (p, _) if p.starts_with("/v1/operation-classes/") => {
                assert!(answer.status < 300, "{case}: {}", answer.text)
            }
            ("/v1/keys", _) => {
                assert_eq!(answer.status, 200, "{case}");
                assert!(!answer.text.contains("\"k1\""), "{case}: {}", answer.text);
            }
            // Every call on the tenant's key: the same 404 as a key that
            // never existed.
            _ => assert_problem(&answer, 404, "not_found", &case),
        }
        cases += 1;
    }

    println!("{cases} calls by another tenant");
    assert_unchanged(&app, &before).await;
    assert_eq!(
        snapshot(&app).await,
        stored,
        "nothing of the tenant changed"
    );
}

async fn malformed_and_oversized_bodies_are_refused_on_every_route(app: TestApp) {
    let before = completed_key(&app).await;
    let stored = snapshot(&app).await;
    let all = app.token_with(&[Role::Client, Role::Viewer, Role::Admin]);
    let huge = vec![b' '; 10 * 1024 * 1024];
    let mut cases = 0;

    for route in routes().iter().filter(|r| has_body(&method(r.method))) {
        let m = method(route.method);
        let path = concrete(&route.path);
        let case = |what: &str| format!("{} {path} {what}", route.method);
        for (what, body, code) in [
            ("not JSON", b"{not json".to_vec(), "invalid_json"),
            ("a JSON array", b"[1, 2]".to_vec(), "invalid_body"),
            ("empty", Vec::new(), "invalid_json"),
        ] {
            let answer = send(&app, m.clone(), &path, Some(&all), Some(body)).await;
            assert_problem(&answer, 400, code, &case(what));
            cases += 1;
        }
        let answer = send(&app, m.clone(), &path, Some(&all), Some(huge.clone())).await;
        assert_problem(&answer, 413, "payload_too_large", &case("of 10 MiB"));
        cases += 1;
    }

    println!("{cases} bad bodies refused");
    assert_unchanged(&app, &before).await;
    assert_eq!(
        snapshot(&app).await,
        stored,
        "nothing of the tenant changed"
    );
}

async fn out_of_range_parameters_are_bad_requests(app: TestApp) {
    let before = completed_key(&app).await;
    let all = app.token_with(&[Role::Client, Role::Viewer, Role::Admin]);

    for query in [
        "limit=0",
        "limit=100000",
        "older_than=99999999999d",
        "state=everything",
        "cursor=AAAA",
        "operation=Not%20Valid",
        "unknown=1",
    ] {
        let answer = send(
            &app,
            Method::GET,
            &format!("/v1/keys?{query}"),
            Some(&all),
            None,
        )
        .await;
        assert_problem(&answer, 400, "invalid_query", query);
    }
    let lease = send(
        &app,
        Method::POST,
        &format!("/v1/keys/{OP}/k3/claim"),
        Some(&all),
        Some(
            json!({"request": {}, "lease_ms": 1})
                .to_string()
                .into_bytes(),
        ),
    )
    .await;
    assert_problem(&lease, 400, "invalid_lease", "lease_ms 1");

    assert_unchanged(&app, &before).await;
}

async fn the_dashboard_refuses_visitors_without_a_session_or_of_another_tenant(app: TestApp) {
    let before = completed_key(&app).await;
    let pages = [
        "/dashboard".to_owned(),
        "/dashboard/keys".to_owned(),
        format!("/dashboard/keys/{OP}/k1"),
        "/dashboard/classes".to_owned(),
        format!("/dashboard/classes/{OP}"),
        "/dashboard/rejections".to_owned(),
        "/dashboard/storage".to_owned(),
    ];
    let nobody = Visitor::new(&app);
    for page in &pages {
        let answer = nobody.get(page).await;
        assert_eq!(answer.status, 303, "{page} without a session");
        assert_eq!(answer.location(), Some("/dashboard/sign-in"), "{page}");
    }
    let stranger = token(&fresh_tenant(), &[Role::Viewer, Role::Admin]);
    let visitor = Visitor::signed_in(&app, &stranger).await;

    let key = visitor.get(&format!("/dashboard/keys/{OP}/k1")).await;
    let csrf = visitor.get("/dashboard/keys").await.csrf();
    let resolve = visitor
        .post(
            &format!("/dashboard/keys/{OP}/k1/resolve"),
            &[
                ("csrf", csrf.as_str()),
                ("action", "release"),
                ("reason", "mine now"),
            ],
        )
        .await;

    assert_eq!(key.status, 404);
    assert_eq!(resolve.status, 404, "{}", resolve.text);
    assert_unchanged(&app, &before).await;
}

async fn a_client_that_never_finishes_its_request_holds_nobody_up(app: TestApp) {
    let address = app.address.trim_start_matches("http://").to_owned();
    let mut stalled = Vec::new();
    for i in 0..50 {
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        let head = format!(
            "POST /v1/keys/{OP}/slow-{i}/claim HTTP/1.1\r\nHost: {address}\r\n\
             Authorization: Bearer {}\r\nContent-Type: application/json\r\n\
             Content-Length: 100000\r\n\r\n{{\"request\": ",
            app.token
        );
        stream.write_all(head.as_bytes()).await.expect("write");
        stalled.push(stream);
    }

    // Everyone else is answered while fifty requests hang half-sent.
    for i in 0..20 {
        let key = format!("meanwhile-{i}");
        let answer = tokio::time::timeout(
            Duration::from_secs(5),
            app.claim(OP, &key, json!({"amount": i})),
        )
        .await
        .expect("answered while others stall");
        answer.assert(201, "claimed");
    }

    drop(stalled);
    for i in 0..50 {
        let lookup = app.lookup(OP, &format!("slow-{i}")).await;
        assert_eq!(lookup.status, 404, "a half-sent claim claimed nothing");
    }
}

on_every_backend!(
    every_route_refuses_who_may_not_call_it_and_changes_nothing,
    another_tenant_reaches_none_of_the_keys_or_classes,
    malformed_and_oversized_bodies_are_refused_on_every_route,
    out_of_range_parameters_are_bad_requests,
    the_dashboard_refuses_visitors_without_a_session_or_of_another_tenant,
    a_client_that_never_finishes_its_request_holds_nobody_up,
);
