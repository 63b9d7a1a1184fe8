//! The worked checkout example (examples/checkout) under what shoppers and
//! machines do to it — repeated taps, many duplicate requests at once, a
//! checkout process killed with SIGKILL at the worst moment — against real
//! processes: idemkey on Postgres, the fake provider (which has no
//! idempotency of its own, so every duplicate effect would show in its
//! ledger) and checkout processes. The figure that matters, printed by each
//! test: the provider's charges per checkout, always exactly one.

use std::collections::BTreeMap;
use std::time::Instant;

use idemkey_tests::checkout::{tap, Shop};
use serde_json::Value;

fn fresh_checkout(name: &str) -> String {
    format!("{name}-{:08x}", rand::random::<u32>())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_taps_of_one_checkout_make_one_charge() {
    let shop = Shop::open().await;
    let checkout = shop.checkout(30_000, None).await;
    let order = fresh_checkout("cart");

    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(
            tap(&shop.http, &checkout.address, &order, "25.00", 1)
                .await
                .expect("an answer"),
        );
    }
    // The same checkout id with another amount is the page's bug, refused.
    let changed = tap(&shop.http, &checkout.address, &order, "99.00", 1)
        .await
        .expect("an answer");

    let vias: Vec<&str> = answers.iter().map(|a| a.via.as_str()).collect();
    println!(
        "three taps: statuses {:?}, via {vias:?}; changed amount: {}; charges {}, shipments {}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>(),
        changed.status,
        shop.count("charges_by_order", &order).await,
        shop.count("shipments_by_order", &order).await,
    );
    assert!(answers.iter().all(|a| a.status == 201));
    assert_eq!(vias, ["effect", "replay", "replay"]);
    assert!(answers.iter().all(|a| a.body == answers[0].body));
    assert_eq!(changed.status, 422);
    assert_eq!(shop.count("charges_by_order", &order).await, 1);
    assert_eq!(shop.count("shipments_by_order", &order).await, 1);
    assert_eq!(shop.ledger().await["charges"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_duplicate_taps_charge_each_checkout_exactly_once() {
    let shop = Shop::open().await;
    let checkout = shop.checkout(30_000, None).await;
    let orders: Vec<String> = (0..6)
        .map(|i| fresh_checkout(&format!("race{i}")))
        .collect();
    let per_order = 16;

    let started = Instant::now();
    let mut tasks = Vec::new();
    for order in &orders {
        for _ in 0..per_order {
            let (http, address, order) =
                (shop.http.clone(), checkout.address.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let paid = tap(&http, &address, &order, "10.00", 20).await;
                (order, paid)
            }));
        }
    }
    let mut bodies: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut via: BTreeMap<String, u32> = BTreeMap::new();
    let mut retried = 0;
    for t in tasks {
        let (order, paid) = t.await.expect("task");
        let paid = paid.expect("every tap is answered");
        assert_eq!(paid.status, 201, "{paid:?}");
        *via.entry(paid.via.clone()).or_default() += 1;
        retried += u32::from(paid.tries > 1);
        bodies.entry(order).or_default().push(paid.body);
    }
    let ledger = shop.ledger().await;
    println!(
        "{} taps ({} checkouts × {per_order}) in {:?}: via {via:?}, {retried} retried; provider: {} charges, {} shipments, by checkout {}",
        orders.len() * per_order,
        orders.len(),
        started.elapsed(),
        ledger["charges"],
        ledger["shipments"],
        ledger["charges_by_order"],
    );
    for order in &orders {
        let seen = &bodies[order];
        assert!(
            seen.iter().all(|b| b == &seen[0]),
            "one outcome per checkout"
        );
        assert_eq!(ledger["charges_by_order"][order], 1, "{order}");
        assert_eq!(ledger["shipments_by_order"][order], 1, "{order}");
    }
    assert_eq!(via.get("effect"), Some(&(orders.len() as u32)));
    assert_eq!(ledger["charges"], orders.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_checkout_killed_after_the_charge_recovers_through_reconcile_not_a_second_charge() {
    let shop = Shop::open().await;
    let order = fresh_checkout("crash");
    let doomed = shop.checkout(2_000, Some("after_charge")).await;

    // The provider charges; the process dies before recording or completing.
    let lost = tap(&shop.http, &doomed.address, &order, "25.00", 1).await;
    let status = doomed.wait_for_exit().await;
    assert!(lost.is_none(), "the crashed process answered: {lost:?}");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "SIGKILL"
    );
    let left = shop.record(&order).await;
    assert_eq!(
        (
            left["state"].as_str(),
            left["steps"].as_object().map(|s| s.len())
        ),
        (Some("in_progress"), Some(0))
    );
    assert_eq!(shop.count("charges_by_order", &order).await, 1);
    let effect_id = left["effect_id"].as_str().expect("effect id").to_owned();
    let charge = shop
        .by_reference("charges", &format!("{effect_id}.charge"))
        .await
        .expect("the provider has the charge under the step's effect id");

    // A restarted checkout; the shopper taps again (and again, at once).
    let restarted = shop.checkout(2_000, None).await;
    let started = Instant::now();
    let taps: Vec<_> = (0..5)
        .map(|_| {
            let (http, address, order) =
                (shop.http.clone(), restarted.address.clone(), order.clone());
            tokio::spawn(async move { tap(&http, &address, &order, "25.00", 20).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in taps {
        answers.push(t.await.expect("task").expect("answered"));
    }

    let record = shop.record(&order).await;
    println!(
        "killed after the charge: recovered in {:?}, answers via {:?}; attempt {}, steps {}; provider: {} charge(s), {} shipment(s)",
        started.elapsed(),
        answers.iter().map(|a| a.via.as_str()).collect::<Vec<_>>(),
        record["attempt"],
        record["steps"].as_object().map_or(0, |s| s.len()),
        shop.count("charges_by_order", &order).await,
        shop.count("shipments_by_order", &order).await,
    );
    assert!(answers
        .iter()
        .all(|a| a.status == 201 && a.body == answers[0].body));
    assert_eq!(
        answers[0].body["charge"],
        charge.as_str(),
        "the first charge, found"
    );
    assert_eq!(record["state"], "completed");
    assert_eq!(record["attempt"], 2, "one takeover");
    assert_eq!(record["steps"]["charge"]["provider_ref"], charge.as_str());
    assert_eq!(shop.count("charges_by_order", &order).await, 1);
    assert_eq!(shop.count("shipments_by_order", &order).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_checkout_killed_after_recording_the_charge_resumes_at_the_shipment() {
    let shop = Shop::open().await;
    let order = fresh_checkout("resume");
    let doomed = shop.checkout(2_000, Some("after_charge_step")).await;
    assert!(tap(&shop.http, &doomed.address, &order, "40.00", 1)
        .await
        .is_none());
    doomed.wait_for_exit().await;
    let left = shop.record(&order).await;
    let charge = left["steps"]["charge"]["provider_ref"]
        .as_str()
        .expect("the charge step is recorded")
        .to_owned();
    assert_eq!(shop.count("shipments_by_order", &order).await, 0);

    let restarted = shop.checkout(2_000, None).await;
    let paid = tap(&shop.http, &restarted.address, &order, "40.00", 20)
        .await
        .expect("answered");
    let record = shop.record(&order).await;
    let events: Vec<&str> = record["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|e| e["event"].as_str())
        .collect();
    println!(
        "killed after the charge step: {} via {} after {} tries; history {events:?}; provider: {} charge(s), {} shipment(s)",
        paid.status,
        paid.via,
        paid.tries,
        shop.count("charges_by_order", &order).await,
        shop.count("shipments_by_order", &order).await,
    );
    assert_eq!((paid.status, paid.via.as_str()), (201, "effect"));
    assert_eq!(paid.body["charge"], charge.as_str());
    assert_eq!(
        events,
        ["claimed", "step", "taken_over", "step", "completed"]
    );
    assert_eq!(shop.count("charges_by_order", &order).await, 1);
    assert_eq!(shop.count("shipments_by_order", &order).await, 1);
}
