//! The exposition: what `/metrics` shows after the calls the code makes.

use super::*;

#[test]
fn counters_and_gauges_appear_in_the_exposition() {
    let m = Metrics::new();
    m.statement("find");
    m.cache_lookup("local", true);
    let waiting = m.waiting();
    let text = m.encode();
    assert!(text.contains("idemkey_store_statements_total{statement=\"find\"} 1"));
    assert!(text.contains("idemkey_cache_lookups_total{layer=\"local\",result=\"hit\"} 1"));
    assert!(text.contains("idemkey_claim_waiters 1"));
    drop(waiting);
    assert!(m.encode().contains("idemkey_claim_waiters 0"));
}

#[test]
fn series_looked_up_once_count_in_their_families() {
    let m = Metrics::new();
    m.cache_lookup("local", false);
    m.cache_lookup("local", false);
    m.cache_lookup("redis", true);
    m.claim_answered("completed", std::time::Duration::from_millis(1));
    m.claim_answered("claimed", std::time::Duration::from_millis(1));
    let text = m.encode();
    for line in [
        "idemkey_cache_lookups_total{layer=\"local\",result=\"miss\"} 2",
        "idemkey_cache_lookups_total{layer=\"redis\",result=\"hit\"} 1",
        "idemkey_claims_total{status=\"completed\"} 1",
        "idemkey_claims_total{status=\"claimed\"} 1",
        "idemkey_claim_seconds_count{status=\"completed\"} 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}
