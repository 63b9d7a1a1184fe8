//! Recent `key_reused` refusals on the dashboard: listed per class with the
//! fields that differed (never their values), only to their own tenant, a
//! bounded number per class however many bad retries arrive, and pruned to
//! the newest of each class. A key first claimed before field digests were
//! recorded is refused without a field list, on the API and the page alike.

use chrono::{DurationRound, TimeDelta, Utc};
use idemkey_api::auth::Role;
use idemkey_api::domain::fingerprint::fields::Mismatch;
use idemkey_api::domain::{OperationName, TenantId};
use idemkey_api::store::{Rejection, Store, REJECTIONS_KEPT_PER_CLASS};
use idemkey_api::usage::REJECTIONS_PER_FLUSH;
use idemkey_tests::dashboard::fixtures::viewer;
use idemkey_tests::dashboard::Visitor;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::TestApp;
use serde_json::json;

const CHARGES: &str = "charges.create";
const ORDERS: &str = "orders.create";

async fn refuse(app: &TestApp, operation: &str, key: &str, first: &str, second: &str) {
    app.claim(operation, key, json!({"amount": first, "currency": "EUR"}))
        .await
        .assert(201, "claimed");
    app.claim(operation, key, json!({"amount": second, "currency": "EUR"}))
        .await
        .assert(422, "key_reused");
}

async fn refusals_are_listed_per_class_with_their_fields(app: TestApp) {
    refuse(&app, CHARGES, "charge-7", "25.00", "26.00").await;
    refuse(&app, ORDERS, "order-9", "1.00", "2.00").await;
    app.flush_usage().await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    let all = visitor.get("/dashboard/rejections").await;
    let charges = visitor
        .get(&format!("/dashboard/rejections?operation={CHARGES}"))
        .await;

    assert_eq!(all.status, 200);
    all.assert_contains("charge-7")
        .assert_contains("order-9")
        .assert_contains("<code class=\"pointer\">/amount</code>")
        .assert_contains("/dashboard/keys/charges.create/charge-7");
    for value in ["25.00", "26.00", "1.00", "2.00"] {
        assert!(!all.text.contains(value), "{value} leaked");
    }
    charges.assert_contains("charge-7");
    assert!(!charges.text.contains("order-9"), "filtered to one class");
}

async fn another_tenant_sees_none_of_them(app: TestApp) {
    refuse(&app, CHARGES, "secret-key", "25.00", "26.00").await;
    app.flush_usage().await;
    let stranger = token(&fresh_tenant(), &[Role::Viewer]);
    let visitor = Visitor::signed_in(&app, &stranger).await;

    let page = visitor.get("/dashboard/rejections").await;

    assert_eq!(page.status, 200);
    page.assert_contains("No rejected reuse");
    assert!(!page.text.contains("secret-key"));
}

async fn a_storm_of_bad_retries_keeps_a_bounded_number(app: TestApp) {
    refuse(&app, CHARGES, "storm", "25.00", "26.00").await;
    for i in 0..(REJECTIONS_PER_FLUSH * 3) {
        app.claim(CHARGES, "storm", json!({"amount": format!("{i}.50")}))
            .await
            .assert(422, "key_reused");
    }

    app.flush_usage().await;

    let stored = stored(&app).await;
    println!(
        "{} refusals in one flush interval kept {} rows",
        REJECTIONS_PER_FLUSH * 3 + 1,
        stored.len()
    );
    assert_eq!(stored.len(), REJECTIONS_PER_FLUSH);
    // The newest are the ones kept: the first refusal (only /amount
    // differed) went, every later one also lacks /currency.
    for r in &stored {
        assert_eq!(
            r.mismatch.as_ref().unwrap().pointers,
            ["/amount", "/currency"]
        );
    }
}

async fn a_key_claimed_before_field_digests_is_refused_without_a_list(app: TestApp) {
    app.claim(CHARGES, "old-key", json!({"amount": "25.00"}))
        .await
        .assert(201, "claimed");
    // As a row written before the column existed.
    app.sql("update idempotency_key set field_digests = null where key = 'old-key'")
        .await;

    let refused = app
        .claim(CHARGES, "old-key", json!({"amount": "26.00"}))
        .await;
    app.flush_usage().await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;
    let page = visitor.get("/dashboard/rejections").await;

    refused.assert(422, "key_reused");
    assert!(
        refused.json().get("mismatched").is_none(),
        "{}",
        refused.json()
    );
    page.assert_contains("old-key").assert_contains("not known");
}

