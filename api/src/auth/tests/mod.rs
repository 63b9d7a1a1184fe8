//! Verification rules, one test per rule, against the fixture keys in
//! `tests/fixtures/jwt/` (test-only keys; see the README there). This file
//! holds the shared helpers; each submodule covers one group of rules (declared
//! at the end so that `fixture!` is in scope for them).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use super::*;
use crate::domain::TenantId;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/fixtures/jwt/",
            $name
        ))
    };
}

const JWKS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/jwt/jwks.json"
);
const SECRET_1: &[u8] = b"test-secret-one-0123456789abcdefghij";
const SECRET_2: &[u8] = b"test-secret-two-0123456789abcdefghij";

fn settings() -> AuthSettings {
    AuthSettings {
        issuer: "https://issuer.test".into(),
        audience: "idemkey".into(),
        hs256: vec![
            ("hs-1".into(), SECRET_1.to_vec()),
            ("hs-2".into(), SECRET_2.to_vec()),
        ],
        jwks: Some(JWKS.into()),
    }
}

fn verifier() -> Verifier {
    Verifier::new(&settings()).expect("fixture settings load")
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Valid claims for tenant `acme` with role `client`; tests change one thing.
fn claims() -> Value {
    json!({
        "iss": "https://issuer.test",
        "aud": "idemkey",
        "sub": "svc-checkout",
        "tenant": "acme",
        "roles": ["client"],
        "iat": now(),
        "exp": now() + 300,
    })
}

fn with(mut claims: Value, name: &str, value: Value) -> Value {
    claims[name] = value;
    claims
}

fn without(mut claims: Value, name: &str) -> Value {
    claims.as_object_mut().unwrap().remove(name);
    claims
}

fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).unwrap()
}

fn hs256(claims: &Value) -> String {
    sign(
        Algorithm::HS256,
        Some("hs-1"),
        &EncodingKey::from_secret(SECRET_1),
        claims,
    )
}

/// A token assembled by hand, for headers no well-behaved library would emit.
fn raw_token(header: &Value, claims: &Value, signature: &[u8]) -> String {
    let part = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
    format!(
        "{}.{}.{}",
        part(header.to_string().as_bytes()),
        part(claims.to_string().as_bytes()),
        part(signature)
    )
}

fn rsa_private() -> EncodingKey {
    EncodingKey::from_rsa_pem(fixture!("rsa-private.pem")).unwrap()
}

fn principal(tenant: &str, roles: &[Role]) -> Principal {
    Principal {
        tenant: TenantId::parse(tenant).unwrap(),
        roles: roles.iter().copied().collect(),
        subject: Some("svc-checkout".into()),
    }
}

mod claims;
mod keys_and_algorithms;
mod minting;
mod proptests;
