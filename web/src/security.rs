//! Response headers every dashboard page and asset carries, and how we tell
//! that a request came over TLS.

use actix_web::middleware::DefaultHeaders;
use actix_web::HttpRequest;

/// Only our own stylesheet and images; no scripts, no frames, forms post to
/// us only. Charts are inline SVG styled by the stylesheet, so they need
/// nothing more.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
     img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub fn headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add(("Content-Security-Policy", CONTENT_SECURITY_POLICY))
        .add(("X-Content-Type-Options", "nosniff"))
        .add(("Referrer-Policy", "no-referrer"))
        .add(("X-Frame-Options", "DENY"))
        .add(("Cross-Origin-Opener-Policy", "same-origin"))
}

/// Whether the browser reached us over TLS: directly, or through a proxy
/// that says so with `X-Forwarded-Proto: https` (or `Forwarded: proto=https`).
/// Cookies are marked `Secure` then.
pub fn is_tls(req: &HttpRequest) -> bool {
    req.connection_info().scheme().eq_ignore_ascii_case("https")
}
