//! Reading the variables: each one's value reaches the configuration, an
//! empty one counts as unset, and no secret shows in `Debug` output.

use std::time::Duration;

use secrecy::ExposeSecret;

use super::tests::{config, EFFECT, SECRETS, SESSION};

#[test]
fn debug_output_shows_no_secret() {
    let c = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        (
            "IDEMKEY_DATABASE_URL",
            "postgres://idemkey:db-password-42@db/idemkey",
        ),
        ("IDEMKEY_REDIS_URL", "redis://:redis-password-42@cache:6379"),
    ])
    .unwrap();

    let shown = format!("{c:?}");

    for secret in [
        "0123456789abcdef0123456789abcdef",
        "fedcba9876543210fedcba9876543210",
        EFFECT.1,
        SESSION.1,
        "db-password-42",
        "redis-password-42",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("127.0.0.1:8080"), "{shown}");
}

#[test]
fn an_empty_variable_counts_as_unset() {
    let c = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        ("IDEMKEY_LISTEN", ""),
        ("IDEMKEY_CACHE", ""),
    ])
    .unwrap();

    assert_eq!(c.listen, "127.0.0.1:8080");
    assert!(c.cache);
}

#[test]
fn each_variable_is_read() {
    let c = config(&[
        SECRETS,
        EFFECT,
        SESSION,
        ("IDEMKEY_LISTEN", "127.0.0.1:9000"),
        ("IDEMKEY_METRICS_LISTEN", "127.0.0.1:9001"),
        ("IDEMKEY_CACHE", "off"),
        ("IDEMKEY_WORKERS", "off"),
        ("IDEMKEY_WORKER_INTERVAL", "2m"),
        ("IDEMKEY_WEBHOOK_ATTEMPTS", "4"),
        ("IDEMKEY_WEBHOOK_BACKOFF", "5s"),
        ("IDEMKEY_TENANT_RATE_LIMIT", "50"),
        ("IDEMKEY_DATABASE_POOL", "7"),
        ("IDEMKEY_BATCH_MAX", "1"),
        ("IDEMKEY_JWT_ISSUER", "issuer"),
        ("IDEMKEY_JWT_AUDIENCE", "audience"),
        ("IDEMKEY_TEST_FAILPOINT", "after_upload"),
        ("IDEMKEY_DATA_DIR", "/var/lib/idemkey"),
    ])
    .unwrap();

    assert_eq!(c.listen, "127.0.0.1:9000");
    assert_eq!(c.metrics_listen.as_deref(), Some("127.0.0.1:9001"));
    assert!(!c.cache);
    assert!(!c.workers);
    assert_eq!(c.worker_interval, Duration::from_secs(120));
    assert_eq!(
        (c.webhook_retries.attempts, c.webhook_retries.backoff),
        (4, Duration::from_secs(5))
    );
    assert_eq!(c.tenant_rate_limit.map(|n| n.get()), Some(50));
    assert_eq!(c.database_pool, 7);
    assert_eq!(c.batch_max, 1);
    assert_eq!(
        (c.jwt_issuer.as_str(), c.jwt_audience.as_str()),
        ("issuer", "audience")
    );
    assert_eq!(c.failpoint.as_deref(), Some("after_upload"));
    assert_eq!(
        c.database_url.expose_secret(),
        "sqlite:///var/lib/idemkey/idemkey.db"
    );
    let on = config(&[SECRETS, EFFECT, SESSION, ("IDEMKEY_WORKERS", "on")]).unwrap();
    assert!(on.workers && on.cache && on.tenant_rate_limit.is_none());
}
