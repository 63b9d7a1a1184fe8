use std::time::Duration;

use super::*;

fn parse(json: &str) -> Result<Policy, PolicyJsonError> {
    Policy::from_json(json.as_bytes())
}

/// The field an invalid policy is refused for, and its message.
fn refused(json: &str) -> (String, String) {
    match parse(json) {
        Err(PolicyJsonError::Invalid(e)) => (e.field, e.message),
        other => panic!("{json}: expected invalid_policy, got {other:?}"),
    }
}

#[test]
fn an_empty_policy_is_the_default_policy() {
    assert_eq!(parse("{}").unwrap(), Policy::default());
    let nulls = r#"{"replay_window": null, "lease": null, "fingerprint": null}"#;
    assert_eq!(parse(nulls).unwrap(), Policy::default());
}

#[test]
fn the_spec_example_reads_as_written() {
    let p = parse(
        r#"{"replay_window": "24h", "hot_retention": "1h", "lease": "30s", "max_lease": "1h",
            "max_wait": "10s", "max_outcome_bytes": 1048576, "on_lease_expiry": "takeover",
            "fingerprint": {"include": ["/amount", "/currency"], "exclude": [],
                            "decimal_fields": ["/amount"]}}"#,
    )
    .unwrap();
    assert_eq!(p.replay_window, Duration::from_secs(86_400));
    assert_eq!(p.fingerprint.include, ["/amount", "/currency"]);
    assert_eq!(p.fingerprint.decimal_fields, ["/amount"]);
}

#[test]
fn a_missing_hot_retention_is_one_hour_capped_at_the_window() {
    let p = parse(r#"{"replay_window": "10m"}"#).unwrap();
    assert_eq!(p.hot_retention, Duration::from_secs(600));
    let p = parse(r#"{"replay_window": "2h"}"#).unwrap();
    assert_eq!(p.hot_retention, Duration::from_secs(3600));
}

#[test]
fn a_missing_lease_is_thirty_seconds_capped_at_max_lease() {
    let p = parse(r#"{"max_lease": "10s"}"#).unwrap();
    assert_eq!(
        (p.lease, p.max_lease),
        (Duration::from_secs(10), Duration::from_secs(10))
    );
}

#[test]
fn the_canonical_form_has_every_member_and_reads_back_the_same() {
    let p = parse(
        r#"{"replay_window": "24h", "lease": "1500ms", "on_lease_expiry": "quarantine",
                     "fingerprint": {"exclude": ["/request_id"]}}"#,
    )
    .unwrap();
    let json = p.to_json();
    assert_eq!(
        json,
        r#"{"replay_window":"1d","hot_retention":"1h","lease":"1500ms","max_lease":"1h","max_wait":"10s","max_outcome_bytes":1048576,"on_lease_expiry":"quarantine","fingerprint":{"include":[],"exclude":["/request_id"],"decimal_fields":[]}}"#
    );
    assert_eq!(parse(&json).unwrap(), p);
}

#[test]
fn the_read_only_default_member_is_ignored_on_input() {
    assert_eq!(parse(r#"{"default": true}"#).unwrap(), Policy::default());
    assert_eq!(refused(r#"{"default": "yes"}"#).0, "default");
}

#[test]
fn every_invalid_value_names_its_field() {
    let cases = [
        (
            r#"{"replay_window": "1x"}"#,
            "replay_window",
            "must be a duration",
        ),
        (
            r#"{"replay_window": "500ms"}"#,
            "replay_window",
            "at least 1s",
        ),
        (r#"{"replay_window": "0s"}"#, "replay_window", "at least 1s"),
        (
            r#"{"replay_window": "366d"}"#,
            "replay_window",
            "must not exceed 365d",
        ),
        (
            r#"{"replay_window": 86400}"#,
            "replay_window",
            "invalid type",
        ),
        (
            r#"{"replay_window": "999999999999d"}"#,
            "replay_window",
            "must be a duration",
        ),
        (
            r#"{"replay_window": "1h", "hot_retention": "2h"}"#,
            "hot_retention",
            "hot_retention must not exceed replay_window (1h)",
        ),
        (
            r#"{"lease": "2h"}"#,
            "lease",
            "lease must not exceed max_lease (1h)",
        ),
        (r#"{"lease": "999ms"}"#, "lease", "at least 1s"),
        (r#"{"max_lease": "25h"}"#, "max_lease", "must not exceed 1d"),
        (r#"{"max_wait": "61s"}"#, "max_wait", "must not exceed 1m"),
        (
            r#"{"max_outcome_bytes": 0}"#,
            "max_outcome_bytes",
            "from 1 to 8388608",
        ),
        (
            r#"{"max_outcome_bytes": 8388609}"#,
            "max_outcome_bytes",
            "from 1 to",
        ),
        (
            r#"{"max_outcome_bytes": -1}"#,
            "max_outcome_bytes",
            "invalid value",
        ),
        (
            r#"{"max_outcome_bytes": 1.5}"#,
            "max_outcome_bytes",
            "invalid type",
        ),
        (
            r#"{"on_lease_expiry": "retry"}"#,
            "on_lease_expiry",
            "\"takeover\" or \"quarantine\"",
        ),
        (
            r#"{"fingerprint": {"include": ["amount"]}}"#,
            "fingerprint.include",
            "invalid JSON pointer \"amount\"",
        ),
        (
            r#"{"fingerprint": {"exclude": ["/a~2b"]}}"#,
            "fingerprint.exclude",
            "invalid JSON pointer",
        ),
        (
            r#"{"fingerprint": {"decimal_fields": ["/ok", "nope"]}}"#,
            "fingerprint.decimal_fields",
            "\"nope\"",
        ),
        (
            r#"{"fingerprint": {"include": [1]}}"#,
            "fingerprint.include[0]",
            "invalid type",
        ),
        (
            r#"{"fingerprint": {"include": "/a"}}"#,
            "fingerprint.include",
            "invalid type",
        ),
        (
            r#"{"fingerprint": {"salt": []}}"#,
            "fingerprint.salt",
            "unknown field `salt`",
        ),
        (
            r#"{"replay_windw": "1h"}"#,
            "replay_windw",
            "unknown field `replay_windw`",
        ),
        (
            r#"{"lease": "1s", "lease": "2s"}"#,
            "policy",
            "duplicate field `lease`",
        ),
    ];
    for (json, field, words) in cases {
        let (got_field, message) = refused(json);
        assert!(
            got_field.starts_with(field) && message.starts_with(&got_field),
            "{json}: field {got_field:?}, message {message:?}"
        );
        assert!(message.contains(words), "{json}: {message}");
    }
}

#[test]
fn too_many_or_too_long_pointers_are_refused() {
    let many: Vec<String> = (0..=MAX_POINTERS).map(|i| format!("/f{i}")).collect();
    let json = serde_json::json!({"fingerprint": {"exclude": many}}).to_string();
    assert_eq!(refused(&json).0, "fingerprint.exclude");
    let long = format!("/{}", "a".repeat(MAX_POINTER_BYTES));
    let json = serde_json::json!({"fingerprint": {"include": [long]}}).to_string();
    assert_eq!(refused(&json).0, "fingerprint.include");
}

#[test]
fn text_that_is_not_json_is_a_syntax_error() {
    for bad in ["", "{", r#"{"lease": "1s"} x"#] {
        assert!(
            matches!(parse(bad), Err(PolicyJsonError::Syntax(_))),
            "{bad:?}"
        );
    }
}
