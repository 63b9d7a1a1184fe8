//! The low-level calls against a real server: owner calls and fencing,
//! release, quarantine, resolve, list, operation classes, typed errors.

use std::time::Duration;

use idemkey_client::{
    new_key, Claim, ClaimOptions, Client, Error, FingerprintRules, KeyState, ListQuery, Outcome,
    OwnedClaim, Policy, Protected, Resolution, Resolved,
};
use serde_json::json;

use crate::support::TestServer;

fn protected() -> Protected {
    Protected::Request(json!({"amount": "5.00", "currency": "EUR"}))
}

async fn owned(client: &Client, operation: &str, key: &str) -> OwnedClaim {
    match client
        .claim(operation, key, &protected(), &ClaimOptions::default())
        .await
        .expect("claim")
    {
        Claim::Owned(o) => o,
        other => panic!("not owned: {other:?}"),
    }
}

#[tokio::test]
async fn owner_calls_are_fenced_by_the_owner_token() {
    let server = TestServer::start().await;
    let client = server.client();
    // Percent-encoded as one path segment.
    let key = format!("order/42?x=1#%+{}", new_key());
    let lease = ClaimOptions {
        wait: None,
        lease: Some(Duration::from_secs(5)),
    };
    let Claim::Owned(c) = client
        .claim("charges.create", &key, &protected(), &lease)
        .await
        .expect("claim")
    else {
        panic!("not owned")
    };
    assert!(!c.recovering && c.attempt == 1 && c.effect_id.starts_with("eff_"));

    let rec = client
        .heartbeat(
            "charges.create",
            &key,
            &c.owner_token,
            Some(Duration::from_secs(20)),
        )
        .await
        .expect("heartbeat");
    assert_eq!(
        (rec.state, rec.key.as_str()),
        (KeyState::InProgress, key.as_str())
    );
    assert!(rec.lease_expires_at.expect("lease") > c.lease_expires_at);
    let rec = client
        .record_step("charges.create", &key, &c.owner_token, "charge", "ch_9")
        .await
        .expect("step");
    assert_eq!(
        rec.steps["charge"].effect_id,
        format!("{}.charge", c.effect_id)
    );
    // A repeat with the same ref is safe; another ref conflicts.
    client
        .record_step("charges.create", &key, &c.owner_token, "charge", "ch_9")
        .await
        .expect("repeat");
    let err = client
        .record_step("charges.create", &key, &c.owner_token, "charge", "ch_x")
        .await;
    assert!(matches!(err, Err(Error::StepConflict(_))), "{err:?}");
    let err = client
        .record_step("charges.create", &key, &c.owner_token, "Bad Step", "x")
        .await;
    assert!(matches!(err, Err(Error::InvalidStep(_))), "{err:?}");
    let err = client
        .complete("charges.create", &key, "not-the-token", &Outcome::new(201))
        .await;
    assert!(matches!(err, Err(Error::LeaseLost(_))), "{err:?}");

    let outcome = Outcome::new(201).body(json!({"n": 1}));
    let rec = client
        .complete("charges.create", &key, &c.owner_token, &outcome)
        .await
        .expect("complete");
    assert_eq!(
        (rec.state, rec.outcome.as_ref()),
        (KeyState::Completed, Some(&outcome))
    );
    client
        .complete("charges.create", &key, &c.owner_token, &outcome)
        .await
        .expect("same again");
    let err = client
        .complete("charges.create", &key, &c.owner_token, &Outcome::new(500))
        .await;
    assert!(matches!(err, Err(Error::AlreadyCompleted(_))), "{err:?}");
    let Claim::Completed(replay) = client
        .claim(
            "charges.create",
            &key,
            &protected(),
            &ClaimOptions::default(),
        )
        .await
        .expect("replay")
    else {
        panic!("no replay")
    };
    assert!(replay.replayed);
    assert_eq!(replay.outcome, outcome);
    let looked = client
        .lookup("charges.create", &key)
        .await
        .expect("lookup")
        .expect("record");
    let events: Vec<&str> = looked.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(&events[..2], ["claimed", "step"]);
    assert_eq!(looked.history[1].extra.get("step"), Some(&json!("charge")));
}

