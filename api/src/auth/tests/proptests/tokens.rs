//! Token parts for the verifier's properties: headers and signers (mostly
//! honest, otherwise anything), and claims whose times are offsets from the
//! moment a case runs.

use proptest::option::weighted;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::Map;

use super::*;

pub(super) const ISSUER: &str = "https://issuer.test";
pub(super) const AUDIENCE: &str = "idemkey";
pub(super) const ROLES: [&str; 3] = ["client", "viewer", "admin"];

/// Who signs `header.payload`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Signer {
    Hs256(&'static [u8]),
    Ed25519,
    Bytes(Vec<u8>),
}

/// The algorithm and signer of each configured kid this file can sign for.
pub(super) fn configured(kid: &str) -> Option<(&'static str, Signer)> {
    match kid {
        "hs-1" => Some(("HS256", Signer::Hs256(SECRET_1))),
        "hs-2" => Some(("HS256", Signer::Hs256(SECRET_2))),
        "ed-1" => Some(("EdDSA", Signer::Ed25519)),
        _ => None,
    }
}

pub(super) fn signature(signer: &Signer, message: &str) -> String {
    use jsonwebtoken::crypto::sign;
    match signer {
        Signer::Hs256(secret) => sign(
            message.as_bytes(),
            &EncodingKey::from_secret(secret),
            Algorithm::HS256,
        )
        .unwrap(),
        Signer::Ed25519 => {
            let key = EncodingKey::from_ed_pem(fixture!("ed-private.pem")).unwrap();
            sign(message.as_bytes(), &key, Algorithm::EdDSA).unwrap()
        }
        Signer::Bytes(bytes) => URL_SAFE_NO_PAD.encode(bytes),
    }
}

pub(super) fn signer() -> impl Strategy<Value = Signer> {
    let rsa_public: &'static [u8] = fixture!("rsa-public.pem");
    prop_oneof![
        3 => select(&[SECRET_1, SECRET_2][..]).prop_map(Signer::Hs256),
        1 => Just(Signer::Hs256(rsa_public)),
        1 => Just(Signer::Hs256(b"a-secret-nobody-configured-0123456789")),
        1 => Just(Signer::Ed25519),
        1 => prop_oneof![
            prop::collection::vec(any::<u8>(), 0..80),
            prop::collection::vec(any::<u8>(), 64),
        ]
        .prop_map(Signer::Bytes),
    ]
}

pub(super) fn junk() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e30f64..1e30).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

pub(super) fn string_from(options: &'static [&'static str]) -> impl Strategy<Value = Value> {
    select(options).prop_map(Value::from)
}

pub(super) fn header() -> impl Strategy<Value = Value> {
    let alg = prop_oneof![
        6 => string_from(&["HS256", "EdDSA"]),
        4 => string_from(&["HS384", "HS512", "RS256", "PS256", "ES256", "none", "None", "NONE", "", "hs256", "HS256 "]),
        1 => junk(),
    ];
    let kid = prop_oneof![
        6 => string_from(&["hs-1", "hs-2", "ed-1"]),
        3 => string_from(&["rsa-1", "ec-1", "hs-9", "", "HS-1", "hs-1 "]),
        1 => junk(),
    ];
    let extra = prop_oneof![any::<String>().prop_map(Value::String), junk()];
    (
        weighted(0.95, alg),
        weighted(0.9, kid),
        weighted(0.5, string_from(&["JWT", "at+jwt"])),
        weighted(0.05, Just(json!(["exp"]))),
        weighted(0.1, extra),
    )
        .prop_map(|(alg, kid, typ, crit, extra)| {
            let members = [
                ("alg", alg),
                ("kid", kid),
                ("typ", typ),
                ("crit", crit),
                ("x-extra", extra),
            ];
            Value::Object(
                members
                    .into_iter()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?)))
                    .collect(),
            )
        })
}

/// Mostly an honest header (a configured kid, its algorithm, its key),
/// otherwise any header with any signer.
pub(super) fn header_and_signer() -> impl Strategy<Value = (Value, Signer)> {
    let honest = (select(&["hs-1", "hs-2", "ed-1"][..]), any::<bool>()).prop_map(|(kid, typ)| {
        let (alg, signer) = configured(kid).expect("a configured kid");
        let mut header = json!({ "alg": alg, "kid": kid });
        if typ {
            header["typ"] = json!("JWT");
        }
        (header, signer)
    });
    prop_oneof![3 => honest, 2 => (header(), signer())]
}

