//! The low-level calls, one method per endpoint of docs/protocol.md and
//! docs/recovery.md, each answering a typed value. `once` is built on them,
//! and so can an operator tool be. Every call retries transport errors, 503
//! and 429 with the same request; repeats that are safe by the protocol
//! (a release or quarantine whose first answer was lost) answer as if the
//! first try had been heard.

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use crate::client::{Answer, CallLimits, Client};
use crate::error::Error;
use crate::transport::encode_segment;
use crate::types::{
    Claim, CompletedClaim, InProgressClaim, KeyPage, KeyRecord, ListQuery, Outcome, OwnedClaim,
    Policy, Protected, Resolution, Resolved,
};

/// The body of a claim besides what it protects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimOptions {
    /// Wait up to this long on the server while another attempt holds a
    /// live lease (capped by the class's `max_wait`).
    pub wait: Option<Duration>,
    /// The lease this attempt gets if it becomes the owner.
    pub lease: Option<Duration>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn decode<T: DeserializeOwned>(what: &str, body: Value) -> Result<T, Error> {
    serde_json::from_value(body).map_err(|e| Error::UnexpectedResponse {
        status: 200,
        problem: None,
        message: format!("{what} answer: {e}"),
    })
}

impl Client {
    fn key_path(operation: &str, key: &str) -> String {
        format!(
            "/v1/keys/{}/{}",
            encode_segment(operation),
            encode_segment(key)
        )
    }

    async fn post_record(
        &self,
        operation: &str,
        key: &str,
        tail: &str,
        body: Value,
        limits: CallLimits,
    ) -> Result<KeyRecord, Error> {
        let path = format!("{}/{tail}", Self::key_path(operation, key));
        let answer = self.call(Method::POST, &path, Some(&body), limits).await?;
        decode(tail, answer.body)
    }

    /// Claims the key: [`Claim::Owned`] (you own it), [`Claim::Completed`]
    /// (the stored outcome) or [`Claim::InProgress`]; `quarantined`,
    /// `key_reused` and the rest are errors.
    pub async fn claim(
        &self,
        operation: &str,
        key: &str,
        protected: &Protected,
        options: &ClaimOptions,
    ) -> Result<Claim, Error> {
        let mut body = Map::new();
        match protected {
            Protected::Request(v) => body.insert("request".into(), v.clone()),
            Protected::Fingerprint(f) => body.insert("fingerprint".into(), json!(f)),
        };
        if let Some(w) = options.wait {
            body.insert("wait_ms".into(), json!(ms(w)));
        }
        if let Some(l) = options.lease {
            body.insert("lease_ms".into(), json!(ms(l)));
        }
        let limits = CallLimits {
            timeout: Some(options.wait.unwrap_or_default() + self.options().request_timeout),
            retry_until: None,
        };
        let path = format!("{}/claim", Self::key_path(operation, key));
        let answer = match self
            .call(Method::POST, &path, Some(&Value::Object(body)), limits)
            .await
        {
            Ok(a) => a,
            Err(Error::InProgress {
                problem,
                retry_after,
            }) => {
                return Ok(Claim::InProgress(InProgressClaim::from_problem(
                    problem,
                    retry_after,
                )))
            }
            Err(e) => return Err(e),
        };
        Self::claim_answer(answer)
    }

