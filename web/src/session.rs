//! Dashboard sessions: a verified token exchanged for a signed cookie.
//!
//! The cookie is `base64url(payload) "." base64url(HMAC-SHA256(key, payload))`
//! where the payload is a small JSON object: tenant, roles, subject, expiry
//! (Unix seconds) and a random session id. The keys come from
//! `IDEMKEY_SESSION_SECRET` — their own secret, not the effect-id key — so
//! any node that shares it accepts the session and nothing needs storing.
//!
//! - **Rotation**: the variable is a list, newest first. The first key signs
//!   sessions and CSRF tokens; every key verifies them, so putting a new
//!   secret in front keeps every open session and form valid until the old
//!   one is removed.
//! - A session never outlives the token it came from, nor [`MAX_SESSION`].
//! - The MAC is checked in constant time (`Mac::verify_slice`) before the
//!   payload is read; a cookie that fails any check is simply no session.
//! - The cookie is `HttpOnly`, `SameSite=Strict`, `Path=/`. When the request
//!   came over TLS (directly or, per `X-Forwarded-Proto`, through the
//!   proxy) it is also `Secure` and named with the `__Host-` prefix, which
//!   browsers accept only from a secure origin, for the whole host, with no
//!   `Domain`: a sibling sub-domain cannot plant or shadow it. Only the
//!   name that matches the request's scheme is read.
//! - Signing out deletes the cookie. The session is stateless, so a copied
//!   cookie stays valid until it expires; keep [`MAX_SESSION`] short.

use std::future::{ready, Ready};
use std::sync::Arc;

use actix_web::cookie::{time, Cookie, SameSite};
use actix_web::dev::Payload;
use actix_web::{web, FromRequest, HttpRequest};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::Utc;
use hmac::{Hmac, Mac};
use idemkey_api::auth::{Principal, Role, RoleSet};
use idemkey_api::domain::TenantId;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::error::PageError;
use crate::security::is_tls;

/// The session cookie over plain HTTP (development).
pub const COOKIE: &str = "idemkey_session";
/// The session cookie over TLS.
pub const SECURE_COOKIE: &str = "__Host-idemkey_session";
/// The longest a session lasts, whatever the token's own expiry.
pub const MAX_SESSION: std::time::Duration = std::time::Duration::from_secs(8 * 3600);
/// Cookies longer than this are not ours.
const MAX_COOKIE_BYTES: usize = 2048;

type HmacSha256 = Hmac<Sha256>;

/// A signed-in dashboard user.
#[derive(Debug, Clone)]
pub struct Session {
    pub tenant: TenantId,
    pub roles: RoleSet,
    pub subject: Option<String>,
    /// Unix seconds.
    pub expires_at: i64,
    /// Random, per sign-in; CSRF tokens are bound to it.
    pub id: String,
}

#[derive(Serialize, Deserialize)]
struct SessionClaims {
    t: String,
    r: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<String>,
    e: i64,
    i: String,
}

/// The dashboard's signing keys (sessions and CSRF tokens), newest first:
/// the first signs, every one verifies.
#[derive(Clone)]
pub struct Keys {
    keys: Arc<[[u8; 32]]>,
}

impl Keys {
    /// The keys for `IDEMKEY_SESSION_SECRET`'s secrets, each derived for
    /// this one purpose.
    pub fn from_secrets(secrets: &[Vec<u8>]) -> Self {
        assert!(!secrets.is_empty(), "at least one session secret");
        let derive = |secret: &Vec<u8>| -> [u8; 32] {
            let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
            mac.update(b"idemkey dashboard-session-v1\0");
            mac.finalize().into_bytes().into()
        };
        Self {
            keys: secrets.iter().map(derive).collect(),
        }
    }

    /// The keys registered when the dashboard was mounted.
    pub fn of(req: &HttpRequest) -> Self {
        req.app_data::<web::Data<Keys>>()
            .expect("the dashboard's keys are registered by `mount`")
            .get_ref()
            .clone()
    }

