//! The dashboard's keys lists and look-up, over real HTTP with JavaScript
//! off: any key found by class and key (whatever its state, another
//! tenant's never), lists narrowed by state, class and age, and paged past
//! the first 100 with every key on exactly one page — the stuck keys' union
//! of three listings included.

use std::collections::BTreeSet;

use idemkey_api::auth::Role;
use idemkey_tests::dashboard::fixtures::{quarantined_key, viewer};
use idemkey_tests::dashboard::{Page, Visitor};
use idemkey_tests::db::Backend;
use idemkey_tests::tokens::{fresh_tenant, token};
use idemkey_tests::{on_every_backend, TestApp};
use serde_json::json;

const OP: &str = "charges.create";

async fn completed_key(app: &TestApp, operation: &str, key: &str) {
    let owner = app
        .claim(operation, key, json!({"amount": 1}))
        .await
        .assert(201, "claimed")
        .owner_token();
    app.complete(
        operation,
        key,
        &owner,
        json!({"status_code": 201, "body": {"charge": key}}),
    )
    .await
    .assert(200, "completed");
}

/// The keys a list page links to, as (class, key) in page order.
fn listed(page: &Page) -> Vec<String> {
    page.text
        .match_indices("<a href=\"/dashboard/keys/")
        .map(|(at, m)| {
            let rest = &page.text[at + m.len()..];
            rest[..rest.find('"').expect("closing quote")].to_owned()
        })
        .collect()
}

/// The "Older keys" link of a list page, if any.
fn next_link(page: &Page) -> Option<String> {
    let at = page.text.find("rel=\"next\"")?;
    let before = &page.text[..at];
    let start = before.rfind("href=\"")? + "href=\"".len();
    // The template escapes `&` in attributes.
    Some(
        before[start..]
            .trim_end_matches("\" ")
            .replace("&#38;", "&")
            .replace("&amp;", "&"),
    )
}

/// Follows the list from `first` to its last page; every page's keys.
async fn every_page(visitor: &Visitor, first: &str) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut next = Some(first.to_owned());
    while let Some(href) = next {
        let page = visitor.get(&href).await;
        assert_eq!(page.status, 200, "{href}: {}", page.text);
        next = next_link(&page);
        pages.push(listed(&page));
        assert!(pages.len() < 20, "the pages never end");
    }
    pages
}

async fn any_key_is_found_by_class_and_key(app: TestApp) {
    completed_key(&app, OP, "order-1").await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    let found = visitor
        .get(&format!("/dashboard/lookup?operation={OP}&key=order-1"))
        .await;
    let page = visitor.get(found.location().expect("a location")).await;
    let unknown = visitor
        .get(&format!(
            "/dashboard/lookup?operation={OP}&key=never-claimed"
        ))
        .await;

    assert_eq!(found.status, 303);
    assert_eq!(
        found.location(),
        Some("/dashboard/keys/charges.create/order-1")
    );
    assert_eq!(page.status, 200);
    page.assert_contains("Completed")
        .assert_contains("Replay protection ends")
        .assert_contains("order-1");
    assert_eq!(unknown.status, 303);
    let missing = visitor.get(unknown.location().unwrap()).await;
    assert_eq!(missing.status, 404);
}

async fn a_look_up_never_finds_another_tenants_key(app: TestApp) {
    completed_key(&app, OP, "their-key").await;
    let stranger = token(&fresh_tenant(), &[Role::Viewer]);
    let visitor = Visitor::signed_in(&app, &stranger).await;

    let found = visitor
        .get(&format!("/dashboard/lookup?operation={OP}&key=their-key"))
        .await;
    let page = visitor.get(found.location().expect("a location")).await;

    assert_eq!(page.status, 404);
    assert!(
        !page.text.contains("Effect id"),
        "nothing of the key is shown"
    );
}

