//! The verification keys: HS256 secrets from configuration and public keys
//! from a JWKS file, each bound at load time to the one algorithm it may
//! verify.
//!
//! Loading fails (and the server does not start) on anything doubtful rather
//! than skipping it: a JWKS key without `kid` or `alg`, an `alg` that does not
//! fit the key type, an algorithm other than RS256 / ES256 / EdDSA, a
//! symmetric (`oct`) key in the JWKS file, an encryption key (`use: enc`), an
//! RSA modulus under 2048 bits, a malformed point, an HS256 secret shorter
//! than [`MIN_HS256_SECRET_BYTES`] (RFC 7518 §3.2) or a kid used twice.
//! Errors name the file and the key; they never contain secret material.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, ensure, Context};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::jwk::{
    AlgorithmParameters, EllipticCurve, Jwk, JwkSet, KeyAlgorithm, PublicKeyUse,
};
use jsonwebtoken::{Algorithm, DecodingKey};

/// RFC 7518 §3.2: an HS256 key must be at least as long as the hash (256 bits).
pub const MIN_HS256_SECRET_BYTES: usize = 32;

const MIN_RSA_MODULUS_BITS: usize = 2048;

const OCT_REFUSED: &str = "symmetric (oct) keys are not accepted from a JWKS file; \
    configure HS256 secrets with IDEMKEY_JWT_SECRETS";

/// Where the verification keys and the expected registered claims come from
/// (`IDEMKEY_JWT_ISSUER`, `IDEMKEY_JWT_AUDIENCE`, `IDEMKEY_JWT_SECRETS`,
/// `IDEMKEY_JWT_JWKS_FILE`).
#[derive(Clone)]
pub struct AuthSettings {
    /// The required `iss`.
    pub issuer: String,
    /// The required `aud`.
    pub audience: String,
    /// HS256 secrets as (kid, secret); the first one signs `idemkey token`.
    pub hs256: Vec<(String, Vec<u8>)>,
    /// A JWKS file of RS256 / ES256 / EdDSA public keys.
    pub jwks: Option<PathBuf>,
}

/// Never prints the secrets.
impl std::fmt::Debug for AuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<&str> = self.hs256.iter().map(|(kid, _)| kid.as_str()).collect();
        f.debug_struct("AuthSettings")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("hs256_kids", &kids)
            .field("jwks", &self.jwks)
            .finish()
    }
}

/// A key and the only algorithm it verifies.
#[derive(Clone)]
pub(super) struct VerifyingKey {
    pub alg: Algorithm,
    pub key: DecodingKey,
}

/// Every configured key by kid.
pub(super) fn load(settings: &AuthSettings) -> anyhow::Result<HashMap<String, VerifyingKey>> {
    let mut keys = HashMap::new();
    for (kid, secret) in &settings.hs256 {
        check_hs256_secret(kid, secret)?;
        let key = VerifyingKey {
            alg: Algorithm::HS256,
            key: DecodingKey::from_secret(secret),
        };
        ensure!(
            keys.insert(kid.clone(), key).is_none(),
            "HS256 kid {kid:?} is configured twice"
        );
    }
    if let Some(path) = &settings.jwks {
        for (kid, key) in load_jwks(path)? {
            ensure!(
                !keys.contains_key(&kid),
                "JWKS file {}: kid {kid:?} is already used by another key",
                path.display()
            );
            keys.insert(kid, key);
        }
    }
    ensure!(!keys.is_empty(), "no JWT verification keys are configured");
    Ok(keys)
}

pub(super) fn check_hs256_secret(kid: &str, secret: &[u8]) -> anyhow::Result<()> {
    ensure!(!kid.is_empty(), "an HS256 secret has an empty kid");
    ensure!(
        secret.len() >= MIN_HS256_SECRET_BYTES,
        "HS256 secret {kid:?} is {} bytes; at least {MIN_HS256_SECRET_BYTES} are required",
        secret.len()
    );
    Ok(())
}

