//! [`Client::send_json`]: any call of the API by its path, answering the
//! server's JSON unchanged. The typed calls (`calls`) decode answers into
//! this crate's types, which drops members the types do not model and
//! rewrites timestamps; a tool that passes the API's JSON on (the operator
//! CLI's `--json`) needs the answer exactly as the server wrote it.

use reqwest::Method;
use serde_json::Value;

use crate::client::{CallLimits, Client};
use crate::error::Error;

impl Client {
    /// Any call of the API by its path (with its query, such as
    /// `/v1/keys?state=quarantined`), answering the success body as the
    /// server sent it. For tools that pass the API's JSON on unchanged (the
    /// operator CLI's `--json`) and for calls this SDK does not model; it
    /// goes through the same retry loop and answers the same typed errors
    /// as every other call.
    pub async fn send_json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, Error> {
        if !path.starts_with('/') {
            return Err(Error::Config(format!(
                "path {path:?}: expected an absolute path such as /v1/keys"
            )));
        }
        let answer = self.call(method, path, body, CallLimits::default()).await?;
        Ok(answer.body)
    }
}
