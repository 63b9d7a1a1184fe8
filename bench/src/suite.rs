//! The whole run: limits first, then the scenarios, each by name; then the
//! ratios, the targets and the files under `bench/results/`.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context};

use crate::cli::Args;
use crate::measure::{self, Ctx, DbLimit};
use crate::procfs::{self, Machine};
use crate::report::{Kind, Measurement, Report};
use crate::server::ServerEnv;
use crate::targets::{judge, ratio, reads_per_window, Bound, TargetResult};
use crate::{db, svg};

/// Every measurement, in the order a full run takes them.
pub const ALL: [(&str, &str); 16] = [
    (
        "limit-http",
        "HTTP limit: GET /healthz through the same load generator",
    ),
    (
        "limit-db-claim-complete",
        "pgbench: the service's INSERT_CLAIM + COMPLETE",
    ),
    (
        "limit-db-find",
        "pgbench: the service's FIND (in-house table lookup)",
    ),
    ("limit-db-mixed", "pgbench: 80 % claim+complete / 20 % FIND"),
    (
        "limit-app-new-keys",
        "pgbench: the in-app SQL a team would write (insert on conflict + update, own table)",
    ),
    (
        "limit-app-mixed",
        "pgbench: the in-app SQL, 80 % new keys / 20 % select by key",
    ),
    (
        "limit-app-sqlite-new-keys",
        "in-app SQL on its own SQLite file, the service's durability (WAL, synchronous = FULL, its busy timeout)",
    ),
    ("new-keys", "(1) claim → complete on fresh keys"),
    (
        "new-keys-sqlite",
        "(1) on the embedded default (SQLite in its own data dir), --sqlite-clients",
    ),
    (
        "replay",
        "(2) replays of completed keys, server's default cache",
    ),
    (
        "replay-cache-off",
        "(3) replays with the cache switched off",
    ),
    (
        "hot-key",
        "(4) hot-key storm: many clients on one key while its owner works",
    ),
    ("mixed", "(5) 80 % new keys / 20 % replays"),
    (
        "tiered",
        "(6) lookups of tiered keys, cache off (each one reads the archive)",
    ),
    (
        "growth",
        "new keys on a table pre-filled with --growth-rows rows",
    ),
    (
        "idle-connections",
        "peak RSS with --idle-connections idle keep-alive connections",
    ),
];

pub fn list() -> String {
    ALL.iter()
        .map(|(name, what)| format!("{name:<26} {what}\n"))
        .collect()
}

fn selected(args: &Args) -> anyhow::Result<Vec<&'static str>> {
    for name in &args.only {
        if !ALL.iter().any(|(n, _)| n == name) {
            bail!("unknown measurement {name:?}; --list names them");
        }
    }
    Ok(ALL
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| args.only.is_empty() || args.only.iter().any(|o| o == n))
        .collect())
}

