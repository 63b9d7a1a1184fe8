//! Response headers every dashboard page and asset carries, and how we tell
//! that a request came over TLS.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderValue, STRICT_TRANSPORT_SECURITY};
use actix_web::middleware::{DefaultHeaders, Next};
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

/// Sent with every dashboard page and asset served over TLS: browsers then
/// refuse plain HTTP to this host for a year. Not `includeSubDomains`:
/// other sites under the same domain are not ours to constrain.
pub const STRICT_TRANSPORT_SECURITY_VALUE: &str = "max-age=31536000";

/// Adds `Strict-Transport-Security` to answers given over TLS (never over
/// plain HTTP, where browsers ignore it anyway and a development set-up
/// must not be pinned to HTTPS).
pub async fn hsts(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let tls = is_tls(req.request());
    let mut res = next.call(req).await?;
    if tls {
        res.headers_mut().insert(
            STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(STRICT_TRANSPORT_SECURITY_VALUE),
        );
    }
    Ok(res)
}

/// Whether the browser reached us over TLS: directly, or through a proxy
/// that says so with `X-Forwarded-Proto: https` (or `Forwarded: proto=https`).
/// Cookies are then `Secure` and `__Host-` prefixed, and answers carry
/// HSTS. The shipped nginx configuration (deploy/nginx.conf) sets the
/// header, overwriting any a client sent.
pub fn is_tls(req: &HttpRequest) -> bool {
    req.connection_info().scheme().eq_ignore_ascii_case("https")
}
