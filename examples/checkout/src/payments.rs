//! The checkout's client of the payment provider. Each call says what a
//! failure means for the effect: a request that never left (no connection)
//! did nothing, so the key can be released; one that may have reached the
//! provider (a timeout, a reset, a 5xx) is ambiguous, and only a lookup by
//! its reference can tell.

use std::time::Duration;

use idemkey_client::EffectError;
use serde_json::{json, Value};

/// The provider at a base URL.
#[derive(Clone)]
pub struct Payments {
    base: String,
    http: reqwest::Client,
}

impl Payments {
    /// A client of the provider at `base` (such as `http://127.0.0.1:8091`).
    pub fn new(base: &str) -> Result<Self, reqwest::Error> {
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()?,
        })
    }

    /// Charges `amount` for `order`, with `reference` (the charge step's
    /// effect id). Answers the charge id.
    pub async fn charge(
        &self,
        reference: &str,
        order: &str,
        amount: &str,
        currency: &str,
    ) -> Result<String, EffectError> {
        let body =
            json!({"reference": reference, "order": order, "amount": amount, "currency": currency});
        self.create("charges", &body).await
    }

    /// Ships `order`, paid by `charge`, with `reference` (the ship step's
    /// effect id). Answers the shipment id.
    pub async fn ship(
        &self,
        reference: &str,
        order: &str,
        charge: &str,
    ) -> Result<String, EffectError> {
        let body = json!({"reference": reference, "order": order, "charge": charge});
        self.create("shipments", &body).await
    }

    /// The charge made with `reference`, if any.
    pub async fn find_charge(&self, reference: &str) -> Result<Option<String>, EffectError> {
        self.find("charges", reference).await
    }

    /// The shipment made with `reference`, if any.
    pub async fn find_shipment(&self, reference: &str) -> Result<Option<String>, EffectError> {
        self.find("shipments", reference).await
    }

    async fn create(&self, what: &str, body: &Value) -> Result<String, EffectError> {
        let response = self
            .http
            .post(format!("{}/{what}", self.base))
            .json(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_connect() {
                    EffectError::nothing_done(e)
                } else {
                    EffectError::ambiguous(e)
                }
            })?;
        let status = response.status();
        if status.is_client_error() {
            // Refused before doing anything.
            return Err(EffectError::nothing_done(format!("{what}: {status}")));
        }
        if !status.is_success() {
            return Err(EffectError::ambiguous(format!("{what}: {status}")));
        }
        id_of(response).await.map_err(EffectError::ambiguous)
    }

    async fn find(&self, what: &str, reference: &str) -> Result<Option<String>, EffectError> {
        let response = self
            .http
            .get(format!("{}/{what}/by-reference/{reference}", self.base))
            .send()
            .await
            .map_err(EffectError::ambiguous)?;
        match response.status().as_u16() {
            404 => Ok(None),
            200 => id_of(response)
                .await
                .map(Some)
                .map_err(EffectError::ambiguous),
            s => Err(EffectError::ambiguous(format!("{what} lookup: {s}"))),
        }
    }
}

async fn id_of(response: reqwest::Response) -> Result<String, String> {
    let v: Value = response.json().await.map_err(|e| e.to_string())?;
    v.get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("no id in {v}"))
}
