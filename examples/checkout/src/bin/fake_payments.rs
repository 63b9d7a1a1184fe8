//! The fake payment provider: a separate process that charges cards and
//! ships parcels, and has NO idempotency of its own — every POST does it
//! again, so a duplicate effect shows in its ledger. What it does offer is a
//! lookup by the reference a charge or shipment was made with (the checkout
//! passes its effect id), which is what recovery needs.
//!
//! - `POST /charges` `{"reference", "order", "amount", "currency"}` → 201 `{"id": "ch_N"}`
//! - `GET /charges/by-reference/{reference}` → 200 `{"id"}` (the first), or 404
//! - `POST /shipments` `{"reference", "order", "charge"}` → 201 `{"id": "sh_N"}`
//! - `GET /shipments/by-reference/{reference}` → 200 `{"id"}`, or 404
//! - `GET /ledger` → `{"charges": n, "shipments": n, "charges_by_order": {order: n}, "shipments_by_order": {order: n}}`
//!
//! Listens on `PAYMENTS_LISTEN` (default 127.0.0.1:8091; port 0 picks one)
//! and prints `fake-payments listening on ADDR` once bound.

use std::collections::BTreeMap;
use std::sync::Mutex;

use actix_web::{web, App, HttpResponse, HttpServer};
use serde_json::{json, Value};

/// One kind of thing done (charges, or shipments).
#[derive(Default)]
struct Book {
    count: u64,
    by_reference: BTreeMap<String, Vec<String>>,
    by_order: BTreeMap<String, u64>,
}

impl Book {
    fn record(&mut self, prefix: &str, body: &Value) -> Option<String> {
        let reference = body.get("reference")?.as_str()?.to_owned();
        let order = body.get("order")?.as_str()?.to_owned();
        self.count += 1;
        let id = format!("{prefix}_{}", self.count);
        self.by_reference
            .entry(reference)
            .or_default()
            .push(id.clone());
        *self.by_order.entry(order).or_default() += 1;
        Some(id)
    }
}

#[derive(Default)]
struct Ledger {
    charges: Book,
    shipments: Book,
}

type Shared = web::Data<Mutex<Ledger>>;

fn lock(ledger: &Shared) -> std::sync::MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
}

fn created(id: Option<String>) -> HttpResponse {
    match id {
        Some(id) => HttpResponse::Created().json(json!({"id": id})),
        None => {
            HttpResponse::BadRequest().json(json!({"error": "reference and order are required"}))
        }
    }
}

fn found(ids: Option<&Vec<String>>) -> HttpResponse {
    match ids.and_then(|ids| ids.first()) {
        Some(id) => HttpResponse::Ok().json(json!({"id": id})),
        None => HttpResponse::NotFound().json(json!({"error": "no such reference"})),
    }
}

async fn charge(ledger: Shared, body: web::Json<Value>) -> HttpResponse {
    created(lock(&ledger).charges.record("ch", &body))
}

async fn ship(ledger: Shared, body: web::Json<Value>) -> HttpResponse {
    created(lock(&ledger).shipments.record("sh", &body))
}

async fn find_charge(ledger: Shared, reference: web::Path<String>) -> HttpResponse {
    found(lock(&ledger).charges.by_reference.get(reference.as_str()))
}

async fn find_shipment(ledger: Shared, reference: web::Path<String>) -> HttpResponse {
    found(lock(&ledger).shipments.by_reference.get(reference.as_str()))
}

async fn ledger(ledger: Shared) -> HttpResponse {
    let l = lock(&ledger);
    HttpResponse::Ok().json(json!({
        "charges": l.charges.count,
        "shipments": l.shipments.count,
        "charges_by_order": l.charges.by_order,
        "shipments_by_order": l.shipments.by_order,
    }))
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let listen = std::env::var("PAYMENTS_LISTEN").unwrap_or_else(|_| "127.0.0.1:8091".into());
    let state: Shared = web::Data::new(Mutex::new(Ledger::default()));
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route("/charges", web::post().to(charge))
            .route(
                "/charges/by-reference/{reference}",
                web::get().to(find_charge),
            )
            .route("/shipments", web::post().to(ship))
            .route(
                "/shipments/by-reference/{reference}",
                web::get().to(find_shipment),
            )
            .route("/ledger", web::get().to(ledger))
    })
    .workers(2)
    .bind(&listen)?;
    for addr in server.addrs() {
        println!("fake-payments listening on {addr}");
    }
    server.run().await
}