    /// HMAC-SHA256 of `parts` under `key`, each part followed by a NUL (no
    /// part contains one).
    fn mac_with(key: &[u8; 32], parts: &[&str]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(&[0]);
        }
        mac
    }

    /// Whether `tag` (base64url) is the MAC of `parts` under any of the
    /// keys, each compared in constant time.
    pub fn verify(&self, parts: &[&str], tag: &str) -> bool {
        let Ok(bytes) = URL_SAFE_NO_PAD.decode(tag) else {
            return false;
        };
        self.keys
            .iter()
            .any(|key| Self::mac_with(key, parts).verify_slice(&bytes).is_ok())
    }

    /// The MAC of `parts` under the newest key, base64url.
    pub fn tag(&self, parts: &[&str]) -> String {
        let mac = Self::mac_with(&self.keys[0], parts);
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }
}

/// The session cookie's name for this request's scheme.
pub fn cookie_name(req: &HttpRequest) -> &'static str {
    if is_tls(req) {
        SECURE_COOKIE
    } else {
        COOKIE
    }
}

impl Session {
    /// A new session for a verified principal whose token expires at
    /// `token_exp` (Unix seconds).
    pub fn start(principal: &Principal, token_exp: i64) -> Self {
        let now = Utc::now().timestamp();
        Self {
            tenant: principal.tenant.clone(),
            roles: principal.roles,
            subject: principal.subject.clone(),
            expires_at: token_exp.min(now + MAX_SESSION.as_secs() as i64),
            id: URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>()),
        }
    }

    pub fn is_admin(&self) -> bool {
        self.roles.has(Role::Admin)
    }

    /// The role to show beside the tenant.
    pub fn role_label(&self) -> &'static str {
        if self.is_admin() {
            "admin"
        } else {
            "viewer"
        }
    }

    /// Who to name in audit records for an action taken here.
    pub fn actor(&self) -> String {
        match &self.subject {
            Some(sub) => format!("admin:{sub}"),
            None => "admin:dashboard".to_owned(),
        }
    }

    pub fn encode(&self, keys: &Keys) -> String {
        let payload = SessionClaims {
            t: self.tenant.as_str().to_owned(),
            r: self.roles.to_string(),
            s: self.subject.clone(),
            e: self.expires_at,
            i: self.id.clone(),
        };
        let json = serde_json::to_vec(&payload).expect("a session serialises");
        let body = URL_SAFE_NO_PAD.encode(json);
        let tag = keys.tag(&["session", &body]);
        format!("{body}.{tag}")
    }

    /// The session in `value`, if it is ours, intact and unexpired.
    pub fn decode(value: &str, keys: &Keys) -> Option<Self> {
        if value.len() > MAX_COOKIE_BYTES {
            return None;
        }
        let (body, tag) = value.split_once('.')?;
        if !keys.verify(&["session", body], tag) {
            return None;
        }
        let p: SessionClaims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        if p.e <= Utc::now().timestamp() {
            return None;
        }
        let roles: RoleSet = p.r.parse().ok()?;
        if !(roles.has(Role::Viewer) || roles.has(Role::Admin)) {
            return None;
        }
        Some(Self {
            tenant: TenantId::parse(&p.t).ok()?,
            roles,
            subject: p.s,
            expires_at: p.e,
            id: p.i,
        })
    }

    /// The cookie that carries this session.
    pub fn cookie(&self, keys: &Keys, req: &HttpRequest) -> Cookie<'static> {
        let max_age = (self.expires_at - Utc::now().timestamp()).max(0);
        Cookie::build(cookie_name(req), self.encode(keys))
            .path("/")
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(is_tls(req))
            .max_age(time::Duration::seconds(max_age))
            .finish()
    }

    /// A cookie that deletes the session cookie.
    pub fn removal(req: &HttpRequest) -> Cookie<'static> {
        let mut cookie = Cookie::build(cookie_name(req), "")
            .path("/")
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(is_tls(req))
            .finish();
        cookie.make_removal();
        cookie
    }
}

