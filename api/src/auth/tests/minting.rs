//! `mint` round trips, and how refusals read in logs.

use super::*;

#[test]
fn minted_tokens_verify_and_round_trip_tenant_and_roles() {
    let tenant = TenantId::parse("org:acme-eu.1").unwrap();
    let roles: RoleSet = "viewer,admin".parse().unwrap();
    let ttl = Duration::from_secs(90);
    let token = mint(
        "hs-2",
        SECRET_2,
        "https://issuer.test",
        "idemkey",
        &tenant,
        roles,
        ttl,
    )
    .unwrap();
    assert_eq!(
        verifier().verify(&token),
        Ok(Principal {
            tenant,
            roles,
            subject: None
        })
    );

    let claims = jsonwebtoken::dangerous::insecure_decode::<Value>(&token)
        .unwrap()
        .claims;
    assert_eq!(claims["roles"], json!(["viewer", "admin"]));
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        90
    );
}

#[test]
fn mint_refuses_weak_secrets_and_empty_lifetimes() {
    let tenant = TenantId::parse("acme").unwrap();
    let roles = RoleSet::default();
    let hour = Duration::from_secs(3600);
    assert!(mint("hs-1", b"short", "i", "a", &tenant, roles, hour).is_err());
    assert!(mint("", SECRET_1, "i", "a", &tenant, roles, hour).is_err());
    assert!(mint("hs-1", SECRET_1, "i", "a", &tenant, roles, Duration::ZERO).is_err());
}

#[test]
fn every_refusal_has_a_stable_reason_for_logs() {
    let token = hs256(&with(claims(), "exp", json!(now() - 120)));
    assert_eq!(verifier().verify(&token).unwrap_err().reason(), "expired");
    assert_eq!(
        AuthError::InvalidClaims("aud").to_string(),
        "token has an invalid aud claim"
    );
}
