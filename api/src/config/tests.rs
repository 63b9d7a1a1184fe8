//! The configuration parser: defaults, errors that name their variable,
//! and the secrets' rules (length, placeholders, private files).

use super::*;
use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

fn bytes(secret: &SecretSlice<u8>) -> &[u8] {
    secret.expose_secret()
}

pub(super) fn config(vars: &[(&str, &str)]) -> anyhow::Result<Config> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Config::from_vars(|name| map.get(name).cloned())
}

pub(super) const SECRETS: (&str, &str) = (
    "IDEMKEY_JWT_SECRETS",
    "k1=0123456789abcdef0123456789abcdef,k2=fedcba9876543210fedcba9876543210",
);
pub(super) const EFFECT: (&str, &str) =
    ("IDEMKEY_SECRET", "effect-id-key-for-unit-tests-0123456789");
pub(super) const SESSION: (&str, &str) = (
    "IDEMKEY_SESSION_SECRET",
    "session-key-for-unit-tests-0123456789",
);

#[test]
fn defaults_follow_the_contract() {
    let c = config(&[SECRETS, EFFECT, SESSION]).unwrap();
    assert_eq!(c.listen, "127.0.0.1:8080");
    assert_eq!(c.metrics_listen, None);
    assert_eq!(c.jwt_issuer, "idemkey");
    assert_eq!(c.jwt_audience, "idemkey");
    assert_eq!(c.data_dir, PathBuf::from("./data"));
    assert_eq!(c.database_url.expose_secret(), "sqlite://./data/idemkey.db");
    assert!(c.workers);
    assert_eq!(c.worker_interval, Duration::from_secs(30));
    assert_eq!(c.jwt_secrets[0].0, "k1");
    assert_eq!(c.jwt_secrets.len(), 2);
    assert!(c.redis_url.is_none());
    assert_eq!(
        c.archive,
        ArchiveLocation::LocalDir(PathBuf::from("./data/archive"))
    );
    let c = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        ("IDEMKEY_REDIS_URL", "redis://127.0.0.1:6379/2"),
    ]);
    assert_eq!(
        c.unwrap().redis_url.as_ref().map(|url| url.expose_secret()),
        Some("redis://127.0.0.1:6379/2")
    );
}

#[test]
fn errors_name_the_variable_at_fault() {
    let cases = [
        ("IDEMKEY_LISTEN", "nonsense"),
        ("IDEMKEY_METRICS_LISTEN", "9090"),
        ("IDEMKEY_WORKERS", "maybe"),
        ("IDEMKEY_CACHE", "maybe"),
        ("IDEMKEY_WORKER_INTERVAL", "soon"),
        ("IDEMKEY_WEBHOOK_ATTEMPTS", "0"),
        ("IDEMKEY_WEBHOOK_ATTEMPTS", "51"),
        ("IDEMKEY_WEBHOOK_BACKOFF", "0s"),
        ("IDEMKEY_JWT_SECRETS", "k1"),
        ("IDEMKEY_JWT_SECRETS", "k1=short"),
        ("IDEMKEY_SECRET", "short"),
        ("IDEMKEY_SECRET", "0123456789abcdef"),
        (
            "IDEMKEY_SECRET",
            "CHANGE-ME-openssl-rand-hex-32-and-paste-it",
        ),
        ("IDEMKEY_SECRET", "secretsecretsecretsecretsecretsecret"),
        (
            "IDEMKEY_JWT_SECRETS",
            "k1=changeme-changeme-changeme-changeme",
        ),
        (
            "IDEMKEY_JWT_SECRETS",
            "k1=example-secret-0123456789abcdef01234",
        ),
        ("IDEMKEY_SESSION_SECRET", "short"),
        (
            "IDEMKEY_SESSION_SECRET",
            "Placeholder-0123456789abcdef0123456789",
        ),
        (
            "IDEMKEY_SESSION_SECRET",
            "session-key-for-unit-tests-0123456789,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        ),
        ("IDEMKEY_REDIS_URL", "rediss://cache.internal:6380"),
        ("IDEMKEY_REDIS_URL", "127.0.0.1:6379"),
        ("IDEMKEY_ARCHIVE_URL", "https://s3.amazonaws.com/bucket"),
        ("IDEMKEY_ARCHIVE_URL", "/var/lib/idemkey/archive"),
        ("IDEMKEY_ARCHIVE_URL", "file://"),
        ("IDEMKEY_ARCHIVE_URL", "s3://"),
        ("IDEMKEY_ARCHIVE_URL", "s3://Upper_Case/prefix"),
    ];
    for (name, value) in cases {
        let err = config(&[SECRETS, EFFECT, SESSION, (name, value)]).unwrap_err();
        assert!(format!("{err:#}").contains(name), "{name}: {err:#}");
    }
}

#[test]
fn the_archive_url_picks_s3_or_a_local_directory() {
    let s3 = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        ("IDEMKEY_ARCHIVE_URL", "s3://idemkey-prod/tiered/eu/"),
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:3900"),
        ("AWS_REGION", "garage"),
        ("AWS_ACCESS_KEY_ID", "GK123"),
        ("AWS_SECRET_ACCESS_KEY", "s3cr3t"),
    ])
    .unwrap();
    let ArchiveLocation::S3 {
        bucket,
        prefix,
        settings,
    } = s3.archive
    else {
        panic!("expected an S3 archive")
    };
    assert_eq!(
        (bucket.as_str(), prefix.as_str()),
        ("idemkey-prod", "tiered/eu")
    );
    assert_eq!(settings.endpoint.as_deref(), Some("http://127.0.0.1:3900"));
    assert_eq!(settings.region.as_deref(), Some("garage"));
    assert_eq!(settings.access_key_id.as_deref(), Some("GK123"));
    assert!(!format!("{settings:?}").contains("s3cr3t"));

    let bare = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        ("IDEMKEY_ARCHIVE_URL", "s3://bucket"),
    ])
    .unwrap();
    assert!(matches!(
        bare.archive,
        ArchiveLocation::S3 { ref prefix, ref settings, .. }
            if prefix.is_empty() && *settings == Default::default()
    ));

    let file = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        ("IDEMKEY_ARCHIVE_URL", "file:///srv/archive"),
    ]);
    assert_eq!(
        file.unwrap().archive,
        ArchiveLocation::LocalDir(PathBuf::from("/srv/archive"))
    );
}