async fn a_bad_class_filter_is_a_clear_400(app: TestApp) {
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    let page = visitor
        .get("/dashboard/rejections?operation=Not%20A%20Class")
        .await;

    assert_eq!(page.status, 400);
}

async fn stored(app: &TestApp) -> Vec<Rejection> {
    let tenant = TenantId::parse(&app.tenant).unwrap();
    let store = Store::connect(&app.database_url).await.unwrap();
    store.recent_rejections(&tenant, None, 1000).await.unwrap()
}

mod through_the_dashboard {
    use super::*;

    idemkey_tests::on_every_backend!(
        refusals_are_listed_per_class_with_their_fields,
        another_tenant_sees_none_of_them,
        a_storm_of_bad_retries_keeps_a_bounded_number,
        a_key_claimed_before_field_digests_is_refused_without_a_list,
        a_bad_class_filter_is_a_clear_400,
    );
}

// ---- the store ----

fn rejection(tenant: &TenantId, operation: &str, n: i64, ago: TimeDelta) -> Rejection {
    Rejection {
        tenant: tenant.clone(),
        operation: OperationName::parse(operation).unwrap(),
        key: format!("k{n}"),
        // Whole milliseconds, as SQLite keeps them.
        at: (Utc::now() - ago + TimeDelta::milliseconds(n))
            .duration_trunc(TimeDelta::milliseconds(1))
            .unwrap(),
        mismatch: (n % 2 == 0).then(|| Mismatch {
            pointers: vec!["/a".into(), format!("/b/{n}")],
            truncated: n % 4 == 0,
        }),
    }
}

async fn pruning_keeps_the_newest_of_each_class_and_drops_old_ones(store: Store) {
    let tenant = TenantId::parse("t1").unwrap();
    let extra = 25;
    let many: Vec<Rejection> = (0..i64::from(REJECTIONS_KEPT_PER_CLASS) + extra)
        .map(|n| rejection(&tenant, CHARGES, n, TimeDelta::hours(1)))
        .collect();
    let old: Vec<Rejection> = (0..3)
        .map(|n| rejection(&tenant, ORDERS, n, TimeDelta::days(9)))
        .collect();
    store.add_rejections(&many).await.unwrap();
    store.add_rejections(&old).await.unwrap();

    let pruned = store
        .prune_rejections(Utc::now() - TimeDelta::days(8), 10_000)
        .await
        .unwrap();

    assert_eq!(pruned, extra as u64 + 3);
    let charges = OperationName::parse(CHARGES).unwrap();
    let kept = store
        .recent_rejections(&tenant, Some(&charges), 10_000)
        .await
        .unwrap();
    assert_eq!(kept.len(), REJECTIONS_KEPT_PER_CLASS as usize);
    assert_eq!(
        kept[0],
        *many.last().unwrap(),
        "newest first, read back whole"
    );
    assert_eq!(
        kept.last().unwrap().key,
        format!("k{extra}"),
        "the oldest ones went"
    );
    let orders = OperationName::parse(ORDERS).unwrap();
    assert!(store
        .recent_rejections(&tenant, Some(&orders), 10)
        .await
        .unwrap()
        .is_empty());
}

async fn each_tenant_reads_only_its_own(store: Store) {
    let (a, b) = (
        TenantId::parse("ta").unwrap(),
        TenantId::parse("tb").unwrap(),
    );
    store
        .add_rejections(&[
            rejection(&a, CHARGES, 1, TimeDelta::zero()),
            rejection(&b, CHARGES, 2, TimeDelta::zero()),
        ])
        .await
        .unwrap();

    let of_a = store.recent_rejections(&a, None, 10).await.unwrap();

    assert_eq!(of_a.len(), 1);
    assert_eq!(of_a[0].key, "k1");
}

mod in_the_store {
    use super::*;

    idemkey_tests::on_both_stores!(
        pruning_keeps_the_newest_of_each_class_and_drops_old_ones,
        each_tenant_reads_only_its_own,
    );
}