/// The `exp` of a token whose signature and claims were already verified.
pub fn token_expiry(token: &str) -> Option<i64> {
    let payload = token.split('.').nth(1)?;
    let claims: serde_json::Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
    claims.get("exp")?.as_i64()
}

/// A page that needs a session: without a valid one the browser is sent to
/// sign in.
impl FromRequest for Session {
    type Error = PageError;
    type Future = Ready<Result<Self, PageError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let keys = Keys::of(req);
        let session = req
            .cookie(cookie_name(req))
            .and_then(|c| Session::decode(c.value(), &keys));
        if let Some(s) = &session {
            idemkey_api::telemetry::record_tenant(&s.tenant);
        }
        ready(session.ok_or(PageError::SignIn))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &[u8] = b"an-older-session-secret-0123456789abc";
    const NEW: &[u8] = b"the-newest-session-secret-0123456789ab";

    fn keys() -> Keys {
        Keys::from_secrets(&[OLD.to_vec()])
    }

    fn session(roles: &str, expires_in: i64) -> Session {
        Session {
            tenant: TenantId::parse("acme").unwrap(),
            roles: roles.parse().unwrap(),
            subject: Some("alice".into()),
            expires_at: Utc::now().timestamp() + expires_in,
            id: "sid".into(),
        }
    }

    #[test]
    fn a_session_round_trips_through_its_cookie_value() {
        let value = session("viewer", 60).encode(&keys());
        let back = Session::decode(&value, &keys()).unwrap();
        assert_eq!(back.tenant.as_str(), "acme");
        assert_eq!(back.roles.to_string(), "viewer");
        assert_eq!(back.subject.as_deref(), Some("alice"));
    }

    #[test]
    fn tampered_expired_foreign_or_roleless_sessions_are_refused() {
        let value = session("viewer", 60).encode(&keys());
        let (body, tag) = value.split_once('.').unwrap();
        // Another tenant, same tag.
        let forged = URL_SAFE_NO_PAD.encode(
            String::from_utf8(URL_SAFE_NO_PAD.decode(body).unwrap())
                .unwrap()
                .replace("acme", "evil"),
        );
        assert!(Session::decode(&format!("{forged}.{tag}"), &keys()).is_none());
        let other = Keys::from_secrets(&[NEW.to_vec()]);
        assert!(Session::decode(&value, &other).is_none());
        assert!(Session::decode(&session("viewer", -1).encode(&keys()), &keys()).is_none());
        assert!(Session::decode(&session("client", 60).encode(&keys()), &keys()).is_none());
        assert!(Session::decode("garbage", &keys()).is_none());
    }

    #[test]
    fn a_session_never_outlives_its_token_or_the_maximum() {
        let p = Principal {
            tenant: TenantId::parse("acme").unwrap(),
            roles: "viewer".parse().unwrap(),
            subject: None,
        };
        let now = Utc::now().timestamp();
        assert_eq!(Session::start(&p, now + 60).expires_at, now + 60);
        assert!(Session::start(&p, now + 365 * 86400).expires_at <= now + 8 * 3600 + 1);
    }

    #[test]
    fn after_a_rotation_the_newest_key_signs_and_every_key_verifies() {
        let before = session("viewer", 60).encode(&keys());
        let rotated = Keys::from_secrets(&[NEW.to_vec(), OLD.to_vec()]);
        assert!(Session::decode(&before, &rotated).is_some());
        assert!(rotated.verify(&["csrf", "sid"], &keys().tag(&["csrf", "sid"])));

        let after = session("viewer", 60).encode(&rotated);
        assert!(Session::decode(&after, &Keys::from_secrets(&[NEW.to_vec()])).is_some());
        assert!(
            Session::decode(&after, &keys()).is_none(),
            "signed with the newest"
        );
    }
}
