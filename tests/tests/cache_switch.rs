//! `IDEMKEY_CACHE=off` keeps no outcomes (every replay reads the database),
//! for measuring what the cache saves; answers are the same either way.

use idemkey_tests::TestApp;
use serde_json::json;

async fn replay_three_times(app: &TestApp) -> String {
    let token = app.claim("c.x", "k1", json!({"a": 1})).await.owner_token();
    app.complete(
        "c.x",
        "k1",
        &token,
        json!({"status_code": 200, "body": 1.50}),
    )
    .await
    .assert(200, "completed");
    let mut last = String::new();
    for _ in 0..3 {
        let replay = app.claim("c.x", "k1", json!({"a": 1})).await;
        replay.assert(200, "completed");
        last = replay.text;
    }
    last
}

#[tokio::test]
async fn with_the_cache_off_replays_read_the_database_and_answer_the_same() {
    let on = TestApp::spawn().await;
    let off = TestApp::spawn_with(|v| {
        v.insert("IDEMKEY_CACHE".into(), "off".into());
    })
    .await;

    let with_cache = replay_three_times(&on).await;
    let without = replay_three_times(&off).await;

    assert!(
        on.metrics().await.hits("local") >= 1.0,
        "the default cache serves replays"
    );
    assert_eq!(off.metrics().await.hits("local"), 0.0);
    let outcome =
        |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap()["outcome"].clone();
    assert_eq!(outcome(&with_cache), outcome(&without));
}
