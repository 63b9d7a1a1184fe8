//! Fixtures of the dashboard tests: tokens for the app's tenant by role, a
//! quarantined key to act on, and reading a figure off the overview.

use idemkey_api::auth::Role;
use serde_json::json;

use super::Page;
use crate::TestApp;

const OP: &str = "charges.create";

/// Claims `key` of `charges.create` and quarantines it (an ambiguous
/// outcome, awaiting a decision).
pub async fn quarantined_key(app: &TestApp, key: &str) {
    let owner = app
        .claim(OP, key, json!({"amount": 1}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.call(
        OP,
        key,
        "quarantine",
        json!({"owner_token": owner, "reason": "provider timed out"}),
    )
    .await
    .assert(200, "quarantined");
}

pub fn admin(app: &TestApp) -> String {
    app.token_with(&[Role::Admin])
}

pub fn viewer(app: &TestApp) -> String {
    app.token_with(&[Role::Viewer])
}

/// The figure under `label` on the overview (`<dt>label</dt><dd>value</dd>`).
#[track_caller]
pub fn figure(page: &Page, label: &str) -> String {
    let marker = format!("<dt>{label}</dt><dd>");
    let start = page
        .text
        .find(&marker)
        .unwrap_or_else(|| panic!("no figure {label:?}:\n{}", page.text))
        + marker.len();
    let end = page.text[start..].find("</dd>").expect("closing dd");
    page.text[start..start + end].to_owned()
}
