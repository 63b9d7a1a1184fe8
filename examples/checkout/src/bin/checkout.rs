//! The checkout service: `POST /checkouts/{checkout}/pay` with
//! `{"amount": "25.00", "currency": "EUR"}` charges and ships once per
//! checkout id, and answers the one outcome (README.md).
//!
//! Configuration (environment):
//! - `CHECKOUT_LISTEN` (default 127.0.0.1:8090; port 0 picks one);
//! - `IDEMKEY_SERVER` (default http://127.0.0.1:8080) and `IDEMKEY_TOKEN`
//!   (a `client` token: `idemkey token --tenant shop --roles client`);
//! - `PAYMENTS_URL` (default http://127.0.0.1:8091);
//! - `CHECKOUT_LEASE_MS` (default 30000): each attempt's lease;
//! - `CHECKOUT_CRASH_AT`: test-only, see `checkout::crash`.
//!
//! Prints `checkout listening on ADDR` once bound.

use std::time::Duration;

use actix_web::{web, App, HttpResponse, HttpServer};
use checkout::pay::{Checkout, Order};
use checkout::payments::Payments;
use idemkey_client::{Client, Error, Via};
use serde_json::{json, Value};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

/// A problem answer for the shopper's page.
fn problem(status: u16, code: &str, retry: bool) -> HttpResponse {
    let mut r =
        HttpResponse::build(actix_web::http::StatusCode::from_u16(status).unwrap_or_default());
    if retry {
        r.insert_header(("retry-after", "1"));
    }
    r.content_type("application/problem+json")
        .body(json!({"status": status, "code": code}).to_string())
}

async fn pay(
    checkout: web::Data<Checkout>,
    id: web::Path<String>,
    body: web::Json<Value>,
) -> HttpResponse {
    let field = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let (Some(amount), Some(currency)) = (field("amount"), field("currency")) else {
        return problem(400, "invalid_order", false);
    };
    let order = Order {
        checkout: id.into_inner(),
        amount,
        currency,
    };
    match checkout.pay(order).await {
        Ok(result) => {
            let via = match result.via {
                Via::Effect => "effect",
                Via::Replay => "replay",
                Via::Reconcile => "reconcile",
            };
            let status = actix_web::http::StatusCode::from_u16(result.outcome.status_code)
                .unwrap_or_default();
            HttpResponse::build(status)
                .insert_header(("idempotent-replayed", result.replayed.to_string()))
                .insert_header(("checkout-via", via))
                .json(result.outcome.body.unwrap_or(Value::Null))
        }
        // The same checkout id with another amount: the page has a bug.
        Err(Error::KeyReused { .. }) => problem(422, "checkout_reused", false),
        // Another tap is still paying: ask the page to try again.
        Err(Error::InProgressTimeout { .. }) => problem(409, "payment_in_progress", true),
        // Needs a person (docs/recovery.md): the page says "we're on it".
        Err(Error::Quarantined(_)) => problem(409, "payment_under_review", false),
        // The provider refused before doing anything: the tap can be retried.
        Err(Error::NothingDone { .. }) => problem(502, "provider_unavailable", true),
        // Ambiguous, lease lost, idemkey unreachable: retrying the same
        // checkout id is always safe.
        Err(e) => {
            eprintln!("checkout: pay failed: {e}");
            problem(503, "try_again", true)
        }
    }
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let token = std::env::var("IDEMKEY_TOKEN").map_err(|_| {
        std::io::Error::other(
            "IDEMKEY_TOKEN is required (`idemkey token --tenant shop --roles client`)",
        )
    })?;
    let idemkey = Client::new(env_or("IDEMKEY_SERVER", "http://127.0.0.1:8080"), token)
        .map_err(std::io::Error::other)?;
    let payments = Payments::new(&env_or("PAYMENTS_URL", "http://127.0.0.1:8091"))
        .map_err(std::io::Error::other)?;
    let lease_ms: u64 = env_or("CHECKOUT_LEASE_MS", "30000")
        .parse()
        .map_err(|_| std::io::Error::other("CHECKOUT_LEASE_MS: milliseconds"))?;
    let checkout = web::Data::new(Checkout {
        idemkey,
        payments,
        lease: Duration::from_millis(lease_ms),
    });
    let server = HttpServer::new(move || {
        App::new()
            .app_data(checkout.clone())
            .route("/checkouts/{checkout}/pay", web::post().to(pay))
    })
    .workers(2)
    .bind(env_or("CHECKOUT_LISTEN", "127.0.0.1:8090"))?;
    for addr in server.addrs() {
        println!("checkout listening on {addr}");
    }
    server.run().await
}