/// A time claim: seconds from the moment the case runs, or a fixed value.
#[derive(Debug, Clone)]
pub(super) enum Time {
    After(i64),
    HalfAfter(i64),
    Fixed(Value),
}

impl Time {
    pub(super) fn at(&self, now: i64) -> Value {
        match self {
            Time::After(s) => json!(now + s),
            Time::HalfAfter(s) => json!((now + s) as f64 + 0.5),
            Time::Fixed(v) => v.clone(),
        }
    }
}

pub(super) fn exp() -> impl Strategy<Value = Time> {
    prop_oneof![
        16 => (100i64..1_000_000).prop_map(Time::After),
        2 => Just(Time::After(-5)),
        2 => (100i64..1_000_000).prop_map(Time::HalfAfter),
        1 => (-1_000_000i64..-100).prop_map(Time::After),
        1 => prop_oneof![Just(json!(u64::MAX)), Just(json!(1e30)), Just(json!(-5)), Just(json!(-1.5)), junk()]
            .prop_map(Time::Fixed),
    ]
}

pub(super) fn nbf() -> impl Strategy<Value = Time> {
    prop_oneof![
        6 => (-1_000_000i64..0).prop_map(Time::After),
        2 => Just(Time::After(10)),
        1 => (100i64..1_000_000).prop_map(Time::After),
        1 => prop_oneof![Just(json!(-5)), junk()].prop_map(Time::Fixed),
    ]
}

/// Claims with each member valid, odd or missing.
#[derive(Debug, Clone)]
pub(super) struct Claims {
    exp: Option<Time>,
    nbf: Option<Time>,
    rest: Vec<(&'static str, Option<Value>)>,
}

impl Claims {
    pub(super) fn at(&self, now: i64) -> Value {
        let mut claims = Map::new();
        let times = [("exp", &self.exp), ("nbf", &self.nbf)];
        for (name, time) in times {
            if let Some(t) = time {
                claims.insert(name.to_owned(), t.at(now));
            }
        }
        for (name, value) in &self.rest {
            if let Some(v) = value {
                claims.insert((*name).to_owned(), v.clone());
            }
        }
        Value::Object(claims)
    }
}

pub(super) fn random_claims() -> impl Strategy<Value = Claims> {
    let iss = prop_oneof![18 => Just(json!(ISSUER)), 1 => Just(json!([ISSUER])), 1 => junk()];
    let aud = prop_oneof![
        14 => Just(json!(AUDIENCE)),
        4 => Just(json!(["x", AUDIENCE])),
        1 => string_from(&["x", "idemkey "]),
        1 => Just(json!([])),
        1 => junk(),
    ];
    let tenant = prop_oneof![
        16 => "[a-z0-9][a-z0-9._:-]{0,10}".prop_map(Value::String),
        1 => "[a-z/ é:.-]{0,5}".prop_map(Value::String),
        1 => junk(),
    ];
    let roles = prop_oneof![
        16 => prop::collection::vec(string_from(&ROLES), 0..4).prop_map(Value::Array),
        1 => prop::collection::vec(string_from(&["client", "root", "Admin", "viewer "]), 1..3)
            .prop_map(Value::Array),
        1 => junk(),
    ];
    let sub = prop_oneof![
        16 => "[a-z-]{0,12}".prop_map(Value::String),
        1 => (255usize..258).prop_map(|n| json!("s".repeat(n))),
        1 => junk(),
    ];
    (
        weighted(0.98, exp()),
        weighted(0.3, nbf()),
        (
            weighted(0.98, iss),
            weighted(0.98, aud),
            weighted(0.98, tenant),
        ),
        (
            weighted(0.8, roles),
            weighted(0.5, sub),
            weighted(0.2, junk()),
        ),
    )
        .prop_map(
            |(exp, nbf, (iss, aud, tenant), (roles, sub, extra))| Claims {
                exp,
                nbf,
                rest: vec![
                    ("iss", iss),
                    ("aud", aud),
                    ("tenant", tenant),
                    ("roles", roles),
                    ("sub", sub),
                    ("x-extra", extra),
                ],
            },
        )
}
