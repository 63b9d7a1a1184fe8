//! The webhook statements of the EXPLAIN test: the admin API's endpoint
//! calls and the dashboard's delivery reads, each for one tenant, and the
//! workers' queueing, delivery and pruning, left out with their reasons.
//!
//! Deleting an endpoint also deletes its deliveries, through the foreign
//! key's cascade; Postgres runs that as its own statement (by tenant and
//! endpoint id, which `webhook_delivery_endpoint_idx` leads with), and an
//! EXPLAIN does not show it.

use super::{case, p, Case, Reach};

/// The workers' webhook statements: they find, send and prune the
/// deliveries of every tenant.
pub const EXCLUDED: &[(&str, &str)] = &[
    (
        "webhooks.queue_quarantined",
        "webhook worker: queues events of every tenant's endpoints",
    ),
    (
        "webhooks.queue_stuck",
        "webhook worker: queues events of every tenant's endpoints",
    ),
    (
        "webhooks.queue_taken_over",
        "webhook worker: queues events of every tenant's endpoints",
    ),
    (
        "webhooks.queue_spikes",
        "webhook worker: queues events of every tenant's endpoints",
    ),
    (
        "webhooks.take_due",
        "webhook worker: takes due deliveries of every tenant",
    ),
    (
        "webhooks.finish",
        "webhook worker: one taken delivery, by tenant and id",
    ),
    (
        "webhooks.prune",
        "webhook worker: deletes old deliveries of every tenant",
    ),
];

/// One of t07's endpoints in class op1, as `seed.sql` names it.
const ENDPOINT: &str = "'wh_' || left(md5('endpoint 7/1/0'), 20)";

pub fn cases() -> Vec<Case> {
    use Reach::*;
    let by_id = || vec![p("text", "'t07'"), p("text", ENDPOINT)];
    vec![
        case(
            "webhooks.insert_endpoint",
            "admin, new endpoint",
            Tenant,
            vec![
                p("text", "'t07'"),
                p("text", "'wh_0123456789abcdef0123'"),
                p("text", "'op1'"),
                p("text", "'https://hooks.example.com/new'"),
                p("text", "'whsec_new'"),
                p("text", "'quarantined,stuck'"),
                p("int8", "60000"),
                p("int8", "null"),
                p("int8", "null"),
                p("int8", "10"),
            ],
        ),
        case(
            "webhooks.endpoints",
            "admin, every class",
            Tenant,
            vec![p("text", "'t07'"), p("text", "null")],
        ),
        case(
            "webhooks.endpoints",
            "admin, one class",
            Tenant,
            vec![p("text", "'t07'"), p("text", "'op1'")],
        ),
        case("webhooks.endpoint", "admin, one", Tenant, by_id()),
        case("webhooks.delete_endpoint", "admin", Tenant, by_id()),
        case(
            "webhooks.deliveries",
            "dashboard, newest 100",
            Tenant,
            [by_id(), vec![p("int8", "100")]].concat(),
        ),
        case(
            "webhooks.counts",
            "dashboard",
            Tenant,
            vec![p("text", "'t07'")],
        ),
    ]
}
