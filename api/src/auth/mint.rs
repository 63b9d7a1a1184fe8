//! Minting HS256 tokens for `idemkey token` and tests. A minted token carries
//! exactly what [`Verifier`](super::Verifier) requires: header `kid`, claims
//! `iss`, `aud`, `tenant`, `roles`, `iat` and `exp`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use serde::Serialize;

use super::keys::check_hs256_secret;
use super::{Role, RoleSet};
use crate::domain::TenantId;

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    aud: &'a str,
    tenant: &'a str,
    roles: Vec<Role>,
    iat: u64,
    exp: u64,
}

/// Signs an HS256 token for `tenant` with `roles`, valid for `ttl` (rounded
/// up to whole seconds) from now. Refuses an empty kid, a secret shorter than
/// [`MIN_HS256_SECRET_BYTES`](super::MIN_HS256_SECRET_BYTES) and a zero ttl.
pub fn mint(
    kid: &str,
    secret: &[u8],
    issuer: &str,
    audience: &str,
    tenant: &TenantId,
    roles: RoleSet,
    ttl: Duration,
) -> anyhow::Result<String> {
    check_hs256_secret(kid, secret)?;
    ensure!(!ttl.is_zero(), "token lifetime must be positive");
    let iat = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("system clock is before 1970")?
        .as_secs();
    let ttl_secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    let exp = iat
        .checked_add(ttl_secs)
        .context("token lifetime is too long")?;
    let claims = Claims {
        iss: issuer,
        aud: audience,
        tenant: tenant.as_str(),
        roles: roles.iter().collect(),
        iat,
        exp,
    };
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some(kid.to_owned());
    encode(&header, &claims, &EncodingKey::from_secret(secret)).context("signing the token")
}
