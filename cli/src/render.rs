//! The tables of the API's answers: a key record, a page of keys, a policy.
//! Each reads the answer through the Rust client's types, so a table shows
//! what the SDK understands; `--json` shows the rest unchanged.

use chrono::Utc;
use idemkey_client::{KeyPage, KeyRecord, KeyState, Policy};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::exit::Failure;
use crate::table::{age, fields, opt_time, time, Table};

/// Decodes an answer into one of the SDK's types.
pub fn decode<T: DeserializeOwned>(answer: &Value) -> Result<T, Failure> {
    serde_json::from_value(answer.clone()).map_err(|e| {
        Failure::Api(idemkey_client::Error::UnexpectedResponse {
            status: 200,
            problem: None,
            message: format!("unexpected answer: {e}"),
        })
    })
}

/// A state as the API writes it.
pub fn state(s: KeyState) -> &'static str {
    match s {
        KeyState::InProgress => "in_progress",
        KeyState::Completed => "completed",
        KeyState::Quarantined => "quarantined",
        _ => "unknown",
    }
}

fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".to_owned())
}

/// One key: its fields, then its steps and its history as tables.
pub fn key_record(answer: &Value) -> Result<String, Failure> {
    let r: KeyRecord = decode(answer)?;
    let outcome = r.outcome.as_ref().map(|o| {
        let body = o.body.as_ref().map(Value::to_string).unwrap_or_default();
        format!("{} {body}", o.status_code).trim_end().to_owned()
    });
    let mut out = fields(&[
        ("operation", r.operation.clone()),
        ("key", r.key.clone()),
        ("state", state(r.state).to_owned()),
        ("attempt", r.attempt.to_string()),
        ("effect_id", r.effect_id.clone()),
        ("tier", r.tier.clone()),
        ("created_at", time(&r.created_at)),
        ("claimed_at", time(&r.claimed_at)),
        ("lease_expires_at", opt_time(r.lease_expires_at.as_ref())),
        ("completed_at", opt_time(r.completed_at.as_ref())),
        ("expires_at", time(&r.expires_at)),
        ("quarantine_reason", or_dash(r.quarantine_reason.clone())),
        ("outcome", or_dash(outcome)),
    ]);
    if !r.steps.is_empty() {
        let mut steps = Table::new(&["step", "provider_ref", "done_at", "effect_id"]);
        for (name, s) in &r.steps {
            steps.row(vec![
                name.clone(),
                s.provider_ref.clone(),
                time(&s.done_at),
                s.effect_id.clone(),
            ]);
        }
        out.push('\n');
        out.push_str(&steps.render());
    }
    if !r.history.is_empty() {
        let mut history = Table::new(&["at", "event", "attempt", "details"]);
        for e in &r.history {
            let details: Vec<String> = e
                .extra
                .iter()
                .map(|(k, v)| match v.as_str() {
                    Some(s) => format!("{k}={s}"),
                    None => format!("{k}={v}"),
                })
                .collect();
            history.row(vec![
                time(&e.at),
                e.event.clone(),
                e.attempt.map_or_else(|| "-".to_owned(), |a| a.to_string()),
                details.join(" "),
            ]);
        }
        out.push('\n');
        out.push_str(&history.render());
    }
    Ok(out)
}

/// A page of keys; the next page's command when there is one.
pub fn key_page(answer: &Value) -> Result<String, Failure> {
    let page: KeyPage = decode(answer)?;
    if page.items.is_empty() {
        return Ok("no keys\n".to_owned());
    }
    let now = Utc::now();
    let mut t = Table::new(&[
        "operation",
        "key",
        "state",
        "attempt",
        "age",
        "lease_expires_at",
        "expires_at",
    ]);
    for k in &page.items {
        t.row(vec![
            k.operation.clone(),
            k.key.clone(),
            state(k.state).to_owned(),
            k.attempt.to_string(),
            age(&k.created_at, &now),
            opt_time(k.lease_expires_at.as_ref()),
            time(&k.expires_at),
        ]);
    }
    let mut out = t.render();
    if let Some(c) = page.next_cursor {
        out.push_str(&format!("more: --cursor {c}\n"));
    }
    Ok(out)
}

/// An operation class's policy.
pub fn policy(answer: &Value) -> Result<String, Failure> {
    let p: Policy = decode(answer)?;
    let fp = p.fingerprint.clone().unwrap_or_default();
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_owned()
        } else {
            v.join(", ")
        }
    };
    Ok(fields(&[
        ("replay_window", or_dash(p.replay_window)),
        ("hot_retention", or_dash(p.hot_retention)),
        ("lease", or_dash(p.lease)),
        ("max_lease", or_dash(p.max_lease)),
        ("max_wait", or_dash(p.max_wait)),
        (
            "max_outcome_bytes",
            or_dash(p.max_outcome_bytes.map(|b| b.to_string())),
        ),
        ("on_lease_expiry", or_dash(p.on_lease_expiry)),
        ("fingerprint.include", list(&fp.include)),
        ("fingerprint.exclude", list(&fp.exclude)),
        ("fingerprint.decimal_fields", list(&fp.decimal_fields)),
        (
            "default",
            if p.default {
                "yes (no policy of its own)"
            } else {
                "no"
            }
            .to_owned(),
        ),
    ]))
}
