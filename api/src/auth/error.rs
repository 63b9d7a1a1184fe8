//! Why a bearer token was refused. Every variant is answered with the same
//! opaque 401; the distinction is for logs and metrics only, so no variant
//! carries text taken from the token.

use jsonwebtoken::errors::ErrorKind;

/// A token that does not authenticate its bearer. Always an HTTP 401.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Not a compact JWS: wrong shape, bad base64 or JSON, an algorithm we do
    /// not know at all (including `none`), a `crit` header, or too long.
    #[error("malformed token")]
    Malformed,
    /// The header names no `kid`, so no key can be chosen.
    #[error("token header has no kid")]
    MissingKid,
    /// The `kid` is not one of the configured keys.
    #[error("token kid is not a configured key")]
    UnknownKey,
    /// The header `alg` is not the algorithm of the key named by `kid`.
    #[error("token alg does not match the algorithm of its key")]
    AlgorithmMismatch,
    /// The signature does not verify with the key named by `kid`.
    #[error("token signature is invalid")]
    InvalidSignature,
    /// `exp` is in the past (beyond the leeway).
    #[error("token has expired")]
    Expired,
    /// `nbf` is in the future (beyond the leeway).
    #[error("token is not valid yet")]
    NotYetValid,
    /// A required claim (`exp`, `iss`, `aud`, `tenant`) is absent.
    #[error("token lacks the {0} claim")]
    MissingClaim(&'static str),
    /// A claim is present but wrong: bad type, wrong issuer or audience,
    /// unparseable tenant, unknown role.
    #[error("token has an invalid {0} claim")]
    InvalidClaims(&'static str),
    /// The configured key could not be used to check this token (a key
    /// problem on our side, or a failure the library reports without detail).
    #[error("token could not be verified")]
    Unverifiable,
}

impl AuthError {
    /// A stable, low-cardinality label for logs and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::MissingKid => "missing_kid",
            Self::UnknownKey => "unknown_kid",
            Self::AlgorithmMismatch => "algorithm_mismatch",
            Self::InvalidSignature => "invalid_signature",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::MissingClaim(_) => "missing_claim",
            Self::InvalidClaims(_) => "invalid_claims",
            Self::Unverifiable => "unverifiable",
        }
    }
}

impl From<jsonwebtoken::errors::Error> for AuthError {
    fn from(err: jsonwebtoken::errors::Error) -> Self {
        match err.kind() {
            ErrorKind::ExpiredSignature => Self::Expired,
            ErrorKind::ImmatureSignature => Self::NotYetValid,
            ErrorKind::InvalidSignature => Self::InvalidSignature,
            ErrorKind::InvalidAlgorithm | ErrorKind::MissingAlgorithm => Self::AlgorithmMismatch,
            ErrorKind::MissingRequiredClaim(claim) => Self::MissingClaim(registered(claim)),
            ErrorKind::InvalidClaimFormat(claim) => Self::InvalidClaims(registered(claim)),
            ErrorKind::InvalidIssuer => Self::InvalidClaims("iss"),
            ErrorKind::InvalidAudience => Self::InvalidClaims("aud"),
            ErrorKind::InvalidSubject => Self::InvalidClaims("sub"),
            ErrorKind::InvalidToken
            | ErrorKind::Base64(_)
            | ErrorKind::Json(_)
            | ErrorKind::Utf8(_) => Self::Malformed,
            _ => Self::Unverifiable,
        }
    }
}

/// Maps the library's claim name to a `'static` label without echoing input.
fn registered(claim: &str) -> &'static str {
    match claim {
        "exp" => "exp",
        "nbf" => "nbf",
        "iss" => "iss",
        "aud" => "aud",
        "sub" => "sub",
        _ => "registered",
    }
}
