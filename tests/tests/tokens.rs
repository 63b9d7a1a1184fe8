//! Bearer tokens over real HTTP: every refused token is the same opaque 401,
//! the JWKS keys and rotated HS256 secrets are accepted, and roles decide
//! what a valid token may do (SPEC §4 roles, §5).

use idemkey_api::auth::Role;
use idemkey_tests::app::Answer;
use idemkey_tests::tokens::{
    claims_for, jwt_fixture, raw_token, sign, sign_hs256, sign_rs256, token, unix_now,
};
use idemkey_tests::{TestApp, TEST_KID, TEST_SECRET};
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{json, Value};

const OP: &str = "charges.create";

fn charge() -> Value {
    json!({"amount": 25, "currency": "EUR"})
}

/// A server that also trusts the fixture JWKS (kids `rsa-1`, `ec-1`, `ed-1`).
async fn spawn_with_jwks() -> TestApp {
    TestApp::spawn_with(|vars| {
        vars.insert("IDEMKEY_JWT_JWKS_FILE".into(), jwt_fixture("jwks.json"));
    })
    .await
}

/// Claims for the app's own tenant as a client.
fn client_claims(app: &TestApp) -> Value {
    claims_for(&app.tenant, &["client", "viewer"])
}

fn without(mut claims: Value, name: &str) -> Value {
    claims.as_object_mut().unwrap().remove(name);
    claims
}

async fn claim_with(app: &TestApp, token: &str, key: &str) -> Answer {
    app.call_as(token, OP, key, "claim", json!({ "request": charge() }))
        .await
}

/// The answer is the opaque 401 and the claim it tried created nothing.
async fn assert_refused(app: &TestApp, answer: &Answer, key: &str) {
    answer.assert(401, "unauthorized");
    assert_eq!(
        answer.www_authenticate.as_deref(),
        Some("Bearer"),
        "a 401 names the scheme"
    );
    assert!(
        answer.json().get("detail").is_none(),
        "the reason is for logs, not for the caller: {}",
        answer.text
    );
    app.lookup(OP, key).await.assert(404, "not_found");
}

#[tokio::test]
async fn a_valid_rs256_token_from_the_jwks_file_can_claim() {
    let app = spawn_with_jwks().await;
    let token = sign_rs256(&client_claims(&app));

    let answer = claim_with(&app, &token, "k1").await;

    answer.assert(201, "claimed");
    // The same tenant, whichever key signed its token.
    app.lookup(OP, "k1").await.assert(200, "in_progress");
}

#[tokio::test]
async fn es256_and_eddsa_tokens_from_the_jwks_file_can_claim() {
    let app = spawn_with_jwks().await;
    let ec =
        EncodingKey::from_ec_pem(&std::fs::read(jwt_fixture("ec-private.pem")).unwrap()).unwrap();
    let ed =
        EncodingKey::from_ed_pem(&std::fs::read(jwt_fixture("ed-private.pem")).unwrap()).unwrap();
    let es256 = sign(Algorithm::ES256, Some("ec-1"), &ec, &client_claims(&app));
    let eddsa = sign(Algorithm::EdDSA, Some("ed-1"), &ed, &client_claims(&app));

    let by_ec = claim_with(&app, &es256, "k-ec").await;
    let by_ed = claim_with(&app, &eddsa, "k-ed").await;

    by_ec.assert(201, "claimed");
    by_ed.assert(201, "claimed");
}

#[tokio::test]
async fn an_expired_token_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let mut claims = client_claims(&app);
    // Beyond the 30 s leeway.
    claims["iat"] = json!(unix_now() - 600);
    claims["exp"] = json!(unix_now() - 120);

    let answer = claim_with(&app, &sign_rs256(&claims), "k1").await;

    assert_refused(&app, &answer, "k1").await;
}

#[tokio::test]
async fn a_token_for_another_audience_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let mut claims = client_claims(&app);
    claims["aud"] = json!("some-other-service");

    let answer = claim_with(&app, &sign_rs256(&claims), "k1").await;

    assert_refused(&app, &answer, "k1").await;
}

#[tokio::test]
async fn a_token_from_another_issuer_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let mut claims = client_claims(&app);
    claims["iss"] = json!("https://evil.example");

    let answer = claim_with(&app, &sign_rs256(&claims), "k1").await;

    assert_refused(&app, &answer, "k1").await;
}