#[tokio::test]
async fn release_quarantine_resolve_and_list() {
    let server = TestServer::start().await;
    let client = server.client();
    let (k1, k2, k3) = (new_key(), new_key(), new_key());
    let c1 = owned(&client, "env.provision", &k1).await;
    client
        .release("env.provision", &k1, &c1.owner_token)
        .await
        .expect("release");
    // A retried release finds nothing: fine.
    client
        .release("env.provision", &k1, &c1.owner_token)
        .await
        .expect("release again");
    assert_eq!(
        client.lookup("env.provision", &k1).await.expect("lookup"),
        None
    );

    let c2 = owned(&client, "env.provision", &k2).await;
    let q = client
        .quarantine("env.provision", &k2, &c2.owner_token, "dns timed out")
        .await
        .expect("quarantine");
    assert_eq!(q.state, KeyState::Quarantined);
    // A retry after a lost answer finds it quarantined already: the record.
    let q = client
        .quarantine("env.provision", &k2, &c2.owner_token, "dns timed out")
        .await
        .expect("again");
    assert_eq!(q.quarantine_reason.as_deref(), Some("dns timed out"));
    let query = ListQuery {
        state: Some("quarantined".into()),
        operation: Some("env.provision".into()),
        ..ListQuery::default()
    };
    let page = client.list_keys(&query).await.expect("list");
    assert_eq!(
        page.items
            .iter()
            .map(|i| i.key.as_str())
            .collect::<Vec<_>>(),
        [k2.as_str()]
    );
    assert_eq!(page.next_cursor, None);
    let resolved = client
        .resolve(
            "env.provision",
            &k2,
            &Resolution::Complete(Outcome::new(201).body(json!({"env": "ok"}))),
            None,
        )
        .await
        .expect("resolve");
    let Resolved::Completed(rec) = resolved else {
        panic!("not completed")
    };
    assert_eq!(rec.state, KeyState::Completed);

    let c3 = owned(&client, "env.provision", &k3).await;
    client
        .quarantine("env.provision", &k3, &c3.owner_token, "unsure")
        .await
        .expect("quarantine");
    let released = client
        .resolve(
            "env.provision",
            &k3,
            &Resolution::Release {
                reason: Some("provider has no record".into()),
            },
            None,
        )
        .await
        .expect("resolve");
    assert_eq!(released, Resolved::Released);
    assert_eq!(
        client.lookup("env.provision", &k3).await.expect("lookup"),
        None
    );
    let c4 = owned(&client, "env.provision", &k1).await;
    let err = client
        .resolve(
            "env.provision",
            &k1,
            &Resolution::Release { reason: None },
            Some(&c4.owner_token),
        )
        .await;
    assert!(matches!(err, Err(Error::NotQuarantined(_))), "{err:?}");

    let first = client
        .list_keys(&ListQuery {
            limit: Some(1),
            ..ListQuery::default()
        })
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 1);
    let cursor = first.next_cursor.clone().expect("a next page");
    let second = client
        .list_keys(&ListQuery {
            limit: Some(1),
            cursor: Some(cursor),
            ..ListQuery::default()
        })
        .await
        .expect("page 2");
    assert_ne!(second.items[0].key, first.items[0].key);
    let old = client
        .list_keys(&ListQuery {
            older_than: Some(Duration::from_secs(3600)),
            ..ListQuery::default()
        })
        .await
        .expect("older than an hour");
    assert!(old.items.is_empty());
    let err = client
        .list_keys(&ListQuery {
            limit: Some(0),
            ..ListQuery::default()
        })
        .await;
    assert!(matches!(err, Err(Error::InvalidQuery(_))), "{err:?}");
}

#[tokio::test]
async fn operation_classes_and_typed_errors() {
    let server = TestServer::start().await;
    let client = server.client();
    let defaults = client
        .get_operation_class("charges.create")
        .await
        .expect("get");
    assert!(defaults.default);
    assert_eq!(defaults.lease.as_deref(), Some("30s"));
    let policy = Policy {
        replay_window: Some("48h".into()),
        lease: Some("90s".into()),
        fingerprint: Some(FingerprintRules {
            exclude: vec!["/request_id".into()],
            ..FingerprintRules::default()
        }),
        ..Policy::default()
    };
    let stored = client
        .put_operation_class("charges.create", &policy)
        .await
        .expect("put");
    assert_eq!(stored.replay_window.as_deref(), Some("2d"));
    assert!(!stored.default);
    assert_eq!(
        client
            .get_operation_class("charges.create")
            .await
            .expect("get"),
        stored
    );
    let bad = Policy {
        lease: Some("soon".into()),
        ..Policy::default()
    };
    let err = client.put_operation_class("charges.create", &bad).await;
    assert!(matches!(err, Err(Error::InvalidPolicy(_))), "{err:?}");
    assert!(
        client
            .delete_operation_class("charges.create")
            .await
            .expect("delete")
            .default
    );

    let err = client
        .claim("Bad Op", "k", &protected(), &ClaimOptions::default())
        .await;
    assert!(matches!(err, Err(Error::InvalidOperation(_))), "{err:?}");
    let err = client
        .claim(
            "charges.create",
            "has space",
            &protected(),
            &ClaimOptions::default(),
        )
        .await;
    assert!(matches!(err, Err(Error::InvalidKey(_))), "{err:?}");
    let err = client
        .claim(
            "charges.create",
            &new_key(),
            &Protected::Fingerprint("nothex".into()),
            &ClaimOptions::default(),
        )
        .await;
    assert!(matches!(err, Err(Error::InvalidFingerprint(_))), "{err:?}");
    let lease = ClaimOptions {
        wait: None,
        lease: Some(Duration::from_millis(10)),
    };
    let err = client
        .claim("charges.create", &new_key(), &protected(), &lease)
        .await;
    assert!(matches!(err, Err(Error::InvalidLease(_))), "{err:?}");
    let err = client.lookup("charges.create", "x").await.map(|_| ()).and(
        client
            .heartbeat("charges.create", &new_key(), "t", None)
            .await
            .map(|_| ()),
    );
    assert!(matches!(err, Err(Error::NotFound(_))), "{err:?}");
    let viewer = Client::new(
        server.base_url(),
        server.mint_token("t-rust-sdk", "viewer").await,
    )
    .expect("client");
    let err = viewer
        .claim(
            "charges.create",
            &new_key(),
            &protected(),
            &ClaimOptions::default(),
        )
        .await;
    assert!(
        matches!(err, Err(Error::Forbidden(ref p)) if p.request_id().is_some()),
        "{err:?}"
    );
    let nobody = Client::new(server.base_url(), "not-a-jwt").expect("client");
    let err = nobody.lookup("charges.create", "k").await;
    assert!(matches!(err, Err(Error::Unauthorized(_))), "{err:?}");
    assert_eq!(err.expect_err("401").status(), Some(401));
    // A fresh token replaces an expired one; Debug never shows it.
    nobody.set_token(server.token.clone());
    assert_eq!(
        nobody.lookup("charges.create", "k").await.expect("lookup"),
        None
    );
    assert!(!format!("{nobody:?}").contains(&server.token));
}
