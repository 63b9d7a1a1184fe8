//! Tokens for tests, signed with the secret every test server is given.

use std::time::Duration;

use idemkey_api::auth::{mint, Role, RoleSet};
use idemkey_api::domain::TenantId;

pub const TEST_KID: &str = "test-1";
pub const TEST_SECRET: &str = "test-secret-0123456789abcdef-0123456789";
pub const TEST_ISSUER: &str = "idemkey";
pub const TEST_AUDIENCE: &str = "idemkey";

pub fn token(tenant: &str, roles: &[Role]) -> String {
    let tenant = TenantId::parse(tenant).expect("valid tenant");
    let roles: RoleSet = roles.iter().copied().collect();
    mint(
        TEST_KID,
        TEST_SECRET.as_bytes(),
        TEST_ISSUER,
        TEST_AUDIENCE,
        &tenant,
        roles,
        Duration::from_secs(600),
    )
    .expect("mint")
}

/// A tenant name no other test uses.
pub fn fresh_tenant() -> String {
    format!("t{:012x}", rand::random::<u64>() & 0xffff_ffff_ffff)
}

/// The path of a file in `tests/fixtures/jwt/` (test-only keys, see the
/// README there).
pub fn jwt_fixture(name: &str) -> String {
    format!("{}/fixtures/jwt/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

/// Valid claims for `tenant` with `roles` (names, so tests can send unknown
/// ones), expiring in ten minutes; tests change or remove one thing.
pub fn claims_for(tenant: &str, roles: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "iss": TEST_ISSUER,
        "aud": TEST_AUDIENCE,
        "tenant": tenant,
        "roles": roles,
        "iat": unix_now(),
        "exp": unix_now() + 600,
    })
}

/// Signs `claims` with `alg` under header `kid`.
pub fn sign(
    alg: jsonwebtoken::Algorithm,
    kid: Option<&str>,
    key: &jsonwebtoken::EncodingKey,
    claims: &serde_json::Value,
) -> String {
    let mut header = jsonwebtoken::Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).expect("sign")
}

/// An HS256 token signed with `secret` under `kid`.
pub fn sign_hs256(kid: &str, secret: &[u8], claims: &serde_json::Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(secret);
    sign(jsonwebtoken::Algorithm::HS256, Some(kid), &key, claims)
}

/// An RS256 token signed with the fixture RSA private key (JWKS kid `rsa-1`).
pub fn sign_rs256(claims: &serde_json::Value) -> String {
    let pem = std::fs::read(jwt_fixture("rsa-private.pem")).expect("RSA fixture");
    let key = jsonwebtoken::EncodingKey::from_rsa_pem(&pem).expect("RSA key");
    sign(jsonwebtoken::Algorithm::RS256, Some("rsa-1"), &key, claims)
}

/// A token assembled by hand, for headers no well-behaved library would emit.
pub fn raw_token(
    header: &serde_json::Value,
    claims: &serde_json::Value,
    signature: &[u8],
) -> String {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;
    let part = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    format!(
        "{}.{}.{}",
        part(header.to_string().as_bytes()),
        part(claims.to_string().as_bytes()),
        part(signature)
    )
}