#[tokio::test]
async fn an_unsigned_alg_none_token_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let header = json!({"alg": "none", "typ": "JWT", "kid": "rsa-1"});
    let unsigned = raw_token(&header, &client_claims(&app), b"");
    let header_hs = json!({"alg": "none", "typ": "JWT", "kid": TEST_KID});
    let unsigned_hs = raw_token(&header_hs, &client_claims(&app), b"");

    let answer = claim_with(&app, &unsigned, "k1").await;
    let answer_hs = claim_with(&app, &unsigned_hs, "k1").await;

    assert_refused(&app, &answer, "k1").await;
    assert_refused(&app, &answer_hs, "k1").await;
}

#[tokio::test]
async fn an_hs256_token_signed_with_the_rsa_public_key_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let public_pem = std::fs::read(jwt_fixture("rsa-public.pem")).unwrap();
    let confused = sign_hs256("rsa-1", &public_pem, &client_claims(&app));

    let answer = claim_with(&app, &confused, "k1").await;

    assert_refused(&app, &answer, "k1").await;
}

#[tokio::test]
async fn a_token_with_an_unknown_kid_is_unauthorized_even_if_its_signature_is_good() {
    let app = spawn_with_jwks().await;
    // Signed with the configured secret, but under a kid nobody configured.
    let unknown = sign_hs256("test-2", TEST_SECRET.as_bytes(), &client_claims(&app));
    let no_kid = sign(
        Algorithm::HS256,
        None,
        &EncodingKey::from_secret(TEST_SECRET.as_bytes()),
        &client_claims(&app),
    );

    let answer = claim_with(&app, &unknown, "k1").await;
    let answer_no_kid = claim_with(&app, &no_kid, "k1").await;

    assert_refused(&app, &answer, "k1").await;
    assert_refused(&app, &answer_no_kid, "k1").await;
}

#[tokio::test]
async fn a_token_without_a_tenant_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let tenantless = without(client_claims(&app), "tenant");

    let answer = claim_with(&app, &sign_rs256(&tenantless), "k1").await;

    assert_refused(&app, &answer, "k1").await;
}

#[tokio::test]
async fn a_token_without_exp_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let endless = without(client_claims(&app), "exp");

    let answer = claim_with(&app, &sign_rs256(&endless), "k1").await;

    assert_refused(&app, &answer, "k1").await;
}

#[tokio::test]
async fn a_request_without_an_authorization_header_is_unauthorized() {
    let app = spawn_with_jwks().await;
    app.claim(OP, "k1", charge()).await.assert(201, "claimed");

    let answer = app.lookup_with_authorization(None, OP, "k1").await;

    answer.assert(401, "unauthorized");
    assert_eq!(answer.www_authenticate.as_deref(), Some("Bearer"));
    assert!(!answer.text.contains("in_progress"), "{}", answer.text);
}

#[tokio::test]
async fn a_valid_token_under_another_scheme_is_unauthorized() {
    let app = spawn_with_jwks().await;
    app.claim(OP, "k1", charge()).await.assert(201, "claimed");
    let valid = sign_rs256(&client_claims(&app));

    let schemes = [
        format!("Token {valid}"),
        format!("Basic {valid}"),
        valid.clone(),
        "Bearer".to_owned(),
        "Bearer ".to_owned(),
    ];
    for authorization in &schemes {
        let answer = app
            .lookup_with_authorization(Some(authorization), OP, "k1")
            .await;

        answer.assert(401, "unauthorized");
        assert_eq!(answer.www_authenticate.as_deref(), Some("Bearer"));
    }
    // The same token with the right scheme is fine (so the refusals above
    // were about the scheme).
    let bearer = format!("Bearer {valid}");
    app.lookup_with_authorization(Some(&bearer), OP, "k1")
        .await
        .assert(200, "in_progress");
}

#[tokio::test]
async fn every_refused_token_gets_the_same_answer() {
    let app = spawn_with_jwks().await;
    let mut expired = client_claims(&app);
    expired["exp"] = json!(unix_now() - 120);
    let tokens = [
        sign_rs256(&expired),
        sign_hs256("nope", TEST_SECRET.as_bytes(), &client_claims(&app)),
        "not.a.token".to_owned(),
    ];

    let mut bodies = Vec::new();
    for token in &tokens {
        bodies.push(claim_with(&app, token, "k1").await.body_but_request_id());
    }
    let missing = app
        .lookup_with_authorization(None, OP, "k1")
        .await
        .body_but_request_id();

    // The same body but for each call's own request id.
    for body in &bodies {
        assert_eq!(body, &missing, "one opaque 401 for every reason");
    }
}

