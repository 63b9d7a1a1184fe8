//! Static assets, embedded in the binary with rust-embed and served under a
//! content-hashed name (`/static/dashboard.<hash>.css`), so browsers may keep
//! them for a year: a changed file gets a new URL.

use std::collections::HashMap;
use std::sync::LazyLock;

use actix_web::http::header;
use actix_web::{web, HttpResponse};
use rust_embed::RustEmbed;
use sha2::{Digest, Sha256};

#[derive(RustEmbed)]
#[folder = "$CARGO_MANIFEST_DIR/../static"]
struct Static;

/// Each embedded file's name → the first 16 hex digits of its SHA-256.
static HASHES: LazyLock<HashMap<String, String>> = LazyLock::new(|| {
    Static::iter()
        .filter_map(|name| {
            let file = Static::get(&name)?;
            let hash = hex::encode(&Sha256::digest(&file.data)[..8]);
            Some((name.into_owned(), hash))
        })
        .collect()
});

/// The hashed URL of an embedded file, such as `dashboard.css`.
pub fn url(name: &str) -> String {
    let hash = HASHES.get(name).map(String::as_str).unwrap_or("missing");
    match name.rsplit_once('.') {
        Some((stem, ext)) => format!("/static/{stem}.{hash}.{ext}"),
        None => format!("/static/{name}.{hash}"),
    }
}

/// `GET /static/{stem}.{hash}.{ext}`: the file, if the hash is its current
/// one; anything else is a 404.
pub async fn serve(file: web::Path<String>) -> HttpResponse {
    let not_found = || HttpResponse::NotFound().finish();
    let Some((rest, ext)) = file.rsplit_once('.') else {
        return not_found();
    };
    let Some((stem, hash)) = rest.rsplit_once('.') else {
        return not_found();
    };
    let name = format!("{stem}.{ext}");
    if HASHES.get(&name).map(String::as_str) != Some(hash) {
        return not_found();
    }
    let Some(content) = Static::get(&name) else {
        return not_found();
    };
    let content_type = match ext {
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        _ => "application/octet-stream",
    };
    HttpResponse::Ok()
        .content_type(content_type)
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .body(content.data.into_owned())
}
