//! `Answer`: an API answer as a test sees it — status, the headers tests
//! check, the body — with the assertions every test uses.

use reqwest::Response;
use serde_json::Value;

/// An answer: status, headers we care about, and the body as text and JSON.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub content_type: String,
    pub retry_after: Option<String>,
    pub www_authenticate: Option<String>,
    pub text: String,
}

impl Answer {
    pub async fn from(response: Response) -> Self {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header("content-type").unwrap_or_default();
        let retry_after = header("retry-after");
        let www_authenticate = header("www-authenticate");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        Self {
            status,
            content_type,
            retry_after,
            www_authenticate,
            text,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// The `status` word of a success or the `code` of a problem.
    pub fn word(&self) -> String {
        let j = self.json();
        let word = if self.content_type.starts_with("application/problem+json") {
            &j["code"]
        } else if j.get("status").is_some() {
            &j["status"]
        } else {
            &j["state"] // a record, as lookup and the owner's calls show it
        };
        word.as_str().unwrap_or_default().to_owned()
    }

    /// The body as a caller compares two answers: a problem's
    /// `request_id` differs from call to call by design, so it is left out.
    pub fn body_but_request_id(&self) -> String {
        match serde_json::from_str::<Value>(&self.text) {
            Ok(Value::Object(mut members)) => {
                members.remove("request_id");
                Value::Object(members).to_string()
            }
            _ => self.text.clone(),
        }
    }

    pub fn owner_token(&self) -> String {
        self.json()["owner_token"]
            .as_str()
            .expect("owner_token")
            .to_owned()
    }

    #[track_caller]
    pub fn assert(&self, status: u16, word: &str) -> &Self {
        assert_eq!(
            (self.status, self.word().as_str()),
            (status, word),
            "{}",
            self.text
        );
        if status >= 400 {
            assert!(
                self.content_type.starts_with("application/problem+json"),
                "errors are problem+json: {}",
                self.content_type
            );
            assert_eq!(self.json()["status"], status, "problem status member");
        }
        self
    }
}
