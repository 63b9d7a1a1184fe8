//! `/metrics` series that need a whole request to show: claim latency by
//! answer, and outcome sizes.

use idemkey_tests::TestApp;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claims_are_timed_by_answer_and_outcomes_are_sized() {
    // Arrange
    let app = TestApp::spawn().await;
    let outcome = json!({"status_code": 201, "body": {"id": "ch_1"}});

    // Act
    let owner = app
        .claim("charges.create", "k1", json!({"a": 1}))
        .await
        .owner_token();
    app.complete("charges.create", "k1", &owner, outcome.clone())
        .await
        .assert(200, "completed");
    app.claim("charges.create", "k1", json!({"a": 1}))
        .await
        .assert(200, "completed");
    app.claim("charges.create", "k1", json!({"a": 2}))
        .await
        .assert(422, "key_reused");

    // Assert
    let m = app.metrics().await;
    for status in ["claimed", "completed", "key_reused"] {
        let series = format!("idemkey_claim_seconds_count{{status=\"{status}\"}}");
        assert_eq!(m.get(&series), 1.0, "{series}");
    }
    assert!(m.get("idemkey_claim_seconds_sum{status=\"claimed\"}") > 0.0);
    assert_eq!(m.get("idemkey_outcome_bytes_count"), 1.0);
    assert_eq!(
        m.get("idemkey_outcome_bytes_sum"),
        outcome.to_string().len() as f64
    );
}
