use std::time::Duration;

use super::signature::WebhookSecret;
use super::{backoff, EndpointSpec, EventKind, RawSpec, MAX_BACKOFF};

fn events(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

#[test]
fn a_signature_matches_the_standard_webhooks_example() {
    // The example of the Standard Webhooks specification.
    let secret = WebhookSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
    let body = br#"{"test": 2432232314}"#;
    let signature = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
    assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    assert!(secret.verify(
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        1614265330,
        body,
        &format!("v1,bm90IGl0 {signature}")
    ));
    assert!(!secret.verify("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, body, &signature));
}

#[test]
fn secrets_are_prefixed_base64() {
    let secret = WebhookSecret::from_bytes([7; 24]);
    let text = secret.expose();
    assert!(text.starts_with("whsec_"));
    assert_eq!(WebhookSecret::parse(&text), Some(secret));
    assert_eq!(WebhookSecret::parse("whsec_"), None);
    assert_eq!(
        WebhookSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
        None
    );
}

#[test]
fn backoff_doubles_is_capped_and_jittered() {
    let base = Duration::from_secs(30);
    assert_eq!(backoff(1, base, 0.5), base);
    assert_eq!(backoff(2, base, 0.5), base * 2);
    assert_eq!(backoff(4, base, 0.5), base * 8);
    assert_eq!(backoff(40, base, 0.5), MAX_BACKOFF);
    assert_eq!(backoff(1, base, 0.0), base.mul_f64(0.75));
    assert_eq!(backoff(1, base, 1.0), base.mul_f64(1.25));
}

#[test]
fn settings_name_what_they_need() {
    let all = events(&[
        "quarantined",
        "stuck",
        "taken_over",
        "key_reused_spike",
        "stuck",
    ]);
    let spec = EndpointSpec::parse(&RawSpec {
        url: "https://example.com/hooks?x=1",
        events: &all,
        stuck_after: Some("5m"),
        spike_threshold: Some(10),
        spike_window: Some("1m"),
    })
    .unwrap();
    assert_eq!(spec.events, EventKind::ALL.to_vec());
    assert_eq!(spec.stuck_after, Some(Duration::from_secs(300)));
    assert_eq!(spec.spike, Some((10, Duration::from_secs(60))));

    let only = events(&["quarantined"]);
    let refused = |raw: RawSpec<'_>| EndpointSpec::parse(&raw).unwrap_err().0;
    let base = RawSpec {
        url: "http://127.0.0.1:9/x",
        events: &only,
        ..RawSpec::default()
    };
    assert!(EndpointSpec::parse(&base).is_ok());
    for (raw, field) in [
        (
            RawSpec {
                url: "ftp://x",
                ..base.clone()
            },
            "url",
        ),
        (
            RawSpec {
                url: "https://u:p@x/",
                ..base.clone()
            },
            "url",
        ),
        (
            RawSpec {
                url: "https:///x",
                ..base.clone()
            },
            "url",
        ),
        (
            RawSpec {
                url: "https://x/a b",
                ..base.clone()
            },
            "url",
        ),
        (
            RawSpec {
                events: &[],
                ..base.clone()
            },
            "events",
        ),
        (
            RawSpec {
                stuck_after: Some("5m"),
                ..base.clone()
            },
            "stuck_after",
        ),
        (
            RawSpec {
                spike_threshold: Some(3),
                ..base.clone()
            },
            "spike_threshold",
        ),
    ] {
        assert!(refused(raw.clone()).starts_with(field), "{raw:?}");
    }
    let stuck = events(&["stuck"]);
    for after in [None, Some("0s"), Some("8d"), Some("soon")] {
        let raw = RawSpec {
            events: &stuck,
            stuck_after: after,
            ..base.clone()
        };
        assert!(refused(raw).starts_with("stuck_after"), "{after:?}");
    }
    let spike = events(&["key_reused_spike"]);
    for (n, window) in [
        (Some(0), Some("1m")),
        (Some(201), Some("1m")),
        (Some(5), Some("2d")),
        (None, Some("1m")),
    ] {
        let raw = RawSpec {
            events: &spike,
            spike_threshold: n,
            spike_window: window,
            ..base.clone()
        };
        assert!(refused(raw).starts_with("spike_"), "{n:?} {window:?}");
    }
    let unknown = events(&["exploded"]);
    assert!(refused(RawSpec {
        events: &unknown,
        ..base
    })
    .starts_with("events"));
}
