//! Usage roll-up: claim and release calls are counted per tenant, class and
//! minute, flushed into `usage_minute` by adding, and read back summed —
//! across flushes and across nodes, on both backends.

use std::time::Duration;

use chrono::Utc;
use idemkey_api::auth::Role;
use idemkey_api::domain::usage::UsageCounts;
use idemkey_api::domain::TenantId;
use idemkey_api::store::Store;
use idemkey_tests::on_every_backend;
use idemkey_tests::tokens::token;
use idemkey_tests::TestApp;
use serde_json::json;

const OP: &str = "charges.create";

/// The tenant's usage of `OP` over the last hour, summed.
async fn usage(app: &TestApp, tenant: &str) -> UsageCounts {
    let store = Store::connect(&app.database_url).await.expect("store");
    let rows = store
        .usage_series(
            &TenantId::parse(tenant).unwrap(),
            Utc::now() - Duration::from_secs(3600),
            Duration::from_secs(3600),
        )
        .await
        .expect("usage");
    let mut total = UsageCounts::default();
    rows.iter()
        .filter(|r| r.operation == OP)
        .for_each(|r| total.add(&r.counts));
    total
}

async fn every_kind_of_answer_is_counted_once_flushed(app: TestApp) {
    // Arrange
    let a = app
        .claim(OP, "a", json!({"n": 1}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.claim(OP, "a", json!({"n": 1}))
        .await
        .assert(409, "in_progress");
    app.complete(OP, "a", &a, json!({"status_code": 200}))
        .await
        .assert(200, "completed");
    app.claim(OP, "a", json!({"n": 1}))
        .await
        .assert(200, "completed");
    app.claim(OP, "a", json!({"n": 2}))
        .await
        .assert(422, "key_reused");
    let b = app
        .claim(OP, "b", json!({}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.release(OP, "b", &b).await.assert(200, "released");
    app.claim(OP, "c", json!({})).await.assert(201, "claimed");
    app.expire_lease("c").await;
    app.claim(OP, "c", json!({}))
        .await
        .assert(200, "recovering");
    // Not usage: bad input never reaches the engine.
    app.call(OP, "d", "claim", json!({}))
        .await
        .assert(400, "invalid_body");
    assert_eq!(
        usage(&app, &app.tenant).await,
        UsageCounts::default(),
        "nothing before a flush"
    );

    // Act
    app.flush_usage().await;

    // Assert
    let counts = usage(&app, &app.tenant).await;
    assert_eq!(
        (
            counts.claims,
            counts.replays,
            counts.key_reuses,
            counts.collisions,
            counts.releases,
            counts.takeovers
        ),
        (3, 1, 1, 1, 1, 1)
    );
    assert_eq!(
        counts.claim_calls(),
        7,
        "every engine-answered claim is timed once"
    );
    // A flush with nothing pending changes nothing.
    app.flush_usage().await;
    assert_eq!(usage(&app, &app.tenant).await, counts);
}

async fn counts_from_several_flushes_and_nodes_add_up(app: TestApp) {
    let other = app.spawn_beside().await;
    let client = token(&app.tenant, &[Role::Client]);
    app.claim(OP, "x", json!({})).await.assert(201, "claimed");
    app.flush_usage().await;
    app.claim(OP, "y", json!({})).await.assert(201, "claimed");
    other
        .call_as(&client, OP, "z", "claim", json!({"request": {}}))
        .await
        .assert(201, "claimed");
    app.flush_usage().await;
    other.flush_usage().await;

    assert_eq!(usage(&app, &app.tenant).await.claims, 3);
    // Another tenant's counts are its own.
    assert_eq!(usage(&app, &other.tenant).await, UsageCounts::default());
}

on_every_backend!(
    every_kind_of_answer_is_counted_once_flushed,
    counts_from_several_flushes_and_nodes_add_up,
);

/// A flush is all or nothing: when a later batch of it fails, the batches
/// before it are not kept either, so the retried flush counts every row
/// exactly once (a flush of 250 rows spans two statements).
#[tokio::test]
async fn a_flush_that_fails_half_way_counts_nothing_twice() {
    use idemkey_api::domain::usage::UsageEvent;
    use idemkey_api::domain::{IdempotencyKey, OperationName, ScopedKey};
    use idemkey_api::usage::Usage;

    let store = idemkey_tests::stores::fresh(idemkey_tests::db::Backend::Postgres).await;
    let Store::Postgres(pg) = &store else {
        unreachable!("a Postgres store")
    };
    let key = |tenant: &str, op: usize| ScopedKey {
        tenant: TenantId::parse(tenant).unwrap(),
        operation: OperationName::parse(&format!("op{op:03}")).unwrap(),
        key: IdempotencyKey::parse("k").unwrap(),
    };
    let usage = Usage::new(store.clone());
    // 249 classes of one tenant, then one of a tenant whose rows the
    // database refuses: the refused row lands in the second statement.
    for op in 0..249 {
        usage.count(&key("many", op), UsageEvent::Claimed);
    }
    usage.count(&key("refused", 0), UsageEvent::Claimed);
    sqlx::query(
        "create function refuse_usage() returns trigger language plpgsql as $$ \
         begin if new.tenant = 'refused' then raise exception 'refused'; end if; \
         return new; end $$",
    )
    .execute(pg.pool())
    .await
    .unwrap();
    sqlx::query(
        "create trigger refuse_usage before insert on usage_minute \
         for each row execute function refuse_usage()",
    )
    .execute(pg.pool())
    .await
    .unwrap();

    assert!(usage.flush().await.is_err(), "the second statement fails");
    let kept: i64 = sqlx::query_scalar("select count(*) from usage_minute")
        .fetch_one(pg.pool())
        .await
        .unwrap();
    assert_eq!(kept, 0, "a failed flush keeps nothing");

    sqlx::query("drop trigger refuse_usage on usage_minute")
        .execute(pg.pool())
        .await
        .unwrap();
    assert_eq!(usage.flush().await.unwrap(), 250);
    let claims: i64 = sqlx::query_scalar("select sum(claims)::bigint from usage_minute")
        .fetch_one(pg.pool())
        .await
        .unwrap();
    assert_eq!(claims, 250, "every row counted exactly once");
}
