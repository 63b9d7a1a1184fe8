//! Turning a template into a response.

use actix_web::http::{header, StatusCode};
use actix_web::HttpResponse;
use askama::Template;

/// Renders `page` as an HTML answer with `status`. Pages show tenant data,
/// so no cache may keep them.
pub fn render(status: StatusCode, page: &impl Template) -> HttpResponse {
    match page.render() {
        Ok(html) => HttpResponse::build(status)
            .content_type("text/html; charset=utf-8")
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .body(html),
        Err(e) => {
            tracing::error!(error = %e, "template failed to render");
            HttpResponse::InternalServerError()
                .content_type("text/plain; charset=utf-8")
                .body("The page could not be rendered.")
        }
    }
}

/// A 303 See Other to `location` (the answer to every successful form).
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}
