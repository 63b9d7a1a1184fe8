//! Policy documents under random input: random members with random values
//! (mostly near the allowed ranges, sometimes of any JSON type), and random
//! text. Whatever the input: no panic; an accepted document means what it
//! says and reads back the same from its canonical form; a refused one names
//! a member it has (or `policy` for the document as a whole).

use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Map, Value};

use super::*;
use crate::domain::duration::parse_duration;
use crate::proptest_config::config;

const DURATIONS: [&str; 5] = [
    "replay_window",
    "hot_retention",
    "lease",
    "max_lease",
    "max_wait",
];
const LISTS: [&str; 3] = ["include", "exclude", "decimal_fields"];

fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e20f64..1e20).prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "[0-9]{1,4}(ms|s|m|h|d)?".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,8}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Mostly a duration from 1 s to `max_ms` in one of its spellings,
/// sometimes any duration, any text or any value.
fn duration_value(max_ms: u64) -> impl Strategy<Value = Value> {
    let unit = select(&["ms", "s", "m", "h", "d"][..]);
    let within = (1_000..=max_ms, 0..3u8).prop_map(|(ms, how)| match how {
        0 => json!(format!("{ms}ms")),
        1 => json!(format!("{}s", ms / 1_000)),
        _ => json!(format_duration(Duration::from_millis(ms))),
    });
    prop_oneof![
        10 => within,
        1 => (0u64..400, unit).prop_map(|(n, u)| json!(format!("{n}{u}"))),
        1 => "[0-9]{1,14}[a-z ]{0,2}".prop_map(Value::String),
        1 => any_value(),
    ]
}

fn pointer() -> impl Strategy<Value = String> {
    prop_oneof![
        16 => "(/([a-z0-9]|~[01]){0,3}){0,3}",
        1 => "(/[a-z0-9~]{0,3}){0,3}",
        1 => "[a-z~]{1,3}",
        1 => any::<String>(),
        1 => Just(format!("/{}", "a".repeat(MAX_POINTER_BYTES))),
    ]
}

fn pointer_list() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => prop::collection::vec(pointer().prop_map(Value::String), 0..4).prop_map(Value::Array),
        1 => prop::collection::vec(Just(json!("/a")), MAX_POINTERS - 1..MAX_POINTERS + 2)
            .prop_map(Value::Array),
        1 => any_value(),
    ]
}

