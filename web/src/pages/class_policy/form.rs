//! The policy editor's form model: what the form posts (`PolicyForm`), the
//! form filled in from a stored policy, the policy JSON an API client would
//! send for its values, and the page built from it (`policy_page`), each
//! error beside its field.

use actix_web::HttpRequest;
use askama::Template;
use idemkey_api::domain::policy::document::PolicyDocument;
use idemkey_api::domain::{OperationName, Policy};
use idemkey_api::engine::OperationClass;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::format;
use crate::pages::classes::class_url;
use crate::pages::Layout;
use crate::session::{Keys, Session};

#[derive(Template)]
#[template(path = "class_policy.html")]
pub(super) struct PolicyPage {
    layout: Layout,
    /// The class's name; empty for a new class (the form then asks for it).
    operation: String,
    form_action: String,
    /// The class has no stored policy.
    is_default: bool,
    updated: Option<String>,
    pub(super) name: NameField,
    /// An error that belongs to no field of the form.
    form_error: Option<String>,
    durations: Vec<TextField>,
    on_lease_expiry: SelectField,
    pointers: Vec<TextField>,
}

pub(super) struct NameField {
    pub(super) value: String,
    pub(super) error: Option<String>,
}

/// A text input (or textarea) of the form.
struct TextField {
    /// The form field's name and the element's id.
    name: &'static str,
    label: &'static str,
    value: String,
    hint: String,
    error: Option<String>,
}

struct SelectField {
    value: String,
    hint: String,
    error: Option<String>,
}

/// What the form posts; every field is optional text.
#[derive(Deserialize, Default)]
pub struct PolicyForm {
    #[serde(default)]
    pub(super) csrf: String,
    #[serde(default)]
    pub(super) action: String,
    #[serde(default)]
    pub(super) operation: String,
    #[serde(default)]
    replay_window: String,
    #[serde(default)]
    hot_retention: String,
    #[serde(default)]
    lease: String,
    #[serde(default)]
    max_lease: String,
    #[serde(default)]
    max_wait: String,
    #[serde(default)]
    max_outcome_bytes: String,
    #[serde(default)]
    on_lease_expiry: String,
    #[serde(default)]
    include: String,
    #[serde(default)]
    exclude: String,
    #[serde(default)]
    decimal_fields: String,
}

impl PolicyForm {
    /// The form filled in with `policy`, in the API's canonical spelling.
    pub(super) fn of(policy: &Policy) -> Self {
        let doc = PolicyDocument::from_policy(policy);
        let fp = doc.fingerprint.unwrap_or_default();
        let lines = |v: Option<Vec<String>>| v.unwrap_or_default().join("\n");
        Self {
            replay_window: doc.replay_window.unwrap_or_default(),
            hot_retention: doc.hot_retention.unwrap_or_default(),
            lease: doc.lease.unwrap_or_default(),
            max_lease: doc.max_lease.unwrap_or_default(),
            max_wait: doc.max_wait.unwrap_or_default(),
            max_outcome_bytes: doc
                .max_outcome_bytes
                .map(|n| n.to_string())
                .unwrap_or_default(),
            on_lease_expiry: doc.on_lease_expiry.unwrap_or_default(),
            include: lines(fp.include),
            exclude: lines(fp.exclude),
            decimal_fields: lines(fp.decimal_fields),
            ..Self::default()
        }
    }

    /// The policy JSON an API client would send for these values: a field
    /// left empty is left out (so it takes the default, as in a `PUT`), a
    /// pointer list is one pointer per non-blank line.
    pub(super) fn document(&self) -> Value {
        let mut doc = Map::new();
        for (name, text) in [
            ("replay_window", &self.replay_window),
            ("hot_retention", &self.hot_retention),
            ("lease", &self.lease),
            ("max_lease", &self.max_lease),
            ("max_wait", &self.max_wait),
            ("on_lease_expiry", &self.on_lease_expiry),
        ] {
            let text = text.trim();
            if !text.is_empty() {
                doc.insert(name.into(), text.into());
            }
        }
        let bytes = self.max_outcome_bytes.trim();
        if !bytes.is_empty() {
            // A number when it is one (serde then checks its range), the text
            // otherwise (serde then says it is not a number).
            let value = match (bytes.parse::<u64>(), bytes.parse::<i64>()) {
                (Ok(n), _) => Value::from(n),
                (_, Ok(n)) => Value::from(n),
                _ => Value::from(bytes),
            };
            doc.insert("max_outcome_bytes".into(), value);
        }
        let lines = |text: &str| -> Vec<Value> {
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(Value::from)
                .collect()
        };
        doc.insert(
            "fingerprint".into(),
            serde_json::json!({
                "include": lines(&self.include),
                "exclude": lines(&self.exclude),
                "decimal_fields": lines(&self.decimal_fields),
            }),
        );
        Value::Object(doc)
    }
}