#[test]
fn half_a_pair_of_aws_credentials_is_refused() {
    let s3 = ("IDEMKEY_ARCHIVE_URL", "s3://bucket/p");
    let err = config(&[SECRETS, EFFECT, SESSION, s3, ("AWS_ACCESS_KEY_ID", "GK1")]).unwrap_err();
    assert!(
        format!("{err:#}").contains("AWS_SECRET_ACCESS_KEY"),
        "{err:#}"
    );
    let err = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        s3,
        ("AWS_ENDPOINT_URL", "localhost:3900"),
    ])
    .unwrap_err();
    assert!(format!("{err:#}").contains("AWS_ENDPOINT_URL"), "{err:#}");
    // The AWS variables matter only for an s3:// archive.
    assert!(config(&[SECRETS, EFFECT, SESSION, ("AWS_ACCESS_KEY_ID", "GK1")]).is_ok());
}

#[test]
fn a_jwks_file_alone_brings_no_development_secret() {
    let c = config(&[
        EFFECT,
        SESSION,
        ("IDEMKEY_JWT_JWKS_FILE", "/etc/idemkey/jwks.json"),
    ])
    .unwrap();
    assert!(c.jwt_secrets.is_empty());
}

#[test]
fn generated_secrets_persist_in_the_data_dir() {
    let dir = std::env::temp_dir().join(format!("idemkey-config-{}", rand::random::<u64>()));
    let dir_s = dir.to_str().unwrap();
    let first = config(&[("IDEMKEY_DATA_DIR", dir_s)]).unwrap();
    let second = config(&[("IDEMKEY_DATA_DIR", dir_s)]).unwrap();
    let jwt = |c: &Config| -> Vec<(String, Vec<u8>)> {
        (c.jwt_secrets.iter())
            .map(|(kid, secret)| (kid.clone(), bytes(secret).to_vec()))
            .collect()
    };
    let sessions = |c: &Config| -> Vec<Vec<u8>> {
        c.session_secrets
            .iter()
            .map(|s| bytes(s).to_vec())
            .collect()
    };
    assert_eq!(bytes(&first.effect_secret), bytes(&second.effect_secret));
    assert_eq!(jwt(&first), jwt(&second));
    assert_eq!(sessions(&first), sessions(&second));
    assert_eq!(first.jwt_secrets[0].0, DEV_KID);
    assert_ne!(bytes(&first.effect_secret), bytes(&first.jwt_secrets[0].1));
    assert_ne!(
        bytes(&first.effect_secret),
        bytes(&first.session_secrets[0])
    );
    assert_ne!(
        bytes(&first.jwt_secrets[0].1),
        bytes(&first.session_secrets[0])
    );
    fs::remove_dir_all(dir).unwrap();
}

fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("idemkey-config-{:016x}", rand::random::<u64>()))
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().mode() & 0o777
}

#[test]
fn the_data_dir_and_generated_secrets_are_private() {
    let dir = scratch_dir().join("data");
    config(&[("IDEMKEY_DATA_DIR", dir.to_str().unwrap())]).unwrap();

    assert_eq!(mode(&dir), 0o700);
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["effect-secret", "jwt-dev-secret", "session-secret"]);
    for name in names {
        let path = dir.join(&name);
        assert_eq!(mode(&path), 0o600, "{name}");
        assert_eq!(
            fs::read(&path).unwrap().len(),
            64,
            "{name}: 32 random bytes in hex"
        );
    }
    fs::remove_dir_all(dir.parent().unwrap()).unwrap();
}

#[test]
fn a_secret_file_others_may_read_or_too_short_or_a_link_stops_start_up() {
    let dir = scratch_dir();
    let vars = [
        SECRETS,
        SESSION,
        ("IDEMKEY_DATA_DIR", dir.to_str().unwrap()),
    ];
    config(&vars).unwrap();
    let file = dir.join("effect-secret");

    fs::set_permissions(&file, fs::Permissions::from_mode(0o640)).unwrap();
    let err = format!("{:#}", config(&vars).unwrap_err());
    assert!(
        err.contains("IDEMKEY_SECRET") && err.contains("0640"),
        "{err}"
    );
    assert!(err.contains("chmod 600"), "says how to fix it: {err}");

    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    fs::write(&file, "0123456789abcdef").unwrap();
    let err = format!("{:#}", config(&vars).unwrap_err());
    assert!(
        err.contains("IDEMKEY_SECRET") && err.contains("16 bytes"),
        "{err}"
    );

    fs::remove_file(&file).unwrap();
    let elsewhere = dir.join("elsewhere");
    fs::write(&elsewhere, "a-secret-kept-somewhere-else-0123456789").unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let err = format!("{:#}", config(&vars).unwrap_err());
    assert!(err.contains("symbolic link"), "{err}");
    fs::remove_dir_all(dir).unwrap();
}

#[test]
fn every_secret_is_at_least_32_bytes_and_no_placeholder() {
    for weak in [
        "0123456789abcdef0123456789abcde",
        "CHANGE-ME-openssl-rand-hex-32-0123456789",
        "change_me_0123456789abcdef0123456789abc",
        "ChangeMe0123456789abcdef0123456789abcd",
        "EXAMPLE-0123456789abcdef0123456789abcdef",
        "placeholder-0123456789abcdef0123456789",
        "SecretSecretSecretSecretSecretSecret",
        "00000000000000000000000000000000",
    ] {
        assert!(
            weakness(weak.as_bytes()).is_some(),
            "{weak} must be refused"
        );
    }
    assert_eq!(weakness(b"3f9a1c0e5b7d2a4f6e8c0b1d3f5a7c9e"), None);
    assert_eq!(weakness(EFFECT.1.as_bytes()), None);
}

/// The example Secret of deploy/k8s must be replaced before use: the
/// server refuses every one of its values as they stand.
#[test]
fn the_shipped_example_secrets_are_refused() {
    let example = include_str!("../../../deploy/k8s/secret.example.yaml");
    let value = |name: &str| -> String {
        let line = example
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name}:")))
            .unwrap_or_else(|| panic!("{name} in the example"));
        let raw = line.split_once(':').unwrap().1.trim();
        raw.trim_matches('"').to_owned()
    };
    for name in [
        "IDEMKEY_JWT_SECRETS",
        "IDEMKEY_SECRET",
        "IDEMKEY_SESSION_SECRET",
    ] {
        let v = value(name);
        let mut vars = vec![SECRETS, EFFECT, SESSION];
        vars.retain(|(n, _)| *n != name);
        vars.push((name, &v));
        let err = format!("{:#}", config(&vars).unwrap_err());
        assert!(err.contains(name), "{name}={v}: {err}");
    }
}
