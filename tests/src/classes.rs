//! `TestApp` methods for `/v1/operation-classes/{operation}`, and the
//! fixtures of the class-policy tests (`class_policies.rs`,
//! `class_fingerprints.rs`).

use chrono::DateTime;
use idemkey_api::auth::Role;
use reqwest::Method;
use serde_json::{json, Value};

use crate::app::Answer;
use crate::TestApp;

impl TestApp {
    /// An admin token for this app's tenant.
    pub fn admin_token(&self) -> String {
        self.token_with(&[Role::Admin])
    }

    pub fn class_url(&self, operation: &str) -> String {
        format!("{}/v1/operation-classes/{operation}", self.address)
    }

    /// `GET` the class's policy as this tenant's admin.
    pub async fn get_class(&self, operation: &str) -> Answer {
        self.class_call(&self.admin_token(), Method::GET, operation, None)
            .await
    }

    /// `PUT` a policy as this tenant's admin.
    pub async fn put_class(&self, operation: &str, policy: Value) -> Answer {
        let body = policy.to_string();
        self.class_call(&self.admin_token(), Method::PUT, operation, Some(body))
            .await
    }

    /// `DELETE` the class's policy as this tenant's admin.
    pub async fn delete_class(&self, operation: &str) -> Answer {
        self.class_call(&self.admin_token(), Method::DELETE, operation, None)
            .await
    }

    /// Any call on a class with any token and any body text.
    pub async fn class_call(
        &self,
        token: &str,
        method: Method,
        operation: &str,
        body: Option<String>,
    ) -> Answer {
        let mut request = self
            .client
            .request(method, self.class_url(operation))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        Answer::from(request.send().await.expect("request")).await
    }
}

/// Sets `operation`'s policy as the app's admin, and checks it was taken.
pub async fn set(app: &TestApp, operation: &str, policy: Value) {
    let answer = app.put_class(operation, policy).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
}

/// Milliseconds from the RFC 3339 time in `record[from]` to `record[to]`.
pub fn millis_between(record: &Value, from: &str, to: &str) -> i64 {
    let at = |field: &str| {
        DateTime::parse_from_rfc3339(record[field].as_str().expect(field)).expect("RFC 3339")
    };
    (at(to) - at(from)).num_milliseconds()
}

/// Claims and completes `key` with `request`.
pub async fn completed(app: &TestApp, operation: &str, key: &str, request: Value) {
    let token = app.claim(operation, key, request).await.owner_token();
    app.complete(operation, key, &token, json!({"status_code": 201}))
        .await
        .assert(200, "completed");
}