pub async fn run(args: Args) -> anyhow::Result<Report> {
    let names = selected(&args)?;
    anyhow::ensure!(
        args.server_bin.exists(),
        "{} is missing: run `cargo build --release -p idemkey-web` first",
        args.server_bin.display()
    );
    let started = Instant::now();
    let load_before = procfs::loadavg();
    let machine = Machine::detect();
    let dropped = db::drop_leftovers(&args.postgres).await?;
    if dropped > 0 {
        eprintln!("dropped {dropped} idemkey_bench_* databases left by an earlier run");
    }
    let run_id = format!("{:x}", rand::random::<u32>());
    let work_dir = std::env::temp_dir().join(format!("idemkey-bench-{run_id}"));
    std::fs::create_dir_all(&work_dir)?;
    let server_bin = std::fs::canonicalize(&args.server_bin)?;
    let mut env = ServerEnv::new(server_bin, work_dir.clone());
    env.extra.extend(args.server_env.iter().cloned());
    let ctx = Ctx {
        token: env.token()?,
        env,
        args: args.clone(),
        run_id,
        work_dir: work_dir.clone(),
    };
    let mut measurements = Vec::new();
    for name in names {
        let t = Instant::now();
        eprintln!("== {name}");
        let title = ALL.iter().find(|(n, _)| *n == name).map_or("", |(_, t)| t);
        let kind = if name.starts_with("limit-") {
            Kind::Limit
        } else {
            Kind::Scenario
        };
        let m = match name {
            "limit-http" => measure::or_failed(name, title, kind, measure::limit_http(&ctx)).await,
            "limit-db-claim-complete" => {
                let f = measure::limit_db(&ctx, DbLimit::ClaimComplete);
                measure::or_failed(name, title, kind, f).await
            }
            "limit-db-find" => {
                let f = measure::limit_db(&ctx, DbLimit::Find);
                measure::or_failed(name, title, kind, f).await
            }
            "limit-db-mixed" => {
                let f = measure::limit_db(&ctx, DbLimit::Mixed);
                measure::or_failed(name, title, kind, f).await
            }
            "limit-app-new-keys" => {
                let f = measure::limit_db(&ctx, DbLimit::AppNewKeys);
                measure::or_failed(name, title, kind, f).await
            }
            "limit-app-mixed" => {
                let f = measure::limit_db(&ctx, DbLimit::AppMixed);
                measure::or_failed(name, title, kind, f).await
            }
            "limit-app-sqlite-new-keys" => {
                measure::or_failed(name, title, kind, measure::limit_app_sqlite(&ctx)).await
            }
            "new-keys" => {
                measure::or_failed(name, title, kind, measure::new_keys(&ctx, None)).await
            }
            "new-keys-sqlite" => {
                measure::or_failed(name, title, kind, measure::new_keys_sqlite(&ctx)).await
            }
            "replay" => measure::or_failed(name, title, kind, measure::replays(&ctx, false)).await,
            "replay-cache-off" => {
                measure::or_failed(name, title, kind, measure::replays(&ctx, true)).await
            }
            "hot-key" => measure::or_failed(name, title, kind, measure::hot_key(&ctx)).await,
            "mixed" => measure::or_failed(name, title, kind, measure::mixed(&ctx)).await,
            "tiered" => measure::or_failed(name, title, kind, crate::workers::tiered(&ctx)).await,
            "growth" => {
                let f = measure::new_keys(&ctx, Some(args.growth_rows));
                measure::or_failed(name, title, kind, f).await
            }
            "idle-connections" => {
                measure::or_failed(name, title, kind, measure::idle_connections(&ctx)).await
            }
            other => bail!("no measurement named {other}"),
        };
        let mut m = m;
        m.detail("wall_seconds", t.elapsed().as_secs_f64());
        eprintln!(
            "   {:.0} ops/s, p99 {} ms ({:.0} s)",
            m.throughput.unwrap_or(0.0),
            m.latency.map_or("–".into(), |l| format!("{:.2}", l.p99_ms)),
            t.elapsed().as_secs_f64()
        );
        measurements.push(m);
    }
    let _ = std::fs::remove_dir_all(&work_dir);
    apply_ratios(&mut measurements);
    let targets = evaluate(&measurements, &args);
    Ok(Report {
        date: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        git_commit: git_commit(),
        machine,
        load_before,
        load_after: procfs::loadavg(),
        settings: serde_json::to_value(&args)?,
        measurements,
        targets,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Each scenario's throughput over its limit's, measured in the same run.
pub fn apply_ratios(ms: &mut [Measurement]) {
    let throughput = |ms: &[Measurement], name: &str| {
        ms.iter()
            .find(|m| m.name == name)
            .and_then(|m| m.throughput)
    };
    for i in 0..ms.len() {
        if let Some(limit) = ms[i].limit.clone() {
            ms[i].ratio = ratio(ms[i].throughput, throughput(ms, &limit));
        }
    }
}

fn get<'a>(ms: &'a [Measurement], name: &str) -> Option<&'a Measurement> {
    ms.iter().find(|m| m.name == name && m.skipped.is_none())
}

fn ratio_of(ms: &[Measurement], scenario: &str, limit: &str) -> Result<f64, String> {
    let s = get(ms, scenario).ok_or_else(|| format!("{scenario} not measured"))?;
    let l = get(ms, limit).ok_or_else(|| format!("{limit} not measured"))?;
    ratio(s.throughput, l.throughput).ok_or_else(|| "no throughput".into())
}

/// The targets, from this run's numbers only.
pub fn evaluate(ms: &[Measurement], args: &Args) -> Vec<TargetResult> {
    let replay_note = if measure::SERVER_HAS_CACHE {
        ""
    } else {
        " (no cache in this build)"
    };
    let mut t = vec![
        judge(
            "new keys / in-app SQL (the seeds' two statements, own table)",
            Bound::AtLeast(1.0),
            "×",
            ratio_of(ms, "new-keys", "limit-app-new-keys"),
        ),
        judge(
            "80/20 mix / in-app SQL mix",
            Bound::AtLeast(1.0),
            "×",
            ratio_of(ms, "mixed", "limit-app-mixed"),
        ),
        judge(
            "new keys / DB limit (pgbench claim+complete tps)",
            Bound::AtLeast(0.7),
            "×",
            ratio_of(ms, "new-keys", "limit-db-claim-complete"),
        ),
        judge(
            &format!("cached replays / HTTP limit{replay_note}"),
            Bound::AtLeast(0.7),
            "×",
            ratio_of(ms, "replay", "limit-http"),
        ),
        judge(
            &format!("cached replays / in-house lookup (pgbench FIND){replay_note}"),
            Bound::AtLeast(2.0),
            "×",
            ratio_of(ms, "replay", "limit-db-find"),
        ),
    ];
    t.push(judge(
        "hot-key storm: DB reads per coalescing window per node",
        Bound::AtMost(1.0),
        "",
        storm_reads(ms, args),
    ));
    let growth = match (get(ms, "growth"), get(ms, "new-keys")) {
        (Some(g), Some(e)) => match (g.latency, e.latency) {
            (Some(gl), Some(el)) => {
                ratio(Some(gl.p99_ms), Some(el.p99_ms)).ok_or_else(|| "no p99".to_owned())
            }
            _ => Err("no latency".into()),
        },
        _ => Err("growth and new-keys must both run".into()),
    };
    t.push(judge(
        &format!(
            "growth: p99 on {} rows / empty-table p99",
            measure::human(args.growth_rows)
        ),
        Bound::AtMost(1.5),
        "×",
        growth,
    ));
    t.push(judge(
        &format!("{} idle connections: peak RSS", args.idle_connections),
        Bound::Below(100.0),
        " MiB",
        get(ms, "idle-connections")
            .and_then(|m| m.peak_rss_mib)
            .ok_or_else(|| "idle-connections not measured".into()),
    ));
    t.extend(embedded_targets(ms, args));
    t
}

/// The embedded default against its anchor: at least as fast as the same
/// two statements on a SQLite file, and a short tail.
fn embedded_targets(ms: &[Measurement], args: &Args) -> [TargetResult; 2] {
    let p99 = get(ms, "new-keys-sqlite")
        .ok_or_else(|| "new-keys-sqlite not measured".to_owned())
        .and_then(|m| {
            m.latency
                .map(|l| l.p99_ms)
                .ok_or_else(|| "no latency".into())
        });
    [
        judge(
            "embedded default: new keys / in-app SQL on SQLite (same durability)",
            Bound::AtLeast(1.0),
            "×",
            ratio_of(ms, "new-keys-sqlite", "limit-app-sqlite-new-keys"),
        ),
        judge(
            &format!(
                "embedded default: p99 of new keys at {} connections",
                args.sqlite_clients
            ),
            Bound::Below(50.0),
            " ms",
            p99,
        ),
    ]
}

fn storm_reads(ms: &[Measurement], args: &Args) -> Result<f64, String> {
    let m = get(ms, "hot-key").ok_or("hot-key not measured")?;
    let pg = m
        .details
        .get("pg_index_scans")
        .and_then(|v| v.as_i64())
        .unwrap_or(-1);
    let reads = m
        .details
        .get("metric_db_reads")
        .and_then(|v| v.as_f64())
        .ok_or_else(|| {
            format!(
                "no /metrics read counter in this build; Postgres counted {pg} index scans on the key during the storm"
            )
        })?;
    let window = args.coalescing_window_ms;
    let storm_ms = m
        .details
        .get("storm_ms")
        .and_then(|v| v.as_f64())
        .ok_or("no storm duration")?;
    reads_per_window(reads, storm_ms, window as f64).ok_or_else(|| "bad window".into())
}

fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Writes latest.json, latest.svg and latest.md into `dir`.
pub fn write(report: &Report, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(
        dir.join("latest.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )?;
    std::fs::write(dir.join("latest.svg"), svg::chart(report))?;
    std::fs::write(dir.join("latest.md"), report.markdown())?;
    Ok(())
}

#[cfg(test)]
mod tests;
