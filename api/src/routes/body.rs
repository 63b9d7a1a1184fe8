//! Reading JSON bodies with our own limits and our own error codes.

use actix_web::web;
use serde::de::DeserializeOwned;

use crate::error::{ApiError, ErrorCode};

/// A claim body (request plus envelope) is at most 1 MiB.
pub const CLAIM_LIMIT: usize = 1024 * 1024;
/// Owner calls without an outcome are tiny.
pub const SMALL_LIMIT: usize = 64 * 1024;
/// Complete and resolve carry an outcome of up to the class's
/// `max_outcome_bytes` (at most 8 MiB) plus the envelope; the outcome itself
/// is then checked against the class's own limit.
pub const OUTCOME_LIMIT: usize = crate::domain::policy::MAX_OUTCOME_BYTES_CEILING + 64 * 1024;

pub async fn read_json<T: DeserializeOwned>(
    payload: web::Payload,
    limit: usize,
) -> Result<T, ApiError> {
    let bytes = read_object(payload, limit).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        let code = match e.classify() {
            serde_json::error::Category::Data => ErrorCode::InvalidBody,
            _ => ErrorCode::InvalidJson,
        };
        ApiError::bad_request(code, e.to_string())
    })
}

/// The body's bytes, if it is within `limit` and starts like a JSON object
/// (for endpoints that read the object themselves).
pub async fn read_object(payload: web::Payload, limit: usize) -> Result<web::Bytes, ApiError> {
    let bytes = match payload.to_bytes_limited(limit).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidBody,
                "the body could not be read",
            ))
        }
        Err(_) => {
            return Err(ApiError::TooLarge {
                code: ErrorCode::PayloadTooLarge,
                limit,
            })
        }
    };
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        // Serde would read a struct from a JSON array too; we don't.
        let code = match serde_json::from_slice::<Box<serde_json::value::RawValue>>(&bytes) {
            Ok(_) => ErrorCode::InvalidBody,
            Err(_) => ErrorCode::InvalidJson,
        };
        return Err(ApiError::bad_request(
            code,
            "the body must be a JSON object",
        ));
    }
    Ok(bytes)
}
