//! Request ids: one per call, so a client's report, the answer and the
//! server's log lines can be matched.
//!
//! - The id is the caller's `X-Request-Id` when it is 1–128 visible ASCII
//!   characters (0x21–0x7E), so an id given by a gateway or a client's own
//!   tracing is kept end to end. Anything else (too long, spaces, control
//!   or non-ASCII bytes) is ignored — never echoed, never logged — and a
//!   fresh id is generated: 128 random bits in hex.
//! - Every answer carries it in `X-Request-Id`: API, dashboard, assets, the
//!   metrics listener, errors and 404s alike.
//! - Every log line of the call carries it: the call runs inside a `request`
//!   span whose field `request_id` the log formats print (text:
//!   `request{request_id=…}:`, JSON: the `span` and `spans` members).
//! - Every problem document (`application/problem+json`) gets it as the
//!   member `request_id`, added here once for all of them, wherever the
//!   problem was built.
//! - When spans are exported (OpenTelemetry, see `telemetry`), the span
//!   also gets the method, the matched route, the status and the tenant:
//!   never the concrete path (it holds the caller's keys), a header or a
//!   body.

use actix_web::body::{BodySize, BoxBody, EitherBody, MessageBody};
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use actix_web::middleware::Next;
use actix_web::HttpResponse;
use serde_json::{Map, Value};
use tracing::Instrument;

/// The header that carries the id, in and out.
pub const HEADER: HeaderName = HeaderName::from_static("x-request-id");
/// Longest caller id kept.
pub const MAX_LEN: usize = 128;
/// Problem documents larger than this are left as they are (none is).
const MAX_PROBLEM_BYTES: usize = 64 * 1024;

/// The caller's id if it is acceptable.
pub fn accepted(value: &[u8]) -> Option<&str> {
    let visible = |b: &u8| (0x21..=0x7e).contains(b);
    let ok = (1..=MAX_LEN).contains(&value.len()) && value.iter().all(visible);
    ok.then(|| std::str::from_utf8(value).expect("ASCII"))
}

/// A new id: 128 random bits, 32 hex characters.
pub fn generate() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// The middleware (wrap it with `actix_web::middleware::from_fn`).
pub async fn middleware(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<EitherBody<impl MessageBody, BoxBody>>, actix_web::Error> {
    let id = req
        .headers()
        .get(&HEADER)
        .and_then(|v| accepted(v.as_bytes()))
        .map_or_else(generate, str::to_owned);
    // The fields after `request_id` are filled in only when spans are
    // exported (`telemetry`): an empty field is not printed in logs.
    let exporting = crate::telemetry::exporting();
    let span = if exporting {
        tracing::info_span!(
            "request",
            request_id = %id,
            "otel.kind" = "server",
            "http.request.method" = tracing::field::Empty,
            "http.route" = tracing::field::Empty,
            "http.response.status_code" = tracing::field::Empty,
            tenant = tracing::field::Empty,
        )
    } else {
        tracing::info_span!("request", request_id = %id)
    };
    let method = exporting.then(|| req.method().clone());
    // Every handler and extractor turns its errors into answers, so the
    // inner service fails only if a middleware does (none of ours does);
    // such an error is passed on as it is.
    let res = next.call(req).instrument(span.clone()).await?;
    if let Some(method) = method {
        record_answer(&span, &method, &res);
    }
    let mut res = if is_problem(res.response()) {
        with_request_id(res.map_into_boxed_body(), &id).map_into_right_body()
    } else {
        res.map_into_left_body()
    };
    let value = HeaderValue::from_str(&id).expect("visible ASCII");
    res.headers_mut().insert(HEADER, value);
    Ok(res)
}

/// The span's name and attributes once the call is answered: the matched
/// route pattern (a path that matched none is `unmatched`, so a scan of
/// random paths cannot grow the set of span names), method and status.
fn record_answer<B>(
    span: &tracing::Span,
    method: &actix_web::http::Method,
    res: &ServiceResponse<B>,
) {
    let route = res.request().match_pattern();
    let route = route.as_deref().unwrap_or("unmatched");
    crate::telemetry::rename(span, format!("{method} {route}"));
    span.record("http.request.method", method.as_str());
    span.record("http.route", route);
    span.record(
        "http.response.status_code",
        i64::from(res.status().as_u16()),
    );
}

fn is_problem<B>(res: &HttpResponse<B>) -> bool {
    res.headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/problem+json"))
}

/// The same problem document with `"request_id": id` added. A body that is
/// not a small in-memory JSON object (none is) is left as it is.
fn with_request_id(res: ServiceResponse<BoxBody>, id: &str) -> ServiceResponse<BoxBody> {
    let (req, res) = res.into_parts();
    let (head, body) = res.into_parts();
    let small = matches!(body.size(), BodySize::Sized(n) if n <= MAX_PROBLEM_BYTES as u64);
    let body = match body.try_into_bytes() {
        Ok(bytes) if small => match serde_json::from_slice::<Map<String, Value>>(&bytes) {
            Ok(mut problem) => {
                problem.insert("request_id".into(), id.into());
                BoxBody::new(Value::Object(problem).to_string())
            }
            Err(_) => BoxBody::new(bytes),
        },
        Ok(bytes) => BoxBody::new(bytes),
        Err(body) => body,
    };
    ServiceResponse::new(req, head.set_body(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caller_ids_are_kept_when_visible_ascii_and_short_enough() {
        for good in ["abc", "req-42/1:x", "~!", &"a".repeat(MAX_LEN)] {
            assert_eq!(accepted(good.as_bytes()), Some(good), "{good}");
        }
        for bad in [
            "",
            "has space",
            "tab\t",
            "naïve",
            "line\nbreak",
            &"a".repeat(MAX_LEN + 1),
        ] {
            assert_eq!(accepted(bad.as_bytes()), None, "{bad:?}");
        }
    }

    #[test]
    fn generated_ids_are_long_random_and_acceptable() {
        let (a, b) = (generate(), generate());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(accepted(a.as_bytes()).is_some());
    }
}
