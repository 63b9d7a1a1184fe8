//! The list cursor as clients carry it: opaque text, base64url of
//! `[first claim in microseconds, operation, key]`, the position of the last
//! row of a page in the listing's order (newest first). The API's
//! `GET /v1/keys` and the dashboard's key lists page with the same cursor.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use chrono::{DateTime, Datelike};

use super::{KeyRecord, ListCursor};
use crate::domain::{OperationName, ScopedKey};

/// A cursor's time must lie within these years: a forged one outside them is
/// refused here rather than by the database.
const CURSOR_YEARS: std::ops::RangeInclusive<i32> = 1970..=9999;

impl ListCursor {
    /// The position just after this row.
    pub fn after(k: &ScopedKey, r: &KeyRecord) -> Self {
        Self {
            created_at: r.created_at,
            operation: k.operation.as_str().to_owned(),
            key: k.key.as_str().to_owned(),
        }
    }

    pub fn encode(&self) -> String {
        let json =
            serde_json::json!([self.created_at.timestamp_micros(), self.operation, self.key]);
        URL_SAFE_NO_PAD.encode(json.to_string())
    }

    /// `None` for anything [`ListCursor::encode`] did not make.
    pub fn decode(cursor: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        let (micros, operation, key): (i64, String, String) =
            serde_json::from_slice(&bytes).ok()?;
        let created_at =
            DateTime::from_timestamp_micros(micros).filter(|t| CURSOR_YEARS.contains(&t.year()))?;
        if OperationName::parse(&operation).is_err() || key.is_empty() || key.len() > 255 {
            return None;
        }
        Some(Self {
            created_at,
            operation,
            key,
        })
    }
}