#[tokio::test]
async fn a_viewer_cannot_claim_or_act_as_owner_but_can_look_up() {
    let app = spawn_with_jwks().await;
    let owner = app.claim(OP, "k1", charge()).await.owner_token();
    let before = app.lookup(OP, "k1").await.text;
    let viewer = app.token_with(&[Role::Viewer]);

    let claim = claim_with(&app, &viewer, "k2").await;
    let complete = app
        .call_as(
            &viewer,
            OP,
            "k1",
            "complete",
            json!({"owner_token": owner, "outcome": {"status_code": 201}}),
        )
        .await;
    let heartbeat = app
        .call_as(
            &viewer,
            OP,
            "k1",
            "heartbeat",
            json!({"owner_token": owner}),
        )
        .await;
    let release = app
        .call_as(&viewer, OP, "k1", "release", json!({"owner_token": owner}))
        .await;
    let lookup = app.lookup_as(&viewer, OP, "k1").await;

    claim.assert(403, "forbidden");
    complete.assert(403, "forbidden");
    heartbeat.assert(403, "forbidden");
    release.assert(403, "forbidden");
    assert!(
        claim.www_authenticate.is_none(),
        "403 is not an authentication challenge"
    );
    lookup.assert(200, "in_progress");
    assert_eq!(lookup.text, before, "the viewer's calls changed nothing");
    app.lookup(OP, "k2").await.assert(404, "not_found");
}

#[tokio::test]
async fn a_client_only_token_can_claim_and_look_up() {
    let app = spawn_with_jwks().await;
    let client = sign_rs256(&claims_for(&app.tenant, &["client"]));

    let claim = claim_with(&app, &client, "k1").await;
    let lookup = app.lookup_as(&client, OP, "k1").await;

    claim.assert(201, "claimed");
    lookup.assert(200, "in_progress");
}

#[tokio::test]
async fn a_token_without_roles_may_do_nothing() {
    let app = spawn_with_jwks().await;
    app.claim(OP, "k1", charge()).await.assert(201, "claimed");
    let roleless = sign_rs256(&without(client_claims(&app), "roles"));

    let claim = claim_with(&app, &roleless, "k2").await;
    let lookup = app.lookup_as(&roleless, OP, "k1").await;

    claim.assert(403, "forbidden");
    lookup.assert(403, "forbidden");
}

#[tokio::test]
async fn a_token_with_an_unknown_role_is_unauthorized() {
    let app = spawn_with_jwks().await;
    let typo = sign_rs256(&claims_for(&app.tenant, &["client", "superuser"]));

    let answer = claim_with(&app, &typo, "k1").await;

    assert_refused(&app, &answer, "k1").await;
}

#[tokio::test]
async fn tokens_signed_with_either_rotated_secret_work() {
    const OLD: &str = "old-secret-0123456789abcdef-0123456789";
    const NEW: &str = "new-secret-0123456789abcdef-0123456789";
    let app = TestApp::spawn_with(|vars| {
        vars.insert("IDEMKEY_JWT_SECRETS".into(), format!("old={OLD},new={NEW}"));
    })
    .await;
    let claims = client_claims(&app);
    let old = sign_hs256("old", OLD.as_bytes(), &claims);
    let new = sign_hs256("new", NEW.as_bytes(), &claims);
    let crossed = sign_hs256("new", OLD.as_bytes(), &claims);

    let by_old = claim_with(&app, &old, "k1").await;
    let by_new = app.lookup_as(&new, OP, "k1").await;
    let by_crossed = claim_with(&app, &crossed, "k2").await;
    // The default test secret is no longer configured.
    let by_retired = claim_with(&app, &token(&app.tenant, &[Role::Client]), "k3").await;

    by_old.assert(201, "claimed");
    by_new.assert(200, "in_progress");
    by_crossed.assert(401, "unauthorized");
    by_retired.assert(401, "unauthorized");
    for refused in ["k2", "k3"] {
        app.lookup_as(&new, OP, refused)
            .await
            .assert(404, "not_found");
    }
}
