//! Bearer-token authentication: who is calling, for which tenant, with which
//! roles.
//!
//! What this module guarantees (SPEC §5):
//!
//! - **The key decides the algorithm.** Every configured key (an HS256 secret,
//!   or an RS256 / ES256 / EdDSA public key from the JWKS file) carries exactly
//!   one algorithm. A token is checked only against the key named by its
//!   `kid`, and only if its header `alg` is that key's algorithm. `alg: none`,
//!   unknown algorithms and every cross-family trick (an HS256 token "signed"
//!   with an RSA public key) are refused before any signature is computed.
//! - **Registered claims are required**: `exp`, `iss` and `aud` must be present;
//!   `iss` and `aud` must equal the configured issuer and audience (`aud` may
//!   also be an array that contains it). `nbf` is honoured when present. Clock
//!   skew of [`LEEWAY_SECS`] seconds is tolerated on `exp` and `nbf`.
//! - **Tenant and roles come from the token only.** `tenant` must be a string
//!   that parses as a [`TenantId`](crate::domain::TenantId); `roles`, if
//!   present, must be an array of known role names. An unknown role name makes
//!   the whole token invalid (a typo should fail loudly, not silently grant
//!   less); a token without roles verifies with an empty [`RoleSet`] and is
//!   refused by every route (403).
//! - **Rotation by `kid`**: any number of HS256 secrets and JWKS keys may be
//!   configured at once; a kid may appear only once across both.
//!
//! Every [`AuthError`] is an HTTP 401 at the edge; the variants exist for logs
//! and metrics ([`AuthError::reason`]), never for the response body.

mod error;
mod keys;
mod mint;
mod recent;
mod roles;
mod verify;

#[cfg(test)]
mod tests;

pub use error::AuthError;
pub use keys::{AuthSettings, MIN_HS256_SECRET_BYTES};
pub use mint::mint;
pub use roles::{Principal, Role, RoleSet, UnknownRole};
pub use verify::{Verifier, LEEWAY_SECS, MAX_TOKEN_BYTES};
