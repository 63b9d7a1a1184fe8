//! Registered claims (`exp`, `nbf`, `iss`, `aud`) and ours (`tenant`, `roles`).

use super::*;

#[test]
fn an_expired_token_is_refused() {
    let token = hs256(&with(claims(), "exp", json!(now() - 120)));
    assert_eq!(verifier().verify(&token), Err(AuthError::Expired));
}

#[test]
fn a_token_expired_within_the_leeway_still_verifies() {
    let token = hs256(&with(claims(), "exp", json!(now() - 5)));
    assert!(verifier().verify(&token).is_ok());
}

#[test]
fn a_remembered_token_answers_the_same_and_vouches_for_no_other() {
    let verifier = verifier();
    let token = hs256(&claims());
    let first = verifier.verify(&token).unwrap();
    assert_eq!(verifier.verify(&token), Ok(first));
    // Same header and claims, another signature: checked in full, refused.
    let (signed, signature) = token.rsplit_once('.').unwrap();
    let flipped = if signature.starts_with('A') { 'B' } else { 'A' };
    let forged = format!("{signed}.{flipped}{}", &signature[1..]);
    assert_eq!(verifier.verify(&forged), Err(AuthError::InvalidSignature));
    // Another tenant's token is not answered from the first one's entry.
    let other = hs256(&with(claims(), "tenant", json!("globex")));
    assert_eq!(verifier.verify(&other).unwrap().tenant.as_str(), "globex");
}

#[test]
fn a_token_without_exp_is_refused() {
    let token = hs256(&without(claims(), "exp"));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::MissingClaim("exp"))
    );
}

#[test]
fn a_string_exp_is_refused() {
    // jsonwebtoken < 10.3 skipped such an `exp`; 10.4 reports it as missing.
    let token = hs256(&with(claims(), "exp", json!((now() + 300).to_string())));
    let refusal = verifier().verify(&token);
    assert!(
        matches!(
            refusal,
            Err(AuthError::MissingClaim("exp") | AuthError::InvalidClaims("exp"))
        ),
        "{refusal:?}"
    );
}

#[test]
fn a_token_before_its_nbf_is_refused() {
    let token = hs256(&with(claims(), "nbf", json!(now() + 120)));
    assert_eq!(verifier().verify(&token), Err(AuthError::NotYetValid));
    let token = hs256(&with(claims(), "nbf", json!(now() - 1)));
    assert!(verifier().verify(&token).is_ok());
}

#[test]
fn a_wrong_or_missing_audience_is_refused() {
    let token = hs256(&with(claims(), "aud", json!("someone-else")));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::InvalidClaims("aud"))
    );
    let token = hs256(&without(claims(), "aud"));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::MissingClaim("aud"))
    );
}

#[test]
fn an_audience_array_must_contain_ours() {
    let token = hs256(&with(claims(), "aud", json!(["other", "idemkey"])));
    assert!(verifier().verify(&token).is_ok());
    let token = hs256(&with(claims(), "aud", json!(["other", "third"])));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::InvalidClaims("aud"))
    );
}

#[test]
fn a_wrong_or_missing_issuer_is_refused() {
    let token = hs256(&with(claims(), "iss", json!("https://evil.test")));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::InvalidClaims("iss"))
    );
    let token = hs256(&without(claims(), "iss"));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::MissingClaim("iss"))
    );
    let token = hs256(&with(claims(), "iss", json!(["https://issuer.test"])));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::InvalidClaims("iss"))
    );
}

#[test]
fn a_token_without_tenant_is_refused() {
    let token = hs256(&without(claims(), "tenant"));
    assert_eq!(
        verifier().verify(&token),
        Err(AuthError::MissingClaim("tenant"))
    );
}

#[test]
fn a_tenant_that_is_not_a_tenant_id_is_refused() {
    for bad in [json!("a/b"), json!(""), json!(42), json!(["acme"])] {
        let token = hs256(&with(claims(), "tenant", bad.clone()));
        assert_eq!(
            verifier().verify(&token),
            Err(AuthError::InvalidClaims("tenant")),
            "{bad}"
        );
    }
}

#[test]
fn an_unknown_role_invalidates_the_token() {
    for bad in [
        json!(["client", "root"]),
        json!(["Admin"]),
        json!([1]),
        json!("client"),
    ] {
        let token = hs256(&with(claims(), "roles", bad.clone()));
        assert_eq!(
            verifier().verify(&token),
            Err(AuthError::InvalidClaims("roles")),
            "{bad}"
        );
    }
}

#[test]
fn a_token_without_roles_verifies_with_no_roles() {
    for token in [
        hs256(&without(claims(), "roles")),
        hs256(&with(claims(), "roles", json!([]))),
    ] {
        let who = verifier().verify(&token).unwrap();
        assert!(who.roles.is_empty() && !who.can(&Role::ALL));
    }
}