fn fingerprint_value() -> impl Strategy<Value = Value> {
    let member = prop_oneof![9 => select(&LISTS[..]), 1 => Just("salt")];
    prop_oneof![
        6 => prop::collection::btree_map(member, pointer_list(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        1 => any_value(),
    ]
}

/// An object with a random subset of the policy's members (and sometimes an
/// unknown one).
fn document() -> impl Strategy<Value = Map<String, Value>> {
    let some =
        |p, max: Duration| proptest::option::weighted(p, duration_value(max.as_millis() as u64));
    let bytes = prop_oneof![
        4 => (1u64..=MAX_OUTCOME_BYTES_CEILING as u64).prop_map(Value::from),
        1 => (MAX_OUTCOME_BYTES_CEILING as u64..u64::MAX).prop_map(Value::from),
        1 => any_value(),
    ];
    let expiry = prop_oneof![
        2 => select(&["takeover", "quarantine"][..]).prop_map(Value::from),
        1 => any_value(),
    ];
    (
        [
            some(0.5, MAX_REPLAY_WINDOW),
            some(0.4, Duration::from_secs(3600)),
            some(0.4, Duration::from_secs(30)),
            some(0.4, MAX_LEASE_CEILING),
            some(0.4, MAX_WAIT_CEILING),
        ],
        proptest::option::weighted(0.3, bytes),
        proptest::option::weighted(0.3, expiry),
        proptest::option::weighted(0.5, fingerprint_value()),
        proptest::option::weighted(
            0.2,
            prop_oneof![3 => any::<bool>().prop_map(Value::Bool), 1 => any_value()],
        ),
        proptest::option::weighted(0.1, ("[a-z_]{0,14}", any_value())),
    )
        .prop_map(
            |(durations, bytes, expiry, fingerprint, default, unknown)| {
                let mut doc = Map::new();
                let named = DURATIONS.iter().zip(durations);
                let named = named.chain([
                    (&"max_outcome_bytes", bytes),
                    (&"on_lease_expiry", expiry),
                    (&"fingerprint", fingerprint),
                    (&"default", default),
                ]);
                for (name, value) in named {
                    if let Some(value) = value {
                        doc.insert((*name).to_owned(), value);
                    }
                }
                if let Some((name, value)) = unknown {
                    doc.insert(name, value);
                }
                doc
            },
        )
}

/// A policy that satisfies every documented bound, built directly.
fn valid_policy() -> impl Strategy<Value = Policy> {
    let ms =
        |lo: u64, hi: u64| prop_oneof![(lo..=hi), (lo / 1000..=hi / 1000).prop_map(|s| s * 1000)];
    let pointers = || prop::collection::vec("(/([a-z0-9]|~[01]){0,3}){0,3}", 0..4);
    (
        ms(1_000, MAX_REPLAY_WINDOW.as_millis() as u64),
        ms(1_000, MAX_LEASE_CEILING.as_millis() as u64),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>()),
        ms(1_000, MAX_WAIT_CEILING.as_millis() as u64),
        1..=MAX_OUTCOME_BYTES_CEILING,
        any::<bool>(),
        (pointers(), pointers(), pointers()),
    )
        .prop_map(
            |(
                window,
                max_lease,
                (hot, lease),
                wait,
                bytes,
                quarantine,
                (include, exclude, decimal_fields),
            )| {
                let within = |i: prop::sample::Index, max: u64| {
                    1_000 + i.index((max - 1_000 + 1) as usize) as u64
                };
                Policy {
                    replay_window: Duration::from_millis(window),
                    hot_retention: Duration::from_millis(within(hot, window)),
                    lease: Duration::from_millis(within(lease, max_lease)),
                    max_lease: Duration::from_millis(max_lease),
                    max_wait: Duration::from_millis(wait),
                    max_outcome_bytes: bytes,
                    on_lease_expiry: if quarantine {
                        LeaseExpiry::Quarantine
                    } else {
                        LeaseExpiry::Takeover
                    },
                    fingerprint: FingerprintRules {
                        include,
                        exclude,
                        decimal_fields,
                    },
                }
            },
        )
}

/// The duration a member spells, or `None` when it is absent or null.
fn given(doc: &Map<String, Value>, name: &str) -> Option<Duration> {
    match doc.get(name) {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(parse_duration(v.as_str().expect("accepted, so a string")).expect("accepted"))
        }
    }
}

fn check_bounds(p: &Policy) -> Result<(), TestCaseError> {
    prop_assert!((MIN_DURATION..=MAX_REPLAY_WINDOW).contains(&p.replay_window));
    prop_assert!((MIN_DURATION..=p.replay_window).contains(&p.hot_retention));
    prop_assert!((MIN_DURATION..=MAX_LEASE_CEILING).contains(&p.max_lease));
    prop_assert!((MIN_LEASE..=p.max_lease).contains(&p.lease));
    prop_assert!((MIN_DURATION..=MAX_WAIT_CEILING).contains(&p.max_wait));
    prop_assert!((1..=MAX_OUTCOME_BYTES_CEILING).contains(&p.max_outcome_bytes));
    prop_assert_eq!(p.fingerprint.validate(), Ok(()));
    let rules = &p.fingerprint;
    for list in [&rules.include, &rules.exclude, &rules.decimal_fields] {
        prop_assert!(
            list.len() <= MAX_POINTERS && list.iter().all(|p| p.len() <= MAX_POINTER_BYTES)
        );
    }
    Ok(())
}

fn check_round_trip(p: &Policy) -> Result<(), TestCaseError> {
    let canonical = p.to_json();
    prop_assert_eq!(
        Policy::from_json(canonical.as_bytes()),
        Ok(p.clone()),
        "{}",
        canonical
    );
    prop_assert_eq!(PolicyDocument::from_policy(p).into_policy(), Ok(p.clone()));
    let again = Policy::from_json(canonical.as_bytes()).map(|p| p.to_json());
    prop_assert_eq!(again, Ok(canonical));
    Ok(())
}