async fn a_bad_class_or_key_is_a_clear_400(app: TestApp) {
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    for query in [
        "operation=Not%20A%20Class&key=k",
        "operation=charges.create&key=has%20space",
        "operation=charges.create&key=",
        "key=k",
    ] {
        let page = visitor.get(&format!("/dashboard/lookup?{query}")).await;
        assert_eq!(page.status, 400, "{query}");
    }
    for query in ["state=stuck", "cursor=%25%25", "older_than=soon"] {
        let page = visitor.get(&format!("/dashboard/keys?{query}")).await;
        assert_eq!(page.status, 400, "{query}");
    }
}

async fn lists_narrow_by_state_class_and_age(app: TestApp) {
    completed_key(&app, OP, "done-new").await;
    completed_key(&app, OP, "done-old").await;
    completed_key(&app, "emails.send", "mail-1").await;
    quarantined_key(&app, "unsure").await;
    let ago = Backend::of(&app.database_url).seconds_ago(2 * 3600);
    app.sql(&format!(
        "update idempotency_key set created_at = {ago} where key = 'done-old'"
    ))
    .await;
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    let completed = visitor.get("/dashboard/keys?state=completed").await;
    let of_class = visitor
        .get(&format!("/dashboard/keys?state=completed&operation={OP}"))
        .await;
    let old = visitor
        .get("/dashboard/keys?state=completed&older_than=1h")
        .await;
    let every = visitor.get("/dashboard/keys?state=any").await;
    let stuck = visitor.get("/dashboard/keys").await;

    let set = |p: &Page| listed(p).into_iter().collect::<BTreeSet<_>>();
    let keys = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        set(&completed),
        keys(&[
            "charges.create/done-new",
            "charges.create/done-old",
            "emails.send/mail-1"
        ])
    );
    assert_eq!(
        set(&of_class),
        keys(&["charges.create/done-new", "charges.create/done-old"])
    );
    assert_eq!(set(&old), keys(&["charges.create/done-old"]));
    assert_eq!(set(&every).len(), 4);
    assert_eq!(set(&stuck), keys(&["charges.create/unsure"]));
    completed.assert_contains("Completed keys");
}

async fn a_long_list_pages_past_the_first_hundred(app: TestApp) {
    for i in 0..130 {
        completed_key(&app, OP, &format!("k{i:03}")).await;
    }
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    let pages = every_page(&visitor, "/dashboard/keys?state=completed").await;

    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    println!("130 completed keys in pages of {sizes:?}");
    assert_eq!(sizes, [100, 30]);
    let all: BTreeSet<String> = pages.into_iter().flatten().collect();
    assert_eq!(all.len(), 130, "every key on exactly one page");
}

async fn the_stuck_union_pages_exactly(app: TestApp) {
    // 60 quarantined and 60 lease-expired keys, interleaved in time: the
    // union of two listings, each cut at the page's cursor.
    for i in 0..60 {
        quarantined_key(&app, &format!("q{i:02}")).await;
        let key = format!("e{i:02}");
        app.claim(OP, &key, json!({"amount": 1}))
            .await
            .assert(201, "claimed");
        app.expire_lease(&key).await;
    }
    let visitor = Visitor::signed_in(&app, &viewer(&app)).await;

    let pages = every_page(&visitor, "/dashboard/keys").await;

    let sizes: Vec<usize> = pages.iter().map(Vec::len).collect();
    println!("120 stuck keys in pages of {sizes:?}");
    assert_eq!(sizes, [100, 20]);
    let flat: Vec<String> = pages.into_iter().flatten().collect();
    let unique: BTreeSet<&String> = flat.iter().collect();
    assert_eq!(unique.len(), 120, "no key twice, none left out");
}

on_every_backend!(
    any_key_is_found_by_class_and_key,
    a_look_up_never_finds_another_tenants_key,
    a_bad_class_or_key_is_a_clear_400,
    lists_narrow_by_state_class_and_age,
    a_long_list_pages_past_the_first_hundred,
    the_stuck_union_pages_exactly,
);
