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

#[test]
fn the_embedded_rows_are_listed_and_run_with_their_own_client_count() {
    let listed = list();
    assert!(listed.contains("limit-app-sqlite-new-keys "), "{listed}");
    assert!(listed.contains("new-keys-sqlite "), "{listed}");
    let args = Args::parse_from([
        "idemkey-bench",
        "--only",
        "new-keys-sqlite,limit-app-sqlite-new-keys",
    ]);
    assert_eq!(args.sqlite_clients, 16);
    assert_eq!(args.clients, 64, "the other rows keep theirs");
    assert_eq!(
        selected(&args).unwrap(),
        ["limit-app-sqlite-new-keys", "new-keys-sqlite"]
    );
    let args = Args::parse_from(["idemkey-bench", "--sqlite-clients", "4"]);
    assert_eq!(args.sqlite_clients, 4);
}

fn embedded(ms: &[Measurement]) -> Vec<TargetResult> {
    let args = Args::parse_from(["idemkey-bench"]);
    evaluate(ms, &args)
        .into_iter()
        .filter(|t| t.name.starts_with("embedded default"))
        .collect()
}

#[test]
fn the_embedded_default_is_judged_against_its_sqlite_anchor_and_its_tail() {
    let mut service = m("new-keys-sqlite", 833.0, Some("limit-app-sqlite-new-keys"));
    service.latency = Some(crate::hist::Latency {
        count: 1,
        mean_ms: 20.0,
        p50_ms: 15.0,
        p99_ms: 735.0,
        p999_ms: 900.0,
        max_ms: 1000.0,
    });
    let mut ms = vec![m("limit-app-sqlite-new-keys", 2557.0, None), service];
    apply_ratios(&mut ms);
    assert_eq!(ms[1].ratio, Some(833.0 / 2557.0));
    let t = embedded(&ms);
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].verdict, Verdict::Fail); // 0.33 < 1.0
    assert_eq!(t[0].requirement, "≥ 1×");
    assert_eq!(t[1].verdict, Verdict::Fail); // 735 ms ≥ 50 ms
    assert_eq!(
        t[1].name,
        "embedded default: p99 of new keys at 16 connections"
    );
    assert_eq!(t[1].requirement, "< 50 ms");

    ms[1].throughput = Some(2600.0);
    ms[1].latency.as_mut().unwrap().p99_ms = 49.9;
    let t = embedded(&ms);
    assert_eq!(
        (&t[0].verdict, &t[1].verdict),
        (&Verdict::Pass, &Verdict::Pass)
    );
}

#[test]
fn the_embedded_targets_say_why_when_a_row_is_missing() {
    let t = embedded(&[m("new-keys-sqlite", 800.0, None)]);
    assert_eq!(
        t[0].verdict,
        Verdict::NotMeasured("limit-app-sqlite-new-keys not measured".into())
    );
    assert_eq!(t[1].verdict, Verdict::NotMeasured("no latency".into()));
    let t = embedded(&[]);
    assert_eq!(
        t[1].verdict,
        Verdict::NotMeasured("new-keys-sqlite not measured".into())
    );
}
