//! Signing a delivery the Standard Webhooks way, so receivers can use any
//! of that specification's libraries to verify it.
//!
//! The secret is `whsec_` and the base64 of 24 random bytes; the key is
//! those bytes. A delivery carries `webhook-id`, `webhook-timestamp` (Unix
//! seconds) and `webhook-signature: v1,<base64 of HMAC-SHA256 over
//! "{id}.{timestamp}.{body}">`. The id stays the same across retries of
//! one event (receivers deduplicate on it); the timestamp is the attempt's,
//! so a receiver can refuse stale replays.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix every secret's text starts with.
pub const PREFIX: &str = "whsec_";
/// Random bytes in a new secret.
pub const SECRET_BYTES: usize = 24;

/// An endpoint's signing secret.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookSecret(Vec<u8>);

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret(..)")
    }
}

impl WebhookSecret {
    pub fn from_bytes(bytes: [u8; SECRET_BYTES]) -> Self {
        Self(bytes.to_vec())
    }

    /// Reads `whsec_<base64>`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = STANDARD.decode(text.strip_prefix(PREFIX)?).ok()?;
        (!bytes.is_empty()).then_some(Self(bytes))
    }

    /// The secret as given to the tenant and stored.
    pub fn expose(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(&self.0))
    }

    /// The `webhook-signature` header's value for one attempt.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }

    /// Whether one of the space-separated signatures in `header` is this
    /// secret's `v1` signature of the attempt (compared in constant time).
    pub fn verify(&self, id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
        header.split(' ').any(|candidate| {
            let Some(sig) = candidate.strip_prefix("v1,") else {
                return false;
            };
            let Ok(sig) = STANDARD.decode(sig) else {
                return false;
            };
            let mut mac =
                Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
            mac.update(format!("{id}.{timestamp}.").as_bytes());
            mac.update(body);
            mac.verify_slice(&sig).is_ok()
        })
    }
}