/// A refusal names a member the input has (`policy`: the whole document),
/// and its message starts with that name.
fn check_refusal(e: &InvalidPolicy, keys: &[String]) -> Result<(), TestCaseError> {
    prop_assert!(e.message.starts_with(&e.field), "{:?}", e);
    let names_a_member = keys.iter().any(|k| {
        e.field == *k
            || e.field.starts_with(&format!("{k}."))
            || e.field.starts_with(&format!("{k}["))
    });
    prop_assert!(
        e.field == "policy" || names_a_member,
        "{:?} for members {:?}",
        e,
        keys
    );
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_document_is_accepted_as_it_says_or_refused_naming_a_member(doc in document()) {
        let text = Value::Object(doc.clone()).to_string();
        let keys: Vec<String> = doc.keys().cloned().collect();
        let p = match Policy::from_json(text.as_bytes()) {
            Ok(p) => p,
            Err(PolicyJsonError::Invalid(e)) => return check_refusal(&e, &keys),
            Err(PolicyJsonError::Syntax(e)) => return Err(TestCaseError::fail(format!("{text}: syntax error {e}"))),
        };
        check_bounds(&p)?;
        check_round_trip(&p)?;
        let d = Policy::default();
        let window = given(&doc, "replay_window").unwrap_or(d.replay_window);
        let max_lease = given(&doc, "max_lease").unwrap_or(d.max_lease);
        prop_assert_eq!(p.replay_window, window);
        prop_assert_eq!(p.hot_retention, given(&doc, "hot_retention").unwrap_or(d.hot_retention.min(window)));
        prop_assert_eq!(p.max_lease, max_lease);
        prop_assert_eq!(p.lease, given(&doc, "lease").unwrap_or(d.lease.min(max_lease)));
        prop_assert_eq!(p.max_wait, given(&doc, "max_wait").unwrap_or(d.max_wait));
        let bytes = doc.get("max_outcome_bytes").and_then(Value::as_u64);
        prop_assert_eq!(p.max_outcome_bytes as u64, bytes.unwrap_or(d.max_outcome_bytes as u64));
        let fingerprint = doc.get("fingerprint").filter(|v| !v.is_null());
        for (name, got) in LISTS.iter().zip([&p.fingerprint.include, &p.fingerprint.exclude, &p.fingerprint.decimal_fields]) {
            let listed = fingerprint.and_then(|f| f.get(name)).filter(|v| !v.is_null());
            let expected: Vec<String> = listed.map(|v| serde_json::from_value(v.clone()).expect("accepted")).unwrap_or_default();
            prop_assert_eq!(got, &expected);
        }
    }

    #[test]
    fn random_text_is_never_a_panic_and_an_accepted_one_round_trips(
        text in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..64),
            any::<String>().prop_map(String::into_bytes),
            document().prop_map(|d| {
                let mut t = Value::Object(d).to_string().into_bytes();
                t.truncate(t.len() / 2 + 1);
                t
            }),
        ]
    ) {
        match Policy::from_json(&text) {
            Ok(p) => check_round_trip(&p)?,
            Err(PolicyJsonError::Invalid(e)) => prop_assert!(e.message.starts_with(&e.field), "{:?}", e),
            Err(PolicyJsonError::Syntax(_)) => {}
        }
    }

    #[test]
    fn a_policy_or_its_fingerprint_member_that_is_not_an_object_is_refused(
        items in prop::collection::vec(prop_oneof![duration_value(MAX_REPLAY_WINDOW.as_millis() as u64), pointer_list()], 0..10),
        nested in any::<bool>(),
    ) {
        let text = if nested {
            json!({ "fingerprint": items }).to_string()
        } else {
            Value::Array(items).to_string()
        };
        let field = if nested { "fingerprint" } else { "policy" };
        match Policy::from_json(text.as_bytes()) {
            Err(PolicyJsonError::Invalid(e)) => prop_assert!(e.field.starts_with(field), "{:?}", e),
            other => prop_assert!(false, "{}: {:?}", text, other),
        }
    }

    #[test]
    fn every_policy_within_the_bounds_reads_back_from_its_canonical_form(p in valid_policy()) {
        check_bounds(&p)?;
        check_round_trip(&p)?;
    }
}
