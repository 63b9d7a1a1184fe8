//! The suite's ratios and targets, judged on made-up measurements.

use super::*;
use crate::targets::Verdict;
use clap::Parser;

fn m(name: &str, tp: f64, limit: Option<&str>) -> Measurement {
    let mut m = Measurement::new(name, name, Kind::Scenario, 64);
    m.throughput = Some(tp);
    m.limit = limit.map(Into::into);
    m
}

#[test]
fn ratios_use_the_named_limit_of_the_same_run() {
    let mut ms = vec![
        m("limit-db-claim-complete", 1000.0, None),
        m("new-keys", 800.0, Some("limit-db-claim-complete")),
        m("replay", 10.0, Some("limit-http")),
    ];
    apply_ratios(&mut ms);
    assert_eq!(ms[1].ratio, Some(0.8));
    assert_eq!(ms[2].ratio, None, "limit-http was not measured");
}

#[test]
fn targets_pass_fail_or_say_why_not_measured() {
    let args = Args::parse_from(["idemkey-bench"]);
    let mut ms = vec![
        m("limit-db-claim-complete", 1000.0, None),
        m("new-keys", 600.0, None),
        m("limit-http", 10000.0, None),
        m("replay", 8000.0, None),
        m("limit-db-find", 3000.0, None),
        m("limit-app-new-keys", 1200.0, None),
    ];
    let mut idle = m("idle-connections", 0.0, None);
    idle.peak_rss_mib = Some(40.0);
    ms.push(idle);
    let t = evaluate(&ms, &args);
    assert_eq!(t[0].verdict, Verdict::Fail); // 0.5 < 1.0 of the in-app SQL
    assert!(matches!(t[1].verdict, Verdict::NotMeasured(_))); // no mix ran
    assert_eq!(t[2].verdict, Verdict::Fail); // 0.6 < 0.7
    assert_eq!(t[3].verdict, Verdict::Pass); // 0.8 ≥ 0.7
    assert_eq!(t[4].verdict, Verdict::Pass); // 2.67 ≥ 2
    assert!(matches!(t[5].verdict, Verdict::NotMeasured(_)));
    assert!(matches!(t[6].verdict, Verdict::NotMeasured(_)));
    assert_eq!(t[7].verdict, Verdict::Pass);
}

#[test]
fn a_skipped_measurement_never_feeds_a_target() {
    let args = Args::parse_from(["idemkey-bench"]);
    let mut skipped = m("idle-connections", 0.0, None);
    skipped.peak_rss_mib = Some(1.0);
    skipped.skipped = Some("failed".into());
    let t = evaluate(&[skipped], &args);
    assert!(matches!(t[5].verdict, Verdict::NotMeasured(_)));
}

#[test]
fn storm_reads_are_judged_per_window_when_the_server_counts_them() {
    let mut args = Args::parse_from(["idemkey-bench"]);
    let mut storm = m("hot-key", 0.0, None);
    storm.detail("pg_index_scans", 5000);
    storm.detail("storm_ms", 2000.0);
    let ms = vec![storm.clone()];
    let why = storm_reads(&ms, &args).unwrap_err();
    assert!(why.contains("5000 index scans"), "{why}");
    storm.detail("metric_db_reads", 4.0);
    let ms = vec![storm];
    args.coalescing_window_ms = 500;
    assert_eq!(storm_reads(&ms, &args), Ok(1.0));
}

#[test]
fn unknown_names_are_refused_and_known_ones_keep_suite_order() {
    let mut args = Args::parse_from(["idemkey-bench", "--only", "new-keys,limit-http"]);
    assert_eq!(selected(&args).unwrap(), ["limit-http", "new-keys"]);
    args.only = vec!["nope".into()];
    assert!(selected(&args).is_err());
}