/// The editor for `class` (or a new class when `None`) holding `form`'s
/// values, with `error` (field, message) beside its field.
pub(super) fn policy_page(
    req: &HttpRequest,
    session: &Session,
    class: Option<(&OperationName, &OperationClass)>,
    form: &PolicyForm,
    error: Option<(String, String)>,
) -> PolicyPage {
    // `fingerprint.include[2]` is about the include list.
    let (field, message) = error.unwrap_or_default();
    let field = field.split('[').next().unwrap_or_default().to_owned();
    let mut placed = false;
    let mut error_for = |name: &str| -> Option<String> {
        let hit = !message.is_empty() && field == name;
        placed |= hit;
        hit.then(|| message.clone())
    };
    let d = PolicyForm::of(&Policy::default());
    let text = |name, label, value: &str, hint: String, error| TextField {
        name,
        label,
        value: value.to_owned(),
        hint,
        error,
    };
    let durations = vec![
        text(
            "replay_window",
            "Replay window",
            &form.replay_window,
            format!("How long a key is protected, from its first claim. Default {}; at most 365d.", d.replay_window),
            error_for("replay_window"),
        ),
        text(
            "hot_retention",
            "Hot retention",
            &form.hot_retention,
            format!("How long the full record stays in the database before tiering; at most the replay window. Default {}.", d.hot_retention),
            error_for("hot_retention"),
        ),
        text(
            "lease",
            "Lease",
            &form.lease,
            format!("How long an owner holds a key without a heartbeat; at most the maximum lease. Default {}.", d.lease),
            error_for("lease"),
        ),
        text(
            "max_lease",
            "Maximum lease",
            &form.max_lease,
            format!("The longest lease a claim may ask for; at most 1d. Default {}.", d.max_lease),
            error_for("max_lease"),
        ),
        text(
            "max_wait",
            "Maximum wait",
            &form.max_wait,
            format!("The cap on a duplicate's wait_ms; at most 1m. Default {}.", d.max_wait),
            error_for("max_wait"),
        ),
        text(
            "max_outcome_bytes",
            "Maximum outcome size (bytes)",
            &form.max_outcome_bytes,
            format!("The largest outcome an owner may store. Default {} ({}).", d.max_outcome_bytes, format::bytes(Policy::default().max_outcome_bytes)),
            error_for("max_outcome_bytes"),
        ),
    ];
    let on_lease_expiry = SelectField {
        value: form.on_lease_expiry.clone(),
        hint: "What the next claim does with a key whose lease ran out: take it over and retry, \
               or quarantine it for an admin to resolve."
            .to_owned(),
        error: error_for("on_lease_expiry"),
    };
    let pointers = vec![
        text(
            "include",
            "Fingerprint: include",
            &form.include,
            "JSON pointers (one per line, such as /amount) of the only request fields that count. Empty: the whole request.".to_owned(),
            error_for("fingerprint.include"),
        ),
        text(
            "exclude",
            "Fingerprint: exclude",
            &form.exclude,
            "JSON pointers of request fields that never count, such as /request_id.".to_owned(),
            error_for("fingerprint.exclude"),
        ),
        text(
            "decimal_fields",
            "Fingerprint: decimal fields",
            &form.decimal_fields,
            "JSON pointers of amounts compared as decimals, so \"25.00\" and 25.0 match.".to_owned(),
            error_for("fingerprint.decimal_fields"),
        ),
    ];
    let form_error = (!placed && !message.is_empty()).then_some(message);
    let (operation, form_action, is_default, updated) = match class {
        Some((op, class)) => (
            op.as_str().to_owned(),
            class_url(op.as_str()),
            class.is_default,
            class.updated_at.map(format::when),
        ),
        None => (String::new(), "/dashboard/classes".to_owned(), true, None),
    };
    let title = if operation.is_empty() {
        "New class policy".to_owned()
    } else {
        format!("Policy of {operation}")
    };
    PolicyPage {
        layout: Layout::new(title, "classes", session, &Keys::of(req)),
        operation,
        form_action,
        is_default,
        updated,
        name: NameField {
            value: form.operation.trim().to_owned(),
            error: None,
        },
        form_error,
        durations,
        on_lease_expiry,
        pointers,
    }
}
