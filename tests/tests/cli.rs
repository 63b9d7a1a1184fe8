//! The `idemkey` command line: subcommands, the optional config file, and
//! errors that name the variable at fault.

use std::collections::HashMap;

use idemkey_api::auth::{AuthSettings, Verifier};
use idemkey_tests::db::{execute, fresh_database};
use idemkey_tests::process::binary;
use tokio::process::Command;

fn scratch_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("idemkey-cli-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn idemkey(
    dir: &std::path::Path,
    env: &HashMap<&str, String>,
    args: &[&str],
) -> std::process::Output {
    Command::new(binary())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .envs(env)
        .output()
        .await
        .expect("run idemkey")
}

#[tokio::test]
async fn token_reads_its_secret_from_the_config_file_and_prints_only_the_jwt() {
    let dir = scratch_dir();
    let secret = "from-the-file-0123456789abcdef-0123456789";
    std::fs::write(
        dir.join("idemkey.env"),
        format!("# test\nIDEMKEY_JWT_SECRETS=filekid={secret}\n"),
    )
    .unwrap();
    let env = HashMap::from([("IDEMKEY_CONFIG_FILE", "idemkey.env".to_owned())]);

    let out = idemkey(
        &dir,
        &env,
        &[
            "token",
            "--tenant",
            "acme",
            "--roles",
            "client,viewer",
            "--ttl",
            "90s",
        ],
    )
    .await;

    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "only the token: {stdout:?}");
    let verifier = Verifier::new(&AuthSettings {
        issuer: "idemkey".into(),
        audience: "idemkey".into(),
        hs256: vec![("filekid".into(), secret.as_bytes().to_vec())],
        jwks: None,
    })
    .unwrap();
    let principal = verifier
        .verify(stdout.trim())
        .expect("signed with the file's secret");
    assert_eq!(principal.tenant.as_str(), "acme");
    assert!(
        !dir.join("data/jwt-dev-secret").exists(),
        "no development JWT secret was generated"
    );
}

#[tokio::test]
async fn a_wrong_value_is_an_error_that_names_its_variable() {
    let dir = scratch_dir();
    for (name, value) in [
        ("IDEMKEY_WORKERS", "maybe"),
        ("IDEMKEY_LISTEN", "not an address"),
        ("IDEMKEY_WORKER_INTERVAL", "soon"),
        ("IDEMKEY_DATABASE_URL", "mysql://localhost/x"),
        ("IDEMKEY_SECRET", "twenty-bytes-secret!"),
        (
            "IDEMKEY_SECRET",
            "CHANGE-ME replace this text with the output of: openssl rand -hex 32",
        ),
        (
            "IDEMKEY_JWT_SECRETS",
            "k1=changeme-changeme-changeme-changeme",
        ),
        (
            "IDEMKEY_SESSION_SECRET",
            "example-session-secret-0123456789abcdef",
        ),
    ] {
        let env = HashMap::from([(name, value.to_owned())]);

        let out = idemkey(&dir, &env, &["migrate"]).await;

        assert!(!out.status.success(), "{name}={value} must fail");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(name), "{name}: {stderr}");
    }
}

#[tokio::test]
async fn migrate_creates_the_schema_and_is_idempotent() {
    let url = fresh_database().await;
    let env = HashMap::from([("IDEMKEY_DATABASE_URL", url.clone())]);
    let dir = scratch_dir();

    for _ in 0..2 {
        let out = idemkey(&dir, &env, &["migrate"]).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    assert_eq!(
        execute(&url, "insert into key_release (tenant, operation, key, attempt, actor, history) values ('t', 'o', 'k', 1, 'a', '[]')").await,
        1
    );
}

#[tokio::test]
async fn a_generated_secret_others_can_read_stops_the_server_with_the_fix() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch_dir();
    let out = idemkey(&dir, &HashMap::new(), &["migrate"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let secret = dir.join("data/effect-secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();

    let out = idemkey(&dir, &HashMap::new(), &["migrate"]).await;

    assert!(!out.status.success(), "a 0644 secret file must stop it");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("IDEMKEY_SECRET") && stderr.contains("chmod 600"),
        "{stderr}"
    );
}

#[tokio::test]
async fn token_mints_a_metrics_token_that_scrapes_and_nothing_more() {
    let dir = scratch_dir();
    let secret = "cli-metrics-secret-3f9a1c0e5b7d2a4f6e8c0b1d";
    let env = HashMap::from([("IDEMKEY_JWT_SECRETS", format!("k1={secret}"))]);

    let out = idemkey(
        &dir,
        &env,
        &["token", "--tenant", "ops", "--roles", "metrics"],
    )
    .await;

    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verifier = Verifier::new(&AuthSettings {
        issuer: "idemkey".into(),
        audience: "idemkey".into(),
        hs256: vec![("k1".into(), secret.as_bytes().to_vec())],
        jwks: None,
    })
    .unwrap();
    let principal = verifier
        .verify(String::from_utf8(out.stdout).unwrap().trim())
        .expect("a valid token");
    assert_eq!(principal.roles.to_string(), "metrics");
    assert!(principal.can(&[idemkey_api::auth::Role::Metrics]));
    assert!(!principal.can(&[idemkey_api::auth::Role::Client]));
}
