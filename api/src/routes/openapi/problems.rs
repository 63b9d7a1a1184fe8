//! Problem documents in the OpenAPI document: the `ErrorCode` schema,
//! generated from [`ErrorCode::ALL`], the problem schemas, and the error
//! responses of each call, generated from the list of codes its handler
//! declares with [`problems!`](crate::problems).
//!
//! A handler's `#[utoipa::path(responses(...))]` names one type made by
//! `problems!`; that type's responses group the codes by HTTP status, say
//! when each code is answered (from [`ErrorCode::when`]), and carry the
//! headers those answers carry (`Retry-After`, `WWW-Authenticate`).

use std::collections::BTreeMap;

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::schema::{AnyOfBuilder, ObjectBuilder, Schema, SchemaType, Type as JsonType};
use utoipa::openapi::{RefOr, Response, ResponseBuilder};
use utoipa::{PartialSchema, ToSchema};

use super::schemas::Timestamp;
use crate::error::ErrorCode;

pub const PROBLEM_JSON: &str = "application/problem+json";

impl PartialSchema for ErrorCode {
    fn schema() -> RefOr<Schema> {
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
        ObjectBuilder::new()
            .schema_type(JsonType::String)
            .description(Some(table))
            .enum_values(Some(ErrorCode::ALL.iter().map(|c| c.as_str())))
            .into()
    }
}

impl ToSchema for ErrorCode {}

/// An RFC 9457 problem document, served as `application/problem+json`.
/// Internal causes are logged, never sent.
#[derive(ToSchema)]
#[schema(example = json!({
    "type": "about:blank",
    "status": 422,
    "title": "The key was used with a different request",
    "code": "key_reused",
    "request_id": "4f1c2a9e0b7d4c3a8e6f5d2b1a0c9e8d"
}))]
#[allow(dead_code)] // a schema: error.rs renders the document
pub struct Problem {
    /// Always `about:blank`.
    #[schema(rename = "type", pattern = "^about:blank$")]
    kind: String,
    /// The HTTP status.
    status: u16,
    /// A fixed sentence per code.
    title: String,
    code: ErrorCode,
    /// More about a 400 or 413 error, for people.
    detail: Option<String>,
    /// This call's id, the same as the answer's `X-Request-Id` header; quote
    /// it when reporting a problem.
    request_id: String,
}

/// The members a `key_reused` problem adds: the fields of the request that
/// differ from the first request of the key — never their values.
#[derive(ToSchema)]
#[allow(dead_code)]
struct KeyReusedMembers {
    /// The pointers (RFC 6901, into the request) of the fields whose values
    /// differ, or that only one of the two requests has, sorted, under the
    /// class's fingerprint rules. Absent when either request was sent as a
    /// precomputed fingerprint, the record predates field digests, or it was
    /// written under other fingerprint rules.
    #[schema(max_items = 32)]
    mismatched: Option<Vec<String>>,
    /// `true` when there may be more differences than `mismatched` names
    /// (the list was cut at 32, or a request had more than 64 fields);
    /// absent otherwise.
    mismatched_truncated: Option<bool>,
}

/// The members an `in_progress` problem adds: whose lease is running.
#[derive(ToSchema)]
#[allow(dead_code)]
struct InProgressMembers {
    #[schema(minimum = 1)]
    attempt: i32,
    lease_expires_at: Timestamp,
    expires_at: Timestamp,
}

/// A problem with the members of one code: `allOf` the [`Problem`] and them.
fn problem_with<T: ToSchema>(description: &str, code: ErrorCode) -> RefOr<Schema> {
    let mut members = match T::schema() {
        RefOr::T(Schema::Object(object)) => object,
        _ => unreachable!("derived object schemas"),
    };
    let code_is = ObjectBuilder::new()
        .schema_type(JsonType::String)
        .enum_values(Some([code.as_str()]));
    members.properties.insert("code".into(), code_is.into());
    members
        .properties
        .move_index(members.properties.len() - 1, 0);
    members.title = None;
    utoipa::openapi::schema::AllOfBuilder::new()
        .item(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
            "Problem",
        )))
        .item(members)
        .description(Some(description))
        .into()
}

/// The `key_reused` problem.
pub struct KeyReusedProblem;

