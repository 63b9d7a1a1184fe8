//! `GET /openapi.json`: the OpenAPI 3.1 description of the JSON API.
//!
//! The paths and schemas are written by hand (`api/openapi.json`) and
//! embedded at compile time; the `ErrorCode` schema — every problem `code`
//! with its status and meaning — is generated from [`ErrorCode`] when the
//! document is first served, so the list cannot drift from what the server
//! answers. `tests/tests/openapi*.rs` keep the rest honest: its paths and
//! methods must be exactly [`super::ROUTES`], its roles what the server
//! enforces.

use std::sync::LazyLock;

use actix_web::http::header;
use actix_web::HttpResponse;
use serde_json::{json, Value};

use crate::error::ErrorCode;

/// The hand-written part of the document.
const WRITTEN: &str = include_str!("../../openapi.json");

/// The document, as served.
pub static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let mut doc: Value = serde_json::from_str(WRITTEN).expect("api/openapi.json is JSON");
    doc["components"]["schemas"]["ErrorCode"] = error_code_schema();
    doc.to_string()
});

pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(DOCUMENT.as_str())
}

/// The `ErrorCode` schema: every code, and a table of when each is answered.
fn error_code_schema() -> Value {
    let mut table = String::from(
        "The stable `code` of every problem document, with its HTTP status:\n\n\
         | code | HTTP | when |\n|---|---|---|\n",
    );
    for code in ErrorCode::ALL {
        table.push_str(&format!(
            "| `{}` | {} | {} |\n",
            code.as_str(),
            code.status().as_u16(),
            code.when()
        ));
    }
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    json!({"type": "string", "description": table, "enum": codes})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_json_for_this_version() {
        let doc: Value = serde_json::from_str(&DOCUMENT).expect("openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(
            doc["components"]["schemas"]["ErrorCode"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(ErrorCode::ALL.len())
        );
    }
}
