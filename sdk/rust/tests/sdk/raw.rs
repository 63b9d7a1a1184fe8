//! `send_json`: any call by path, answering the API's JSON as the server
//! sent it — what the operator CLI's `--json` prints.

use idemkey_client::{new_key, Claim, ClaimOptions, Error, Method, Protected};
use serde_json::json;

use crate::support::TestServer;

#[tokio::test]
async fn send_json_answers_the_servers_json_unchanged_and_the_same_typed_errors() {
    let server = TestServer::start().await;
    let client = server.client();
    let key = format!("order/7?{}", new_key());
    let protected = Protected::Request(json!({"amount": "5.00"}));
    let Claim::Owned(_) = client
        .claim("charges.create", &key, &protected, &ClaimOptions::default())
        .await
        .expect("claim")
    else {
        panic!("not owned")
    };
    let path = format!(
        "/v1/keys/charges.create/{}",
        idemkey_client::encode_segment(&key)
    );

    let raw = client
        .send_json(Method::GET, &path, None)
        .await
        .expect("lookup");
    let typed = client
        .lookup("charges.create", &key)
        .await
        .expect("typed lookup")
        .expect("a record");

    // Timestamps as the server wrote them (milliseconds and `Z`), members
    // the SDK's types do not model included.
    let created = raw["created_at"].as_str().expect("created_at");
    assert!(created.ends_with('Z') && created.len() == 24, "{created}");
    assert_eq!(raw["state"], "in_progress");
    assert_eq!(raw["effect_id"], typed.effect_id.as_str());
    assert_eq!(raw["key"], key.as_str());
    println!(
        "send_json lookup: {} members",
        raw.as_object().map_or(0, |o| o.len())
    );

    let page = client
        .send_json(Method::GET, "/v1/keys?state=in_progress&limit=1", None)
        .await
        .expect("list");
    assert_eq!(page["items"][0]["key"], key.as_str());

    let missing = client
        .send_json(Method::GET, "/v1/keys/charges.create/nothing-here", None)
        .await;
    assert!(
        matches!(&missing, Err(Error::NotFound(p)) if p.code == "not_found"),
        "{missing:?}"
    );
    let bad = client
        .send_json(Method::GET, "/v1/keys?older_than=soon", None)
        .await;
    assert!(
        matches!(&bad, Err(Error::InvalidQuery(p)) if p.code == "invalid_query"),
        "{bad:?}"
    );
    assert!(matches!(
        client.send_json(Method::GET, "v1/keys", None).await,
        Err(Error::Config(_))
    ));
}
