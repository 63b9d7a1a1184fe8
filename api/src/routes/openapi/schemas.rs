//! The named string formats of the API, as schemas the answer and request
//! types point at (`#[schema(value_type = Timestamp)]`): each answer type
//! keeps its Rust representation (a `String` or `&str`) and documents the
//! format it carries.

use utoipa::ToSchema;

/// RFC 3339, UTC, milliseconds, `Z`.
#[derive(ToSchema)]
#[schema(format = DateTime, example = "2026-11-29T12:52:22.457Z")]
pub struct Timestamp(#[allow(dead_code)] String);

/// SHA-256 of the canonical protected input, as 64 lowercase hex characters.
#[derive(ToSchema)]
#[schema(pattern = "^[0-9a-f]{64}$")]
pub struct Fingerprint(#[allow(dead_code)] String);

/// Derived from the scoped key with the server's secret; the same for every
/// attempt. Pass it to the downstream provider as its idempotency key or
/// reference.
#[derive(ToSchema)]
#[schema(pattern = "^eff_[0-9a-f]{32}$")]
pub struct EffectId(#[allow(dead_code)] String);

/// The owner token of a `claimed` or `recovering` answer (43 base64url
/// characters). Only its hash is stored.
#[derive(ToSchema)]
pub struct OwnerToken(#[allow(dead_code)] String);

/// Declares a one-word string type: its only value is the word, and its
/// schema says so (`"enum": [word]`). Answers carry one as their `status`.
macro_rules! word {
    ($($(#[$doc:meta])* $name:ident = $word:literal;)+) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, serde::Serialize, utoipa::ToSchema)]
        pub enum $name {
            #[serde(rename = $word)]
            #[schema(rename = $word)]
            Word,
        }
    )+};
}

word! {
    /// `claimed`
    ClaimedWord = "claimed";
    /// `recovering`
    RecoveringWord = "recovering";
    /// `completed`
    CompletedWord = "completed";
    /// `released`
    ReleasedWord = "released";
    /// `ok`
    OkWord = "ok";
    /// `ready`
    ReadyWord = "ready";
}