    fn claim_answer(answer: Answer) -> Result<Claim, Error> {
        let status = answer.body.get("status").and_then(Value::as_str);
        match status {
            Some(s @ ("claimed" | "recovering")) => {
                let recovering = s == "recovering";
                let server_date = answer
                    .headers
                    .get(reqwest::header::DATE)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| chrono::DateTime::parse_from_rfc2822(v).ok())
                    .map(|t| t.with_timezone(&chrono::Utc));
                let mut owned: OwnedClaim = decode("claim", answer.body)?;
                owned.recovering = recovering;
                owned.server_date = server_date;
                Ok(Claim::Owned(owned))
            }
            Some("completed") => Ok(Claim::Completed(decode::<CompletedClaim>(
                "claim",
                answer.body,
            )?)),
            other => Err(Error::UnexpectedResponse {
                status: 200,
                problem: None,
                message: format!("claim answered an unknown status {other:?}"),
            }),
        }
    }

    /// Stores the final outcome (owner call). A retry with the same token
    /// and outcome is safe: the server answers the same record.
    pub async fn complete(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
        outcome: &Outcome,
    ) -> Result<KeyRecord, Error> {
        self.complete_within(operation, key, owner_token, outcome, CallLimits::default())
            .await
    }

    pub(crate) async fn complete_within(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
        outcome: &Outcome,
        limits: CallLimits,
    ) -> Result<KeyRecord, Error> {
        let body = json!({"owner_token": owner_token, "outcome": outcome});
        self.post_record(operation, key, "complete", body, limits)
            .await
    }

    /// Gives the key back because no effect happened (owner call). A retry
    /// whose first try was applied (404 `not_found`) counts as released.
    pub async fn release(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
    ) -> Result<(), Error> {
        let path = format!("{}/release", Self::key_path(operation, key));
        let body = json!({"owner_token": owner_token});
        match self
            .call(Method::POST, &path, Some(&body), CallLimits::default())
            .await
        {
            Ok(_) | Err(Error::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Extends the lease (owner call): it ends at now + `lease` (or the
    /// lease this attempt claimed with).
    pub async fn heartbeat(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
        lease: Option<Duration>,
    ) -> Result<KeyRecord, Error> {
        self.heartbeat_within(operation, key, owner_token, lease, CallLimits::default())
            .await
    }

    pub(crate) async fn heartbeat_within(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
        lease: Option<Duration>,
        limits: CallLimits,
    ) -> Result<KeyRecord, Error> {
        let mut body = json!({"owner_token": owner_token});
        if let (Some(l), Some(obj)) = (lease, body.as_object_mut()) {
            obj.insert("lease_ms".into(), json!(ms(l)));
        }
        self.post_record(operation, key, "heartbeat", body, limits)
            .await
    }

    /// Records that a named step finished at its provider (owner call; a
    /// repeat with the same `provider_ref` is safe, another is
    /// [`Error::StepConflict`]).
    pub async fn record_step(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
        step: &str,
        provider_ref: &str,
    ) -> Result<KeyRecord, Error> {
        let path = format!(
            "{}/steps/{}",
            Self::key_path(operation, key),
            encode_segment(step)
        );
        let body = json!({"owner_token": owner_token, "provider_ref": provider_ref});
        let answer = self
            .call(Method::PUT, &path, Some(&body), CallLimits::default())
            .await?;
        decode("step", answer.body)
    }

    /// Marks the outcome ambiguous (owner call): claims answer
    /// `quarantined` until a resolve. A retry that finds the key
    /// quarantined already answers its record.
    pub async fn quarantine(
        &self,
        operation: &str,
        key: &str,
        owner_token: &str,
        reason: &str,
    ) -> Result<KeyRecord, Error> {
        let body = json!({"owner_token": owner_token, "reason": reason});
        match self
            .post_record(operation, key, "quarantine", body, CallLimits::default())
            .await
        {
            Err(Error::Quarantined(p)) => match self.lookup(operation, key).await? {
                Some(rec) if rec.state == crate::KeyState::Quarantined => Ok(rec),
                _ => Err(Error::Quarantined(p)),
            },
            other => other,
        }
    }

    /// Finishes a quarantined (or, for an admin, stuck) key: completes it
    /// with an outcome or releases it. `owner_token` is needed when the
    /// caller is not an admin.
    pub async fn resolve(
        &self,
        operation: &str,
        key: &str,
        resolution: &Resolution,
        owner_token: Option<&str>,
    ) -> Result<Resolved, Error> {
        let mut body = Map::new();
        match resolution {
            Resolution::Complete(o) => {
                body.insert("outcome".into(), json!(o));
            }
            Resolution::Release { reason } => {
                body.insert("release".into(), json!(true));
                if let Some(r) = reason {
                    body.insert("reason".into(), json!(r));
                }
            }
        }
        if let Some(t) = owner_token {
            body.insert("owner_token".into(), json!(t));
        }
        let path = format!("{}/resolve", Self::key_path(operation, key));
        let answer = match self
            .call(
                Method::POST,
                &path,
                Some(&Value::Object(body)),
                CallLimits::default(),
            )
            .await
        {
            Ok(a) => a,
            // An earlier try released it and its answer was lost.
            Err(Error::NotFound(_)) if matches!(resolution, Resolution::Release { .. }) => {
                return Ok(Resolved::Released)
            }
            Err(e) => return Err(e),
        };
        if answer.body.get("status").and_then(Value::as_str) == Some("released") {
            return Ok(Resolved::Released);
        }
        Ok(Resolved::Completed(Box::new(decode(
            "resolve",
            answer.body,
        )?)))
    }

    /// Reads the key's record; `None` when there is none (404).
    pub async fn lookup(&self, operation: &str, key: &str) -> Result<Option<KeyRecord>, Error> {
        let path = Self::key_path(operation, key);
        match self
            .call(Method::GET, &path, None, CallLimits::default())
            .await
        {
            Ok(a) => decode("lookup", a.body).map(Some),
            Err(Error::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lists the tenant's live keys, newest first, one page.
    pub async fn list_keys(&self, query: &ListQuery) -> Result<KeyPage, Error> {
        let mut params: Vec<String> = Vec::new();
        let mut add = |k: &str, v: String| params.push(format!("{k}={}", encode_segment(&v)));
        if let Some(s) = &query.state {
            add("state", s.clone());
        }
        if let Some(o) = &query.operation {
            add("operation", o.clone());
        }
        if let Some(d) = query.older_than {
            add("older_than", format!("{}s", d.as_secs()));
        }
        if let Some(l) = query.limit {
            add("limit", l.to_string());
        }
        if let Some(c) = &query.cursor {
            add("cursor", c.clone());
        }
        let path = if params.is_empty() {
            "/v1/keys".to_owned()
        } else {
            format!("/v1/keys?{}", params.join("&"))
        };
        let answer = self
            .call(Method::GET, &path, None, CallLimits::default())
            .await?;
        decode("list", answer.body)
    }

    async fn policy_call(
        &self,
        method: Method,
        operation: &str,
        body: Option<Value>,
    ) -> Result<Policy, Error> {
        let path = format!("/v1/operation-classes/{}", encode_segment(operation));
        let answer = self
            .call(method, &path, body.as_ref(), CallLimits::default())
            .await?;
        decode("operation class", answer.body)
    }

    /// Reads an operation class's policy (admin).
    pub async fn get_operation_class(&self, operation: &str) -> Result<Policy, Error> {
        self.policy_call(Method::GET, operation, None).await
    }

    /// Sets an operation class's whole policy (admin); members left `None`
    /// take their defaults. Answers the stored policy in canonical form.
    pub async fn put_operation_class(
        &self,
        operation: &str,
        policy: &Policy,
    ) -> Result<Policy, Error> {
        self.policy_call(Method::PUT, operation, Some(json!(policy)))
            .await
    }

    /// Returns an operation class to the defaults (admin).
    pub async fn delete_operation_class(&self, operation: &str) -> Result<Policy, Error> {
        self.policy_call(Method::DELETE, operation, None).await
    }
}
