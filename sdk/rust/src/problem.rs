//! RFC 9457 problem documents, as every idemkey error answer is one.

use std::fmt;

use serde_json::{Map, Value};

/// An RFC 9457 problem document as idemkey sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The HTTP status of the answer.
    pub status: u16,
    /// The stable `code` (`http_<status>` when the answer had none).
    pub code: String,
    /// Every member of the document as received.
    pub members: Map<String, Value>,
}

impl Problem {
    /// Reads a problem document; `body` may be anything (a non-object gives
    /// an empty document with code `http_<status>`).
    pub fn from_body(status: u16, body: &Value) -> Self {
        let members = body.as_object().cloned().unwrap_or_default();
        let code = members
            .get("code")
            .and_then(Value::as_str)
            .map_or_else(|| format!("http_{status}"), str::to_owned);
        Self {
            status,
            code,
            members,
        }
    }

    /// The `title`, when present.
    pub fn title(&self) -> Option<&str> {
        self.str_member("title")
    }

    /// The `detail`, when present (400 and 413 errors; do not parse it).
    pub fn detail(&self) -> Option<&str> {
        self.str_member("detail")
    }

    /// The server's `request_id` (the answer's `X-Request-Id`).
    pub fn request_id(&self) -> Option<&str> {
        self.str_member("request_id")
    }

    /// A string member of the document.
    pub fn str_member(&self, name: &str) -> Option<&str> {
        self.members.get(name).and_then(Value::as_str)
    }

    /// An integer member of the document.
    pub fn u64_member(&self, name: &str) -> Option<u64> {
        self.members.get(name).and_then(Value::as_u64)
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.code, self.status)?;
        if let Some(t) = self.title() {
            write!(f, " {t}")?;
        }
        if let Some(d) = self.detail() {
            write!(f, ": {d}")?;
        }
        if let Some(r) = self.request_id() {
            write!(f, " (request {r})")?;
        }
        Ok(())
    }
}
