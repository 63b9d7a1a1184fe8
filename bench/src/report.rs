//! The results of one suite run: JSON (everything), a markdown table (what
//! the README shows) and the terminal summary.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::hist::Latency;
use crate::load::LoadResult;
use crate::procfs::Machine;
use crate::targets::TargetResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Scenario,
    Limit,
}

/// One row of the table: a scenario or a limit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    pub name: String,
    pub title: String,
    pub kind: Kind,
    pub clients: usize,
    pub ops: Option<u64>,
    pub seconds: Option<f64>,
    /// Operations (or pgbench transactions) per second.
    pub throughput: Option<f64>,
    pub latency: Option<Latency>,
    pub errors: BTreeMap<String, u64>,
    /// Server CPU time (user + system) per operation, in microseconds.
    pub cpu_us_per_op: Option<f64>,
    /// CPU time of the Postgres backends serving the measurement's database
    /// per operation (or pgbench transaction), in microseconds.
    #[serde(default)]
    pub db_cpu_us_per_op: Option<f64>,
    /// The server process's peak RSS (VmHWM), in MiB.
    pub peak_rss_mib: Option<f64>,
    /// Share of the whole machine's CPU busy during the window.
    pub machine_busy: Option<f64>,
    /// The limit this scenario is compared with, and the ratio to it.
    pub limit: Option<String>,
    pub ratio: Option<f64>,
    /// Why it was not measured (then every number is absent).
    pub skipped: Option<String>,
    pub notes: Vec<String>,
    pub details: BTreeMap<String, serde_json::Value>,
}

impl Measurement {
    pub fn new(name: &str, title: &str, kind: Kind, clients: usize) -> Self {
        Self {
            name: name.into(),
            title: title.into(),
            kind,
            clients,
            ops: None,
            seconds: None,
            throughput: None,
            latency: None,
            errors: BTreeMap::new(),
            cpu_us_per_op: None,
            db_cpu_us_per_op: None,
            peak_rss_mib: None,
            machine_busy: None,
            limit: None,
            ratio: None,
            skipped: None,
            notes: Vec::new(),
            details: BTreeMap::new(),
        }
    }

    pub fn skipped(name: &str, title: &str, kind: Kind, why: &str) -> Self {
        let mut m = Self::new(name, title, kind, 0);
        m.skipped = Some(why.into());
        m
    }

    pub fn with_load(mut self, r: &LoadResult) -> Self {
        self.ops = Some(r.ops);
        self.seconds = Some(r.window.as_secs_f64());
        self.throughput = Some(r.throughput());
        self.latency = Latency::of(&r.latency);
        self.errors = r.errors.clone();
        self.cpu_us_per_op = r.cpu_us_per_op();
        self.db_cpu_us_per_op = r.db_cpu_us_per_op();
        self.machine_busy = r.machine_busy;
        if let Some(cpu) = r.generator_cpu.filter(|_| r.ops > 0) {
            self.detail(
                "generator_cpu_us_per_op",
                cpu.as_secs_f64() * 1e6 / r.ops as f64,
            );
        }
        self
    }

    pub fn detail(&mut self, key: &str, value: impl Serialize) {
        if let Ok(v) = serde_json::to_value(value) {
            self.details.insert(key.into(), v);
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// UTC, RFC 3339.
    pub date: String,
    pub git_commit: Option<String>,
    pub machine: Machine,
    pub load_before: Option<[f64; 3]>,
    pub load_after: Option<[f64; 3]>,
    pub settings: serde_json::Value,
    pub measurements: Vec<Measurement>,
    pub targets: Vec<TargetResult>,
    pub wall_seconds: f64,
}

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{v:.digits$}"))
}

fn load(l: Option<[f64; 3]>) -> String {
    l.map_or("?".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
}

impl Report {
    pub fn find(&self, name: &str) -> Option<&Measurement> {
        self.measurements.iter().find(|m| m.name == name)
    }

    /// The README's table: measurements, then targets.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(
            s,
            "Run {} on {} CPUs ({}), {:.1} GiB RAM ({:.1} GiB available), Linux {}; load average (1/5/15 min) just before the run: {} (the machine is shared); commit {}; {:.0} s wall.\n",
            self.date,
            m.cpus,
            m.cpu_model,
            m.memory_gib,
            m.memory_available_gib,
            m.kernel,
            load(self.load_before),
            self.git_commit.as_deref().unwrap_or("?"),
            self.wall_seconds,
        );
        s.push_str(
            "| measurement | clients | ops/s | limit | ratio | p50 ms | p99 ms | p99.9 ms | server CPU µs/op | DB CPU µs/op | peak RSS MiB | machine CPU busy | notes |\n\
             |---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        );
        for x in &self.measurements {
            let lat = x.latency;
            let mut notes = x.notes.clone();
            if let Some(why) = &x.skipped {
                notes.insert(0, format!("**not measured**: {why}"));
            }
            if !x.errors.is_empty() {
                let errs: Vec<String> = x.errors.iter().map(|(k, v)| format!("{v}× {k}")).collect();
                notes.push(format!("errors: {}", errs.join(", ")));
            }
            let title = match x.kind {
                Kind::Scenario => x.title.clone(),
                Kind::Limit => format!("*{}*", x.title),
            };
            let _ = writeln!(
                s,
                "| {title} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                if x.clients == 0 {
                    "–".into()
                } else {
                    x.clients.to_string()
                },
                num(x.throughput, 0),
                x.limit.as_deref().unwrap_or("–"),
                x.ratio.map_or("–".into(), |r| format!("{r:.2}×")),
                num(lat.map(|l| l.p50_ms), 2),
                num(lat.map(|l| l.p99_ms), 2),
                num(lat.map(|l| l.p999_ms), 2),
                num(x.cpu_us_per_op, 0),
                num(x.db_cpu_us_per_op, 0),
                num(x.peak_rss_mib, 1),
                x.machine_busy
                    .map_or("–".into(), |b| format!("{:.0} %", b * 100.0)),
                notes.join("; ").replace('|', "\\|"),
            );
        }
        s.push_str("\n| target | required | measured | result |\n|---|---|---:|---|\n");
        for t in &self.targets {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                t.name,
                t.requirement,
                t.measured
                    .map_or("–".into(), |v| format!("{v:.2}{}", t.unit)),
                t.verdict.label().replace('|', "\\|"),
            );
        }
        s
    }
}

