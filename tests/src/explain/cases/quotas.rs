//! The quota statements of the EXPLAIN test: the dashboard's reads of one
//! tenant's limits and measured storage, and the measuring worker's and the
//! `idemkey quota` operator command's statements, left out with their
//! reasons.

use super::{case, p, Case, Reach};

/// Statements no request runs: the measurement covers every tenant, and
/// only the operator sets or lists overrides.
pub const EXCLUDED: &[(&str, &str)] = &[
    (
        "quotas.measure",
        "quota worker: measures every tenant's records",
    ),
    (
        "quotas.zero_missing",
        "quota worker: zeroes tenants with no live record",
    ),
    (
        "quotas.all_storage",
        "quota worker and operator command: every tenant",
    ),
    (
        "quotas.all_quotas",
        "quota worker and operator command: every tenant",
    ),
    ("quotas.set_quota", "operator command `idemkey quota`"),
    ("quotas.clear_quota", "operator command `idemkey quota`"),
];

pub fn cases() -> Vec<Case> {
    use Reach::*;
    vec![
        case(
            "quotas.storage_of",
            "dashboard",
            Tenant,
            vec![p("text", "'t07'")],
        ),
        case(
            "quotas.quota_of",
            "dashboard",
            Tenant,
            vec![p("text", "'t07'")],
        ),
    ]
}
