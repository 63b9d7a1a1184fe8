//! `GET /openapi.json`: the OpenAPI 3.1 description of the JSON API,
//! generated from the code.
//!
//! - The paths come from the route registration: [`super::configure`]
//!   registers each handler through `utoipa-actix-web`, which documents it
//!   from its `#[utoipa::path]` (summary and description from its doc
//!   comment, parameters, request body, answers, roles).
//! - The schemas come from the answer and request types (`ToSchema`), the
//!   error responses and the `ErrorCode` schema from [`ErrorCode`]
//!   (problems.rs).
//! - [`RequestIds`] adds what the request-id middleware does to every call
//!   (it takes and answers `X-Request-Id`), which no handler can say.
//!
//! `api/openapi.json` is a snapshot of the generated document, committed so
//! a reviewer sees each change; `snapshot.rs` fails when the two differ
//! (`IDEMKEY_UPDATE_OPENAPI=1` rewrites the file). The server serves the
//! generated document, never the file.

pub mod problems;
pub mod schemas;
#[cfg(test)]
mod snapshot;

use std::sync::LazyLock;

use actix_web::http::header;
use actix_web::{get, HttpResponse};
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type as JsonType};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{Info, License, OpenApi as Document, RefOr, Required};
use utoipa::{Modify, OpenApi};
use utoipa_actix_web::AppExt;

use super::view::SplicedOutcome;
use crate::error::ErrorCode;

/// What is not a route: the document's info, tags, security and the
/// schemas no handler names directly.
#[derive(OpenApi)]
#[openapi(
    servers((url = "/", description = "The node that served this document.")),
    security(("bearer" = [])),
    tags(
        (name = "keys", description = "Claim a key, store its outcome, and the owner's other calls."),
        (name = "recovery", description = "Steps, quarantine, resolve and listing — for outcomes that are ambiguous."),
        (name = "operation-classes", description = "Per-class policies, set by a tenant's admins."),
        (name = "webhooks", description = "Per-class webhook endpoints for key lifecycle events, set by a tenant's admins."),
        (name = "operations", description = "Health, readiness, metrics and this document. No token needed."),
    ),
    components(schemas(ErrorCode, problems::Problem, problems::KeyReusedProblem, problems::InProgressProblem)),
    modifiers(&Base),
)]
struct ApiDoc;

/// The document, generated from the route registration.
pub fn generate() -> Document {
    let (_, mut doc) = actix_web::App::new()
        .into_utoipa_app()
        .openapi(ApiDoc::openapi())
        .configure(super::configure)
        .split_for_parts();
    // What every route and schema gets once they are all registered.
    RequestIds.modify(&mut doc);
    SplicedOutcome.modify(&mut doc);
    doc
}

/// The document as served: pretty JSON, as the snapshot keeps it.
pub static DOCUMENT: LazyLock<String> = LazyLock::new(|| {
    let json = generate()
        .to_pretty_json()
        .expect("the document serialises");
    // utoipa 5.5 names two members of a Link object in snake case; no other
    // object of the document has members of these names.
    let mut json = json
        .replace("\"operation_id\": ", "\"operationId\": ")
        .replace("\"request_body\": ", "\"requestBody\": ");
    json.push('\n');
    json
});

const SUMMARY: &str = "A multi-tenant idempotency service.";

/// This document
///
/// No token. The OpenAPI 3.1 description of this API.
#[utoipa::path(
    tag = "operations",
    operation_id = "openapi",
    security(),
    responses((status = 200, description = "This document.", content_type = "application/json", body = Object)),
)]
#[get("/openapi.json")]
pub async fn document() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .body(DOCUMENT.as_str())
}

/// Info and the security scheme: prose kept in Markdown beside this file.
struct Base;

impl Modify for Base {
    fn modify(&self, doc: &mut Document) {
        let mut license = License::new(env!("CARGO_PKG_LICENSE"));
        license.identifier = Some(env!("CARGO_PKG_LICENSE").into());
        let mut info = Info::new("idemkey", env!("CARGO_PKG_VERSION"));
        info.license = Some(license);
        info.description = Some(include_str!("description.md").into());
        // OpenAPI 3.1's `info.summary`, which utoipa 5's `Info` lacks: an
        // extension map is serialised as it is (the builder would prefix
        // `x-`).
        info.extensions = Some(Extensions::from_iter([("summary", SUMMARY)]));
        doc.info = info;
        let bearer = HttpBuilder::new()
            .scheme(HttpAuthScheme::Bearer)
            .bearer_format("JWT")
            .description(Some(include_str!("bearer.md")))
            .build();
        doc.components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(bearer));
    }
}

/// Every call takes an `X-Request-Id` and every answer carries one: the
/// request-id middleware (`request_id.rs`) wraps every route.
struct RequestIds;

const REQUEST_ID_PATTERN: &str = "^[\\x21-\\x7E]{1,128}$";

impl Modify for RequestIds {
    fn modify(&self, doc: &mut Document) {
        let id = || {
            ObjectBuilder::new()
                .schema_type(JsonType::String)
                .pattern(Some(REQUEST_ID_PATTERN))
        };
        let parameter = ParameterBuilder::new()
            .name("X-Request-Id")
            .parameter_in(ParameterIn::Header)
            .required(Required::False)
            .description(Some(
                "An id for this call, kept when it is 1–128 visible ASCII characters \
                 (0x21–0x7E) and otherwise ignored (a fresh one is generated). Echoed in \
                 the answer's `X-Request-Id`.",
            ))
            .schema(Some(id()))
            .build();
        let answer = HeaderBuilder::new()
            .schema(id())
            .description(Some(
                "This call's id: the caller's `X-Request-Id` when it was 1–128 visible \
                 ASCII characters, else one the server generated (32 hex characters). \
                 The same id is in the server's log lines for the call and, in a \
                 problem document, in `request_id`.",
            ))
            .build();
        for item in doc.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
            ];
            for op in operations.into_iter().flatten() {
                op.parameters
                    .get_or_insert_with(Vec::new)
                    .push(parameter.clone());
                for response in op.responses.responses.values_mut() {
                    if let RefOr::T(response) = response {
                        response
                            .headers
                            .insert("X-Request-Id".into(), answer.clone());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn the_document_is_json_for_this_version() {
        let doc: Value = serde_json::from_str(&DOCUMENT).expect("openapi.json is JSON");
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
        let claimed = &doc["paths"]["/v1/keys/{operation}/{key}/claim"]["post"]["responses"]["201"];
        assert_eq!(claimed["links"]["complete"]["operationId"], "complete");
        assert!(claimed["links"]["complete"]["requestBody"].is_object());
        assert_eq!(
            doc["components"]["schemas"]["ErrorCode"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(ErrorCode::ALL.len())
        );
    }
}
