//! Token verification: header → key by `kid` → that key's algorithm only →
//! signature and registered claims → tenant and roles.
//!
//! The algorithm allow-list is per key, not global: `jsonwebtoken::decode` is
//! called with a `Validation` listing exactly the chosen key's algorithm, after
//! we have already refused a header whose `alg` differs. `exp`, `iss` and `aud`
//! are listed as required spec claims because jsonwebtoken checks `iss`/`aud`
//! only when present otherwise; `exp`/`nbf` must also be JSON numbers here,
//! whatever the library version does with a string.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use anyhow::ensure;
use jsonwebtoken::{decode, decode_header, get_current_timestamp, Validation};
use serde_json::{Map, Value};

use super::keys::{self, AuthSettings};
use super::recent::VerifiedTokens;
use super::{AuthError, Principal, Role, RoleSet};
use crate::domain::TenantId;

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 30;

/// Longer bearer tokens are refused unread (ours are a few hundred bytes).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Checks bearer tokens against the configured keys. Cheap to clone (the key
/// table and the tokens already verified are shared).
#[derive(Clone)]
pub struct Verifier {
    keys: Arc<HashMap<String, Key>>,
    recent: Arc<VerifiedTokens>,
}

struct Key {
    key: keys::VerifyingKey,
    validation: Validation,
}

impl Verifier {
    /// Loads the HS256 secrets and the JWKS file. Fails on any doubtful key
    /// (see the `keys` module), on an empty issuer or audience, or when no key
    /// is configured at all.
    pub fn new(settings: &AuthSettings) -> anyhow::Result<Verifier> {
        ensure!(
            !settings.issuer.is_empty(),
            "the JWT issuer must not be empty"
        );
        ensure!(
            !settings.audience.is_empty(),
            "the JWT audience must not be empty"
        );
        let keys = keys::load(settings)?
            .into_iter()
            .map(|(kid, key)| {
                let validation = validation(key.alg, settings);
                (kid, Key { key, validation })
            })
            .collect();
        Ok(Verifier {
            keys: Arc::new(keys),
            recent: Arc::default(),
        })
    }

    /// The caller named by `token` (the bearer credential, without `Bearer `).
    /// A token that verified before is not checked again until its `exp`
    /// (see the `recent` module).
    pub fn verify(&self, token: &str) -> Result<Principal, AuthError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::Malformed);
        }
        if let Some(principal) = self.recent.get(token, get_current_timestamp()) {
            return Ok(principal);
        }
        let (principal, exp) = self.verify_fully(token)?;
        // A fractional `exp` verifies but is not remembered.
        if let Some(exp) = exp {
            self.recent.insert(token, &principal, exp);
        }
        Ok(principal)
    }

    /// Header, key, signature and claims; the principal and the token's
    /// `exp` when it is a whole number.
    fn verify_fully(&self, token: &str) -> Result<(Principal, Option<u64>), AuthError> {
        // An `alg` jsonwebtoken does not know, `none` included, fails here.
        let header = decode_header(token).map_err(|_| AuthError::Malformed)?;
        // RFC 7515 §4.1.11: we understand no extension, so `crit` is fatal.
        if header.crit.is_some() {
            return Err(AuthError::Malformed);
        }
        let kid = header.kid.as_deref().ok_or(AuthError::MissingKid)?;
        let Key { key, validation } = self.keys.get(kid).ok_or(AuthError::UnknownKey)?;
        if header.alg != key.alg {
            return Err(AuthError::AlgorithmMismatch);
        }
        let claims = decode::<Map<String, Value>>(token, &key.key, validation)?.claims;
        let exp = claims.get("exp").and_then(Value::as_u64);
        Ok((principal(&claims)?, exp))
    }
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kids: Vec<_> = self.keys.iter().map(|(kid, k)| (kid, k.key.alg)).collect();
        kids.sort_by_key(|(kid, _)| *kid);
        f.debug_struct("Verifier").field("keys", &kids).finish()
    }
}

fn validation(alg: jsonwebtoken::Algorithm, settings: &AuthSettings) -> Validation {
    let mut validation = Validation::new(alg);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.set_issuer(&[&settings.issuer]);
    validation.set_audience(&[&settings.audience]);
    validation.leeway = LEEWAY_SECS;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation
}

/// The principal from claims whose signature and registered claims are
/// already verified.
fn principal(claims: &Map<String, Value>) -> Result<Principal, AuthError> {
    // Defence in depth over the library: times are numbers, `iss` one string.
    for name in ["exp", "nbf"] {
        if claims.get(name).is_some_and(|v| !v.is_number()) {
            return Err(AuthError::InvalidClaims(name));
        }
    }
    if !claims.get("iss").is_some_and(Value::is_string) {
        return Err(AuthError::InvalidClaims("iss"));
    }
    let tenant = match claims.get("tenant") {
        None | Some(Value::Null) => return Err(AuthError::MissingClaim("tenant")),
        Some(Value::String(s)) => {
            TenantId::parse(s).map_err(|_| AuthError::InvalidClaims("tenant"))?
        }
        Some(_) => return Err(AuthError::InvalidClaims("tenant")),
    };
    let roles = match claims.get("roles") {
        None => RoleSet::default(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().and_then(Role::parse))
            .collect::<Option<RoleSet>>()
            .ok_or(AuthError::InvalidClaims("roles"))?,
        Some(_) => return Err(AuthError::InvalidClaims("roles")),
    };
    let subject = match claims.get("sub") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() <= 256 => Some(s.clone()),
        Some(_) => return Err(AuthError::InvalidClaims("sub")),
    };
    Ok(Principal {
        tenant,
        roles,
        subject,
    })
}
