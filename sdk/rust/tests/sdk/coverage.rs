//! Every scenario of sdk/scenarios.json is named by a test (its name is the
//! id, or starts with the id and `_`), and every problem code of
//! docs/protocol.md has its own error variant.

use std::path::{Path, PathBuf};

use idemkey_client::{Error, Problem, PROBLEM_CODES};
use serde_json::{json, Value};

fn sdk_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The names of the `#[tokio::test]` / `#[test]` functions in this suite.
fn test_names() -> Vec<String> {
    let dir = sdk_dir().join("tests/sdk");
    let mut names = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs") && !p.ends_with("coverage.rs"))
        .collect();
    files.sort();
    for f in files {
        let src = std::fs::read_to_string(&f).expect("test source");
        let mut attributed = false;
        for line in src.lines().map(str::trim) {
            if line.starts_with("#[tokio::test") || line == "#[test]" {
                attributed = true;
            } else if attributed {
                if let Some(rest) = line
                    .strip_prefix("async fn ")
                    .or_else(|| line.strip_prefix("fn "))
                {
                    names.push(rest.split('(').next().unwrap_or_default().to_owned());
                    attributed = false;
                }
            }
        }
    }
    names
}

fn scenario_ids() -> Vec<String> {
    let text =
        std::fs::read_to_string(sdk_dir().join("../scenarios.json")).expect("scenarios.json");
    let v: Value = serde_json::from_str(&text).expect("json");
    let ids: Vec<String> = v["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_owned())
        .collect();
    assert!(!ids.is_empty());
    ids
}

fn named(id: &str, names: &[String]) -> bool {
    names
        .iter()
        .any(|n| n == id || n.starts_with(&format!("{id}_")))
}

#[test]
fn every_scenario_is_named_by_a_test() {
    let names = test_names();
    let missing: Vec<String> = scenario_ids()
        .into_iter()
        .filter(|id| !named(id, &names))
        .collect();
    assert!(
        missing.is_empty(),
        "scenarios with no test named after them: {missing:?}"
    );
}

#[test]
fn the_coverage_check_fails_for_a_missing_id() {
    let names = test_names();
    assert!(names.len() > 15, "{names:?}");
    assert!(!named("no_such_scenario", &names));
    // An id must begin the name, not sit inside it.
    assert!(!named(
        "effect_once",
        &["claimed_runs_effect_once".to_owned()]
    ));
}

fn protocol_codes(doc: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(doc).expect("protocol.md");
    let section = text.split("\n## Errors\n").nth(1).expect("Errors section");
    let section = section.split("\n## ").next().unwrap_or_default();
    section
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("| `")?;
            let (code, tail) = rest.split_once("` | ")?;
            tail.chars()
                .take(3)
                .all(|c| c.is_ascii_digit())
                .then(|| code.to_owned())
        })
        .collect()
}

#[test]
fn every_problem_code_has_its_own_error_variant() {
    let codes = protocol_codes(&sdk_dir().join("../../docs/protocol.md"));
    assert!(codes.len() > 20, "{codes:?}");
    let mut ours: Vec<&str> = PROBLEM_CODES.to_vec();
    ours.sort_unstable();
    let mut theirs: Vec<&str> = codes.iter().map(String::as_str).collect();
    theirs.sort_unstable();
    assert_eq!(ours, theirs);
    let mut variants = Vec::new();
    for code in &codes {
        let body = json!({"code": code, "status": 400, "title": "t", "request_id": "r1"});
        let err = Error::from_problem(Problem::from_body(400, &body), None);
        assert!(
            !matches!(err, Error::UnexpectedResponse { .. }),
            "{code} has no variant"
        );
        assert_eq!(err.code(), code);
        assert_eq!(err.problem().and_then(|p| p.request_id()), Some("r1"));
        variants.push(std::mem::discriminant(&err));
    }
    variants.dedup();
    let distinct: std::collections::HashSet<_> = variants.iter().collect();
    assert_eq!(distinct.len(), codes.len(), "two codes share a variant");
    let unknown = Error::from_problem(Problem::from_body(418, &json!({"code": "teapot"})), None);
    assert!(matches!(
        unknown,
        Error::UnexpectedResponse { status: 418, .. }
    ));
    assert_eq!(unknown.code(), "teapot");
}
