//! The verifier under random tokens: random text and base64url segments,
//! random headers (every `alg` spelling, `none`, kids of other key types,
//! missing or odd kids, `crit`) over random claims (missing or odd `exp`,
//! `nbf`, `iss`, `aud`, `tenant`, `roles`, `sub`), signed with the right
//! key, a wrong one or not at all.
//!
//! The oracle is written from the module's guarantees, not from the code: a
//! token is accepted exactly when its header names a configured key with
//! that key's algorithm, it is signed with that key, and its claims are what
//! `auth`'s module doc requires; its principal is then what the claims say.
//! Times are offsets from the moment a case runs, kept well away from the
//! leeway's edges.

mod tokens;

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::sample::{select, Index};

use super::*;
use crate::proptest_config::config;
use tokens::*;

/// One verifier for every case: the JWKS file is read once, and the tokens
/// it accepts are remembered, so a second look goes through that memory.
fn shared() -> &'static Verifier {
    static VERIFIER: OnceLock<Verifier> = OnceLock::new();
    VERIFIER.get_or_init(verifier)
}

/// jsonwebtoken's reading of a time claim: a u64, or a finite non-negative
/// double below 2^64, rounded.
fn seconds(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let f = v.as_f64()?;
    (f.is_finite() && f >= 0.0 && f < u64::MAX as f64).then(|| f.round() as u64)
}

/// The principal the module doc promises for these claims, if any.
fn expected_principal(claims: &Value, now: i64) -> Option<Principal> {
    let c = claims.as_object()?;
    let (now, leeway) = (now as u64, LEEWAY_SECS);
    let exp = seconds(c.get("exp")?)?;
    if exp < now - leeway {
        return None;
    }
    if let Some(nbf) = c.get("nbf") {
        if seconds(nbf)? > now + leeway {
            return None;
        }
    }
    if c.get("iss")?.as_str()? != ISSUER {
        return None;
    }
    let aud_ok = match c.get("aud")? {
        Value::String(a) => a == AUDIENCE,
        Value::Array(items) => {
            items.iter().all(Value::is_string) && items.iter().any(|a| a == AUDIENCE)
        }
        _ => false,
    };
    let tenant = TenantId::parse(c.get("tenant")?.as_str()?).ok()?;
    let roles = match c.get("roles") {
        None => RoleSet::default(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|r| {
                r.as_str()
                    .and_then(|r| ROLES.contains(&r).then(|| r.parse::<Role>().unwrap()))
            })
            .collect::<Option<RoleSet>>()?,
        Some(_) => return None,
    };
    let subject = match c.get("sub") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.len() <= 256 => Some(s.clone()),
        Some(_) => return None,
    };
    aud_ok.then_some(Principal {
        tenant,
        roles,
        subject,
    })
}

/// The signer of the configured key the header selects with that key's
/// algorithm, unless something in the header makes the token malformed.
fn key_of(header: &Value) -> Option<Signer> {
    let h = header.as_object()?;
    let (alg, signer) = configured(h.get("kid")?.as_str()?)?;
    let strings = ["typ", "x-extra"]
        .iter()
        .all(|m| h.get(*m).is_none_or(Value::is_string));
    (h.get("alg")? == alg && !h.contains_key("crit") && strings).then_some(signer)
}

fn part(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(v.to_string())
}

fn base64url_char() -> impl Strategy<Value = char> {
    select("ABCXYZabcxyz0189-_.=+/ ".chars().collect::<Vec<_>>())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_token_is_accepted_exactly_when_a_configured_key_signed_valid_claims(
        (header, signer) in header_and_signer(),
        payload in prop_oneof![9 => random_claims().prop_map(Some), 1 => Just(None)],
        junk_payload in junk(),
    ) {
        let now = now();
        let claims = payload.map_or(junk_payload, |c| c.at(now));
        let message = format!("{}.{}", part(&header), part(&claims));
        let token = format!("{message}.{}", signature(&signer, &message));

        let got = shared().verify(&token);
        let key = key_of(&header);
        let signed = key.as_ref() == Some(&signer);
        let expected = if signed { expected_principal(&claims, now) } else { None };
        match (&got, &expected) {
            (Ok(who), Some(principal)) => prop_assert_eq!(who, principal),
            (Err(_), None) => {}
            _ => prop_assert!(false, "got {:?}, expected {:?}\nheader {}\nclaims {}", got, expected, header, claims),
        }
        if key.is_some() && !signed {
            prop_assert_eq!(&got, &Err(AuthError::InvalidSignature));
        }
        // A second look (from memory when accepted) answers the same.
        prop_assert_eq!(shared().verify(&token), got);
    }

    #[test]
    fn random_text_and_segments_are_never_accepted(
        token in prop_oneof![
            any::<String>(),
            prop::collection::vec(base64url_char(), 0..120).prop_map(String::from_iter),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..60), 0..5)
                .prop_map(|parts| parts.iter().map(|p| URL_SAFE_NO_PAD.encode(p)).collect::<Vec<_>>().join(".")),
            (junk(), junk(), prop::collection::vec(any::<u8>(), 0..40))
                .prop_map(|(h, c, s)| format!("{}.{}.{}", part(&h), part(&c), URL_SAFE_NO_PAD.encode(s))),
        ]
    ) {
        prop_assert!(shared().verify(&token).is_err(), "{:?}", token);
    }

    #[test]
    fn a_valid_token_changed_anywhere_is_refused(
        at in any::<Index>(),
        kind in 0..3u8,
        c in base64url_char(),
    ) {
        let token = hs256(&claims());
        let mut chars: Vec<char> = token.chars().collect();
        let i = at.index(chars.len());
        match kind {
            0 => { chars.remove(i); }
            1 => chars.insert(i, c),
            _ => chars[i] = c,
        }
        let changed: String = chars.into_iter().collect();
        prop_assume!(changed != token);
        prop_assert!(shared().verify(&changed).is_err(), "{}", changed);
    }
}
