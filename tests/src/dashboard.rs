//! A minimal form-posting, cookie-keeping HTTP client for dashboard tests:
//! what a browser with JavaScript off does, without the browser; with the
//! dashboard tests' fixtures (`fixtures`, and `policy_editor` for the
//! class policy editor's form).

pub mod fixtures;
pub mod policy_editor;

use std::collections::BTreeMap;
use std::sync::Mutex;

use reqwest::header::HeaderMap;
use reqwest::redirect::Policy;

use crate::TestApp;

/// One browser's view of the dashboard: its own cookie jar.
pub struct Visitor {
    base: String,
    client: reqwest::Client,
    cookies: Mutex<BTreeMap<String, String>>,
    /// Sent with every request (such as a proxy's `X-Forwarded-Proto`).
    headers: Vec<(String, String)>,
}

/// A page as received (redirects are not followed).
#[derive(Debug)]
pub struct Page {
    pub status: u16,
    pub headers: HeaderMap,
    pub text: String,
}

impl Page {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn location(&self) -> Option<&str> {
        self.header("location")
    }

    /// Every `Set-Cookie` line.
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect()
    }

    /// The `Set-Cookie` line of cookie `name`.
    pub fn set_cookie(&self, name: &str) -> Option<String> {
        self.set_cookies()
            .into_iter()
            .find(|c| c.starts_with(&format!("{name}=")))
    }

    /// The value of the first hidden `csrf` field on the page.
    #[track_caller]
    pub fn csrf(&self) -> String {
        let marker = r#"name="csrf" value=""#;
        let start = self.text.find(marker).expect("a form with a CSRF token") + marker.len();
        let end = self.text[start..].find('"').expect("closing quote");
        self.text[start..start + end].to_owned()
    }

    #[track_caller]
    pub fn assert_contains(&self, needle: &str) -> &Self {
        assert!(
            self.text.contains(needle),
            "page ({}) lacks {needle:?}:\n{}",
            self.status,
            self.text
        );
        self
    }
}

impl Visitor {
    pub fn new(app: &TestApp) -> Self {
        Self {
            base: app.address.clone(),
            client: reqwest::Client::builder()
                .redirect(Policy::none())
                .build()
                .expect("client"),
            cookies: Mutex::new(BTreeMap::new()),
            headers: Vec::new(),
        }
    }

    /// A browser that reaches `app` over HTTPS through a proxy which says
    /// so with `X-Forwarded-Proto: https` (as deploy/nginx.conf does).
    pub fn behind_https_proxy(app: &TestApp) -> Self {
        let mut visitor = Self::new(app);
        visitor
            .headers
            .push(("x-forwarded-proto".into(), "https".into()));
        visitor
    }

    /// The same browser (cookies and headers) pointed at another server.
    pub fn on(&self, app: &TestApp) -> Self {
        Self {
            base: app.address.clone(),
            client: self.client.clone(),
            cookies: Mutex::new(self.cookies.lock().unwrap().clone()),
            headers: self.headers.clone(),
        }
    }

    pub async fn get(&self, path: &str) -> Page {
        let request = self.client.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        self.post_with(path, form, &[]).await
    }

    pub async fn post_with(
        &self,
        path: &str,
        form: &[(&str, &str)],
        headers: &[(&str, &str)],
    ) -> Page {
        let mut request = self.client.post(format!("{}{path}", self.base)).form(form);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send(request).await
    }

    async fn send(&self, mut request: reqwest::RequestBuilder) -> Page {
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let jar = self.cookie_header();
        if !jar.is_empty() {
            request = request.header("cookie", jar);
        }
        let response = request.send().await.expect("request");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let page = Page {
            status,
            headers,
            text: response.text().await.expect("body"),
        };
        self.keep(&page);
        page
    }

    fn cookie_header(&self) -> String {
        let cookies = self.cookies.lock().unwrap();
        cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep(&self, page: &Page) {
        let mut cookies = self.cookies.lock().unwrap();
        for line in page.set_cookies() {
            let pair = line.split(';').next().unwrap_or_default();
            let Some((name, value)) = pair.split_once('=') else {
                continue;
            };
            let removed = value.is_empty() || line.to_ascii_lowercase().contains("max-age=0");
            if removed {
                cookies.remove(name);
            } else {
                cookies.insert(name.to_owned(), value.to_owned());
            }
        }
    }

    pub fn cookie(&self, name: &str) -> Option<String> {
        self.cookies.lock().unwrap().get(name).cloned()
    }

    pub fn set_cookie(&self, name: &str, value: &str) {
        self.cookies
            .lock()
            .unwrap()
            .insert(name.to_owned(), value.to_owned());
    }

    /// Opens the sign-in form and submits `token` with the form's token.
    pub async fn sign_in(&self, token: &str) -> Page {
        let form = self.get("/dashboard/sign-in").await;
        assert_eq!(form.status, 200, "{}", form.text);
        self.post(
            "/dashboard/sign-in",
            &[("csrf", &form.csrf()), ("token", token)],
        )
        .await
    }

    /// Signs in and checks it worked.
    pub async fn signed_in(app: &TestApp, token: &str) -> Self {
        let visitor = Self::new(app);
        let page = visitor.sign_in(token).await;
        assert_eq!(
            (page.status, page.location()),
            (303, Some("/dashboard")),
            "{}",
            page.text
        );
        visitor
    }
}