/// Marks the generated part of the README's Performance section.
pub const README_START: &str = "<!-- bench:start (generated by idemkey-bench; do not edit) -->";
pub const README_END: &str = "<!-- bench:end -->";

/// `doc` with everything between the markers replaced by `content`; `None`
/// when the markers are missing or out of order.
pub fn splice(doc: &str, content: &str) -> Option<String> {
    let start = doc.find(README_START)? + README_START.len();
    let end = start + doc[start..].find(README_END)?;
    Some(format!(
        "{}\n{}\n{}",
        &doc[..start],
        content.trim_end(),
        &doc[end..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::{judge, Bound};

    #[test]
    fn the_readme_section_between_the_markers_is_replaced() {
        let doc = format!("# x\n{README_START}\nold\n{README_END}\ntail\n");
        let got = splice(&doc, "new table\n").unwrap();
        assert_eq!(
            got,
            format!("# x\n{README_START}\nnew table\n{README_END}\ntail\n")
        );
        assert_eq!(splice(&got, "new table"), Some(got.clone()));
        assert_eq!(splice("no markers", "t"), None);
        assert_eq!(splice(&format!("{README_END}{README_START}"), "t"), None);
    }

    fn report() -> Report {
        let mut a = Measurement::new("new-keys", "new keys", Kind::Scenario, 64);
        a.throughput = Some(1234.4);
        a.limit = Some("db claim+complete".into());
        a.ratio = Some(0.8123);
        a.notes.push("a|b".into());
        a.errors.insert("claim 503".into(), 2);
        let b = Measurement::skipped(
            "tiered",
            "tiered lookups",
            Kind::Scenario,
            "tiering not built",
        );
        Report {
            date: "2026-11-29T14:00:00Z".into(),
            git_commit: Some("abc1234".into()),
            machine: Machine {
                cpus: 2,
                cpu_model: "Test CPU".into(),
                memory_gib: 23.4,
                memory_available_gib: 20.0,
                kernel: "6.1".into(),
            },
            load_before: Some([0.5, 0.6, 0.7]),
            load_after: None,
            settings: serde_json::json!({}),
            measurements: vec![a, b],
            targets: vec![judge(
                "new keys vs db",
                Bound::AtLeast(0.7),
                "×",
                Ok(0.8123),
            )],
            wall_seconds: 600.0,
        }
    }

    #[test]
    fn the_table_has_one_row_per_measurement_and_target() {
        let md = report().markdown();
        assert!(
            md.contains("| new keys | 64 | 1234 | db claim+complete | 0.81× |"),
            "{md}"
        );
        assert!(md.contains("a\\|b; errors: 2× claim 503"), "{md}");
        assert!(md.contains("| tiered lookups | – | – |"), "{md}");
        assert!(md.contains("**not measured**: tiering not built"), "{md}");
        assert!(
            md.contains("| new keys vs db | ≥ 0.7× | 0.81× | PASS |"),
            "{md}"
        );
        assert!(md.contains("just before the run: 0.50 0.60 0.70"), "{md}");
    }

    #[test]
    fn the_report_round_trips_through_json() {
        let r = report();
        let text = serde_json::to_string(&r).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back.measurements.len(), 2);
        assert_eq!(back.find("new-keys").unwrap().ratio, Some(0.8123));
    }
}
