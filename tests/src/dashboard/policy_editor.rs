//! Fixtures of the class policy editor's tests (`dashboard_classes.rs`,
//! `dashboard_classes_saving.rs`): the editor's address, a complete form as
//! it posts it, an admin on the editor with the session's CSRF token, and
//! the policy as the API answers it.

use serde_json::Value;

use super::fixtures::admin;
use super::Visitor;
use crate::TestApp;

/// The editor of `charges.create`.
pub const EDIT: &str = "/dashboard/classes/charges.create";

/// The class's policy as `GET /v1/operation-classes/{op}` answers it.
pub async fn api_policy(app: &TestApp, operation: &str) -> Value {
    let answer = app.get_class(operation).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    answer.json()
}

/// A complete form as the editor posts it, with `changes` applied.
pub fn form<'a>(csrf: &'a str, changes: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut fields = vec![
        ("csrf", csrf),
        ("action", "save"),
        ("replay_window", "1d"),
        ("hot_retention", "1h"),
        ("lease", "30s"),
        ("max_lease", "1h"),
        ("max_wait", "10s"),
        ("max_outcome_bytes", "1048576"),
        ("on_lease_expiry", "takeover"),
        ("include", ""),
        ("exclude", ""),
        ("decimal_fields", ""),
    ];
    for (name, value) in changes {
        match fields.iter_mut().find(|(n, _)| n == name) {
            Some(field) => field.1 = value,
            None => fields.push((name, value)),
        }
    }
    fields
}

/// An admin signed in on the editor of `charges.create`, and the session's
/// CSRF token.
pub async fn admin_on_edit_page(app: &TestApp) -> (Visitor, String) {
    let visitor = Visitor::signed_in(app, &admin(app)).await;
    let page = visitor.get(EDIT).await;
    assert_eq!(page.status, 200, "{}", page.text);
    let csrf = page.csrf();
    (visitor, csrf)
}