fn load_jwks(path: &Path) -> anyhow::Result<Vec<(String, VerifyingKey)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading JWKS file {}", path.display()))?;
    let set: JwkSet = serde_json::from_str(&text)
        .with_context(|| format!("JWKS file {} is not a valid JWK set", path.display()))?;
    let mut keys = Vec::with_capacity(set.keys.len());
    for (i, jwk) in set.keys.iter().enumerate() {
        let kid = jwk.common.key_id.clone().unwrap_or_default();
        let key = load_jwk(jwk).with_context(|| {
            format!("JWKS file {}: key #{} (kid {kid:?})", path.display(), i + 1)
        })?;
        keys.push((kid, key));
    }
    Ok(keys)
}

fn load_jwk(jwk: &Jwk) -> anyhow::Result<VerifyingKey> {
    ensure!(
        jwk.common
            .key_id
            .as_deref()
            .is_some_and(|kid| !kid.is_empty()),
        "no kid"
    );
    if let Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_)) = &jwk.common.public_key_use {
        bail!("key is not for signatures (use must be \"sig\" or absent)");
    }
    let declared = jwk.common.key_algorithm.ok_or_else(|| anyhow!("no alg"))?;
    let alg = match (declared, &jwk.algorithm) {
        (_, AlgorithmParameters::OctetKey(_)) => bail!(OCT_REFUSED),
        (KeyAlgorithm::RS256, AlgorithmParameters::RSA(rsa)) => {
            let n = decode_b64("n", &rsa.n)?;
            let bits = n.len() * 8 - n.first().map_or(8, |b| b.leading_zeros() as usize);
            ensure!(
                bits >= MIN_RSA_MODULUS_BITS,
                "RSA modulus is {bits} bits; at least {MIN_RSA_MODULUS_BITS} are required"
            );
            ensure!(
                !decode_b64("e", &rsa.e)?.is_empty(),
                "RSA exponent is empty"
            );
            Algorithm::RS256
        }
        (KeyAlgorithm::ES256, AlgorithmParameters::EllipticCurve(ec)) => {
            ensure!(
                ec.curve == EllipticCurve::P256,
                "ES256 needs crv P-256, found {:?}",
                ec.curve
            );
            ensure!(
                decode_b64("x", &ec.x)?.len() == 32,
                "P-256 x must be 32 bytes"
            );
            ensure!(
                decode_b64("y", &ec.y)?.len() == 32,
                "P-256 y must be 32 bytes"
            );
            Algorithm::ES256
        }
        (KeyAlgorithm::EdDSA, AlgorithmParameters::OctetKeyPair(okp)) => {
            ensure!(
                okp.curve == EllipticCurve::Ed25519,
                "EdDSA needs crv Ed25519, found {:?}",
                okp.curve
            );
            ensure!(
                decode_b64("x", &okp.x)?.len() == 32,
                "Ed25519 x must be 32 bytes"
            );
            Algorithm::EdDSA
        }
        (KeyAlgorithm::RS256 | KeyAlgorithm::ES256 | KeyAlgorithm::EdDSA, _) => {
            bail!("alg {declared} does not fit the key type")
        }
        _ => bail!("alg {declared} is not supported; use RS256, ES256 or EdDSA"),
    };
    let key = DecodingKey::from_jwk(jwk).context("unusable key material")?;
    // The EC and Ed verifiers parse the point when they are built; building one
    // now turns a bad point into a start-up error instead of a 401 per request.
    jsonwebtoken::crypto::verify("AA", b"probe", &key, alg).context("unusable key material")?;
    Ok(VerifyingKey { alg, key })
}

