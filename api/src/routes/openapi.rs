//! `GET /openapi.json`: the OpenAPI 3.1 description of the JSON API.
//!
//! The document is written by hand (`api/openapi.json`) and embedded at
//! compile time. `tests/tests/openapi*.rs` keep it honest: its paths and
//! methods must be exactly [`super::ROUTES`], its roles must be what the
//! server enforces, and its error codes every code the source can emit.

use actix_web::http::header;
use actix_web::HttpResponse;

/// The document, as served.
pub const DOCUMENT: &str = include_str!("../../openapi.json");

pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(DOCUMENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_json_for_this_version() {
        let doc: serde_json::Value = serde_json::from_str(DOCUMENT).expect("openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    }
}
