//! A stand-in for a payment provider, as a real process. It is the hard kind
//! of provider: it does NOT deduplicate — every `POST /charges` charges
//! again — but a charge can be looked up by the reference it was made with.
//! So any duplicate effect shows in its count, and tests can assert how many
//! times a protected effect really ran.
//!
//! `POST /charges` with a `Reference` header → a new charge;
//! `GET /charges/{reference}` → the first charge with it, or 404;
//! `GET /stats` → `{"charges": n, "by_reference": {reference: n}}`.
//! Prints `listening on ADDR` once bound.

use std::collections::HashMap;
use std::sync::Mutex;

use actix_web::{web, App, HttpRequest, HttpResponse, HttpServer};
use serde_json::json;

#[derive(Default)]
struct Ledger {
    by_reference: HashMap<String, Vec<String>>,
    charges: u64,
}

async fn charge(req: HttpRequest, ledger: web::Data<Mutex<Ledger>>) -> HttpResponse {
    let Some(reference) = req.headers().get("reference").and_then(|v| v.to_str().ok()) else {
        return HttpResponse::BadRequest().finish();
    };
    let mut ledger = ledger.lock().unwrap();
    ledger.charges += 1;
    let id = format!("ch_{}", ledger.charges);
    ledger
        .by_reference
        .entry(reference.to_owned())
        .or_default()
        .push(id.clone());
    HttpResponse::Created().json(json!({"id": id}))
}

async fn find(reference: web::Path<String>, ledger: web::Data<Mutex<Ledger>>) -> HttpResponse {
    match ledger.lock().unwrap().by_reference.get(reference.as_str()) {
        Some(ids) => HttpResponse::Ok().json(json!({"id": ids[0]})),
        None => HttpResponse::NotFound().finish(),
    }
}

async fn stats(ledger: web::Data<Mutex<Ledger>>) -> HttpResponse {
    let ledger = ledger.lock().unwrap();
    let by_reference: HashMap<&String, usize> = ledger
        .by_reference
        .iter()
        .map(|(r, ids)| (r, ids.len()))
        .collect();
    HttpResponse::Ok().json(json!({"charges": ledger.charges, "by_reference": by_reference}))
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let ledger = web::Data::new(Mutex::new(Ledger::default()));
    let server = HttpServer::new(move || {
        App::new()
            .app_data(ledger.clone())
            .route("/charges", web::post().to(charge))
            .route("/charges/{key}", web::get().to(find))
            .route("/stats", web::get().to(stats))
    })
    .workers(1)
    .bind("127.0.0.1:0")?;
    println!("listening on {}", server.addrs()[0]);
    server.run().await
}