fn decode_b64(field: &str, value: &str) -> anyhow::Result<Vec<u8>> {
    URL_SAFE_NO_PAD
        .decode(value)
        .with_context(|| format!("{field} is not base64url"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const JWKS: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/jwt/jwks.json"
    );

    fn settings(jwks: Option<PathBuf>) -> AuthSettings {
        AuthSettings {
            issuer: "idemkey".into(),
            audience: "idemkey".into(),
            hs256: vec![("hs-1".into(), vec![7; 32])],
            jwks,
        }
    }

    /// Writes a one-key JWKS to a temporary file and loads it.
    fn load_one(
        name: &str,
        key: serde_json::Value,
    ) -> anyhow::Result<HashMap<String, VerifyingKey>> {
        let path =
            std::env::temp_dir().join(format!("idemkey-jwks-{}-{name}.json", std::process::id()));
        std::fs::write(&path, json!({ "keys": [key] }).to_string()).unwrap();
        let result = load(&settings(Some(path.clone())));
        std::fs::remove_file(&path).unwrap();
        result
    }

    fn fixture_key(kid: &str) -> serde_json::Value {
        let set: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(JWKS).unwrap()).unwrap();
        set["keys"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kid"] == kid)
            .unwrap()
            .clone()
    }

    fn error_text(result: anyhow::Result<HashMap<String, VerifyingKey>>) -> String {
        format!("{:#}", result.err().expect("loading should fail"))
    }

    #[test]
    fn the_fixture_jwks_loads_each_key_with_its_own_algorithm() {
        let keys = load(&settings(Some(JWKS.into()))).unwrap();
        let alg = |kid: &str| keys[kid].alg;
        assert_eq!(
            [alg("hs-1"), alg("rsa-1"), alg("ec-1"), alg("ed-1")],
            [
                Algorithm::HS256,
                Algorithm::RS256,
                Algorithm::ES256,
                Algorithm::EdDSA
            ]
        );
    }

    #[test]
    fn a_missing_jwks_file_is_an_error_naming_the_file() {
        let text = error_text(load(&settings(Some("/nonexistent/jwks.json".into()))));
        assert!(text.contains("/nonexistent/jwks.json"), "{text}");
    }

    #[test]
    fn jwks_keys_need_a_kid_and_an_alg() {
        let mut key = fixture_key("rsa-1");
        key.as_object_mut().unwrap().remove("kid");
        assert!(error_text(load_one("nokid", key)).contains("no kid"));
        let mut key = fixture_key("ec-1");
        key.as_object_mut().unwrap().remove("alg");
        let text = error_text(load_one("noalg", key));
        assert!(
            text.contains("kid \"ec-1\"") && text.contains("no alg"),
            "{text}"
        );
    }

    #[test]
    fn a_jwks_alg_must_fit_the_key_type() {
        let mut key = fixture_key("ec-1");
        key["alg"] = json!("RS256");
        assert!(error_text(load_one("mismatch", key)).contains("does not fit the key type"));
    }

    #[test]
    fn algorithms_outside_the_allow_list_are_refused() {
        let mut key = fixture_key("rsa-1");
        key["alg"] = json!("PS256");
        assert!(error_text(load_one("ps256", key)).contains("not supported"));
    }

    #[test]
    fn symmetric_and_encryption_keys_are_refused_from_the_jwks_file() {
        let oct = json!({"kty": "oct", "kid": "oct-1", "alg": "HS256", "k": "c2VjcmV0"});
        assert!(error_text(load_one("oct", oct)).contains("symmetric"));
        let mut enc = fixture_key("rsa-1");
        enc["use"] = json!("enc");
        assert!(error_text(load_one("enc", enc)).contains("not for signatures"));
    }

    #[test]
    fn short_rsa_moduli_and_bad_points_are_refused() {
        let mut key = fixture_key("rsa-1");
        key["n"] = json!(URL_SAFE_NO_PAD.encode([0xc5; 128]));
        assert!(error_text(load_one("rsa1024", key)).contains("1024 bits"));
        let mut key = fixture_key("ec-1");
        key["y"] = json!(URL_SAFE_NO_PAD.encode([1; 32]));
        assert!(error_text(load_one("offcurve", key)).contains("unusable key material"));
    }

    #[test]
    fn a_kid_may_be_configured_only_once() {
        let mut key = fixture_key("rsa-1");
        key["kid"] = json!("hs-1");
        assert!(error_text(load_one("dup", key)).contains("already used"));
        let mut twice = settings(None);
        twice.hs256.push(("hs-1".into(), vec![8; 32]));
        assert!(error_text(load(&twice)).contains("configured twice"));
    }

    #[test]
    fn short_hs256_secrets_are_refused_without_printing_them() {
        let mut weak = settings(None);
        weak.hs256 = vec![("hs-weak".into(), b"hunter2".to_vec())];
        let text = error_text(load(&weak));
        assert!(
            text.contains("hs-weak") && !text.contains("hunter2"),
            "{text}"
        );
    }

    #[test]
    fn no_keys_at_all_is_an_error() {
        let mut none = settings(None);
        none.hs256.clear();
        assert!(error_text(load(&none)).contains("no JWT verification keys"));
    }
}