impl PartialSchema for KeyReusedProblem {
    fn schema() -> RefOr<Schema> {
        let mut schema = problem_with::<KeyReusedMembers>(
            "The `key_reused` problem, which names the fields of the request that \
             differ from the first request of the key — never their values.",
            ErrorCode::KeyReused,
        );
        if let RefOr::T(Schema::AllOf(all)) = &mut schema {
            all.example = Some(serde_json::json!({
                "type": "about:blank",
                "status": 422,
                "title": ErrorCode::KeyReused.title(),
                "code": "key_reused",
                "mismatched": ["/amount", "/items/0/sku"],
                "request_id": "4f1c2a9e0b7d4c3a8e6f5d2b1a0c9e8d"
            }));
        }
        schema
    }
}

impl ToSchema for KeyReusedProblem {}

/// The `in_progress` problem.
pub struct InProgressProblem;

impl PartialSchema for InProgressProblem {
    fn schema() -> RefOr<Schema> {
        problem_with::<InProgressMembers>(
            "The `in_progress` problem, which says whose lease is running.",
            ErrorCode::InProgress,
        )
    }
}

impl ToSchema for InProgressProblem {}

/// Declares the problem codes a handler answers with, as a type to name in
/// its `#[utoipa::path(responses(...))]`.
#[macro_export]
macro_rules! problems {
    ($(#[$doc:meta])* $name:ident: $($code:ident),+ $(,)?) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::IntoResponses for $name {
            fn responses() -> std::collections::BTreeMap<
                String,
                utoipa::openapi::RefOr<utoipa::openapi::Response>,
            > {
                $crate::routes::openapi::problems::responses(&[
                    $($crate::error::ErrorCode::$code,)+
                ])
            }
        }
    };
}

/// The error responses for `codes`, one per HTTP status.
pub fn responses(codes: &[ErrorCode]) -> BTreeMap<String, RefOr<Response>> {
    let mut by_status: BTreeMap<u16, Vec<ErrorCode>> = BTreeMap::new();
    for code in codes {
        by_status
            .entry(code.status().as_u16())
            .or_default()
            .push(*code);
    }
    by_status
        .into_iter()
        .map(|(status, codes)| (status.to_string(), response(&codes).into()))
        .collect()
}

fn response(codes: &[ErrorCode]) -> Response {
    let description = codes
        .iter()
        .map(|c| format!("`{}`: {}", c.as_str(), c.when()))
        .collect::<Vec<_>>()
        .join("\n\n");
    let schema_ref = |name: &str| RefOr::Ref(utoipa::openapi::Ref::from_schema_name(name));
    let special = |code: ErrorCode, schema: &str| codes.contains(&code).then(|| schema_ref(schema));
    let specials: Vec<_> = [
        special(ErrorCode::InProgress, "InProgressProblem"),
        special(ErrorCode::KeyReused, "KeyReusedProblem"),
    ]
    .into_iter()
    .flatten()
    .collect();
    // `anyOf`, not `oneOf`: a special problem is a `Problem` too.
    let schema: RefOr<Schema> = match (specials.len(), codes.len()) {
        (0, _) => schema_ref("Problem"),
        (1, 1) => specials.into_iter().next().expect("one"),
        _ => {
            let mut any = AnyOfBuilder::new();
            for s in specials {
                any = any.item(s);
            }
            any.item(schema_ref("Problem")).into()
        }
    };
    let mut builder = ResponseBuilder::new().description(description).content(
        PROBLEM_JSON,
        ContentBuilder::new().schema(Some(schema)).build(),
    );
    if codes.iter().any(|c| c.sends_retry_after()) {
        let seconds = ObjectBuilder::new()
            .schema_type(SchemaType::new(JsonType::Integer))
            .minimum(Some(1));
        builder = builder.header(
            "Retry-After",
            HeaderBuilder::new()
                .schema(seconds)
                .description(Some("Seconds to wait before retrying (at least 1)."))
                .build(),
        );
    }
    if codes.contains(&ErrorCode::Unauthorized) {
        let bearer = ObjectBuilder::new()
            .schema_type(JsonType::String)
            .enum_values(Some(["Bearer"]));
        builder = builder.header(
            "WWW-Authenticate",
            HeaderBuilder::new()
                .schema(bearer)
                .description(Some("Always `Bearer`."))
                .build(),
        );
    }
    builder.build()
}
