//! Key selection and signatures: kid lookup, the per-key algorithm, `none`,
//! HS/RS confusion, every JWKS key type, tampering and garbage.

use super::*;

#[test]
fn a_valid_hs256_token_yields_its_tenant_and_roles() {
    let token = hs256(&with(claims(), "roles", json!(["client", "viewer"])));
    assert_eq!(
        verifier().verify(&token),
        Ok(principal("acme", &[Role::Client, Role::Viewer]))
    );
}

#[test]
fn a_token_signed_with_any_configured_hs256_kid_verifies() {
    let token = sign(
        Algorithm::HS256,
        Some("hs-2"),
        &EncodingKey::from_secret(SECRET_2),
        &claims(),
    );
    assert_eq!(
        verifier().verify(&token),
        Ok(principal("acme", &[Role::Client]))
    );
}

#[test]
fn a_secret_under_another_kid_does_not_verify() {
    let token = sign(
        Algorithm::HS256,
        Some("hs-1"),
        &EncodingKey::from_secret(SECRET_2),
        &claims(),
    );
    assert_eq!(verifier().verify(&token), Err(AuthError::InvalidSignature));
}

#[test]
fn a_tampered_payload_fails_the_signature_check() {
    let token = hs256(&claims());
    let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
    parts[1] = URL_SAFE_NO_PAD.encode(with(claims(), "tenant", json!("globex")).to_string());
    assert_eq!(
        verifier().verify(&parts.join(".")),
        Err(AuthError::InvalidSignature)
    );
}

#[test]
fn alg_none_is_refused_however_it_is_spelled() {
    for alg in ["none", "None", "NONE"] {
        let token = raw_token(
            &json!({"alg": alg, "typ": "JWT", "kid": "hs-1"}),
            &claims(),
            b"",
        );
        assert_eq!(
            verifier().verify(&token),
            Err(AuthError::Malformed),
            "alg {alg}"
        );
    }
}

#[test]
fn an_hs256_token_keyed_with_the_rsa_public_key_is_refused() {
    // The classic confusion: the attacker knows the public PEM and names its kid.
    let forged = EncodingKey::from_secret(fixture!("rsa-public.pem"));
    let token = sign(Algorithm::HS256, Some("rsa-1"), &forged, &claims());
    assert_eq!(verifier().verify(&token), Err(AuthError::AlgorithmMismatch));
}

#[test]
fn a_header_alg_other_than_the_keys_own_is_refused() {
    let token = sign(
        Algorithm::HS512,
        Some("hs-1"),
        &EncodingKey::from_secret(SECRET_1),
        &claims(),
    );
    assert_eq!(verifier().verify(&token), Err(AuthError::AlgorithmMismatch));
    let token = sign(Algorithm::RS256, Some("ec-1"), &rsa_private(), &claims());
    assert_eq!(verifier().verify(&token), Err(AuthError::AlgorithmMismatch));
    let token = sign(Algorithm::PS256, Some("rsa-1"), &rsa_private(), &claims());
    assert_eq!(verifier().verify(&token), Err(AuthError::AlgorithmMismatch));
}

#[test]
fn an_rs256_token_verifies_against_the_jwks() {
    let token = sign(Algorithm::RS256, Some("rsa-1"), &rsa_private(), &claims());
    assert_eq!(
        verifier().verify(&token),
        Ok(principal("acme", &[Role::Client]))
    );
}

#[test]
fn an_es256_token_verifies_against_the_jwks() {
    let key = EncodingKey::from_ec_pem(fixture!("ec-private.pem")).unwrap();
    let token = sign(Algorithm::ES256, Some("ec-1"), &key, &claims());
    assert_eq!(
        verifier().verify(&token),
        Ok(principal("acme", &[Role::Client]))
    );
}

#[test]
fn an_eddsa_token_verifies_against_the_jwks() {
    let key = EncodingKey::from_ed_pem(fixture!("ed-private.pem")).unwrap();
    let token = sign(Algorithm::EdDSA, Some("ed-1"), &key, &claims());
    assert_eq!(
        verifier().verify(&token),
        Ok(principal("acme", &[Role::Client]))
    );
}

#[test]
fn an_unknown_or_missing_kid_is_refused() {
    let token = sign(
        Algorithm::HS256,
        Some("hs-9"),
        &EncodingKey::from_secret(SECRET_1),
        &claims(),
    );
    assert_eq!(verifier().verify(&token), Err(AuthError::UnknownKey));
    let token = sign(
        Algorithm::HS256,
        None,
        &EncodingKey::from_secret(SECRET_1),
        &claims(),
    );
    assert_eq!(verifier().verify(&token), Err(AuthError::MissingKid));
}

#[test]
fn a_critical_header_extension_is_refused() {
    let header = json!({"alg": "HS256", "kid": "hs-1", "crit": ["exp"]});
    let token = raw_token(&header, &claims(), b"irrelevant");
    assert_eq!(verifier().verify(&token), Err(AuthError::Malformed));
}

#[test]
fn garbage_and_oversized_tokens_are_malformed() {
    for token in ["", "abc", "a.b", "a.b.c.d", "!!.??.**"] {
        assert_eq!(
            verifier().verify(token),
            Err(AuthError::Malformed),
            "{token:?}"
        );
    }
    let huge = hs256(&with(claims(), "pad", json!("x".repeat(MAX_TOKEN_BYTES))));
    assert_eq!(verifier().verify(&huge), Err(AuthError::Malformed));
}
