//! A client service charging a card through idemkey, as a real process that
//! can die at any of the seeds' failure windows.
//!
//! Usage: `charge-worker IDEMKEY_URL TOKEN KEY PROVIDER_URL CRASH_AT`, where
//! CRASH_AT is `none`, `before_claim`, `after_claim`, `after_effect` or
//! `after_complete`. It follows the documented recipe: claim; on `claimed`
//! charge with the effect id as the provider's idempotency key; on
//! `recovering` first ask the provider whether that effect id was charged
//! (the provider does not deduplicate, so this lookup is all that stands
//! between a takeover and a second charge);
//! then complete. It prints the final answer's JSON and exits 0, or exits
//! 86 where it was told to crash (the answer it just got is never read).

use std::process::exit;

use serde_json::{json, Value};

const CRASH: i32 = 86;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, idemkey, token, key, provider, crash_at] = &args[..] else {
        eprintln!("usage: charge-worker IDEMKEY_URL TOKEN KEY PROVIDER_URL CRASH_AT");
        exit(2);
    };
    let crash = |point: &str| {
        if crash_at == point {
            exit(CRASH);
        }
    };
    let http = reqwest::Client::new();
    let base = format!("{idemkey}/v1/keys/charges.create/{key}");
    let post = |url: String, body: Value| {
        let http = http.clone();
        async move {
            let r = http
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .expect("idemkey");
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.expect("JSON"))
        }
    };

    crash("before_claim");
    let request = json!({"request": {"amount": "25.00", "currency": "EUR"}, "lease_ms": 1000, "wait_ms": 10000});
    let (status, claim) = post(format!("{base}/claim"), request).await;
    let charge_id = match claim["status"].as_str() {
        Some("completed") => {
            println!("{claim}");
            return;
        }
        Some("claimed") => {
            crash("after_claim");
            charge(&http, provider, &claim["effect_id"]).await
        }
        Some("recovering") => {
            // The previous owner may have charged already: look before acting.
            let effect_id = claim["effect_id"].as_str().unwrap();
            let found = http
                .get(format!("{provider}/charges/{effect_id}"))
                .send()
                .await
                .unwrap();
            if found.status().is_success() {
                found.json::<Value>().await.unwrap()["id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            } else {
                charge(&http, provider, &claim["effect_id"]).await
            }
        }
        _ => {
            eprintln!("unexpected claim answer {status}: {claim}");
            exit(1);
        }
    };
    crash("after_effect");
    let outcome =
        json!({"status_code": 201, "body": {"charge": charge_id}, "resource_id": charge_id});
    let body = json!({"owner_token": claim["owner_token"], "outcome": outcome});
    let (status, completed) = post(format!("{base}/complete"), body).await;
    crash("after_complete");
    if status != 200 {
        eprintln!("complete answered {status}: {completed}");
        exit(1);
    }
    println!("{completed}");
}

async fn charge(http: &reqwest::Client, provider: &str, effect_id: &Value) -> String {
    let r = http
        .post(format!("{provider}/charges"))
        .header("reference", effect_id.as_str().unwrap())
        .send()
        .await
        .expect("provider");
    r.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}
