//! A hand-written SVG chart of a report: throughput bars (scenarios beside
//! their limits, with the ratio) and latency bars (p50 / p99 / p99.9 on a
//! log scale). No plotting crate: the chart is simple enough to write out.

use std::fmt::Write;

use crate::report::{Kind, Report};

const WIDTH: f64 = 1060.0;
const LABEL_W: f64 = 330.0;
const BAR_W: f64 = 520.0;
const ROW: f64 = 24.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Position on a log10 axis from `lo` to `hi`, in 0..=1.
pub fn log_position(v: f64, lo: f64, hi: f64) -> f64 {
    if v <= lo || hi <= lo {
        return 0.0;
    }
    ((v.ln() - lo.ln()) / (hi.ln() - lo.ln())).clamp(0.0, 1.0)
}

pub fn chart(report: &Report) -> String {
    let rows: Vec<_> = report
        .measurements
        .iter()
        .filter(|m| m.throughput.is_some())
        .collect();
    let lat_rows: Vec<_> = report
        .measurements
        .iter()
        .filter_map(|m| m.latency.map(|l| (m, l)))
        .collect();
    let top_a = 74.0;
    let top_b = top_a + rows.len() as f64 * ROW + 70.0;
    let height = top_b + lat_rows.len() as f64 * ROW + 60.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">idemkey benchmark — {}</text>"#,
        esc(&report.date)
    );
    let load = report
        .load_before
        .map_or("?".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"));
    let _ = writeln!(
        s,
        r##"<text x="10" y="40" fill="#555">{} × {}, load average before the run {}</text>"##,
        report.machine.cpus,
        esc(&report.machine.cpu_model),
        load
    );

    // Throughput on a log axis (the HTTP limit is tens of times the rest).
    let tp_lo = 100.0;
    let tp_hi = rows
        .iter()
        .filter_map(|m| m.throughput)
        .fold(1000.0_f64, f64::max)
        * 1.2;
    let _ = writeln!(
        s,
        r#"<text x="10" y="{}" font-weight="bold">Throughput, operations or transactions per second (log scale; grey: limits)</text>"#,
        top_a - 8.0
    );
    for (i, m) in rows.iter().enumerate() {
        let y = top_a + i as f64 * ROW;
        let tp = m.throughput.unwrap_or(0.0);
        let w = (log_position(tp, tp_lo, tp_hi) * BAR_W).max(1.0);
        let fill = if m.kind == Kind::Limit {
            "#9e9e9e"
        } else {
            "#3b78c2"
        };
        let ratio = m
            .ratio
            .map_or(String::new(), |r| format!(" ({r:.2}× its limit)"));
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text><rect x="{LABEL_W}" y="{}" width="{w:.1}" height="{}" fill="{fill}"/><text x="{:.1}" y="{}">{tp:.0}{}</text>"#,
            LABEL_W - 8.0,
            y + 15.0,
            esc(&m.title),
            y + 4.0,
            ROW - 8.0,
            LABEL_W + w + 6.0,
            y + 15.0,
            esc(&ratio)
        );
    }

    // Latency on a log axis from 0.1 ms to the largest p99.9.
    let lo = 0.1;
    let hi = lat_rows
        .iter()
        .map(|(_, l)| l.p999_ms)
        .fold(1.0_f64, f64::max)
        * 1.2;
    let _ = writeln!(
        s,
        r#"<text x="10" y="{}" font-weight="bold">Latency, ms (log scale): p50 dark, p99 mid, p99.9 light</text>"#,
        top_b - 24.0
    );
    let mut tick = lo;
    while tick <= hi {
        let x = LABEL_W + log_position(tick, lo, hi) * BAR_W;
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#dddddd"/><text x="{x:.1}" y="{}" text-anchor="middle" fill="#777">{}</text>"##,
            top_b - 4.0,
            top_b + lat_rows.len() as f64 * ROW,
            top_b - 8.0,
            tick
        );
        tick *= 10.0;
    }
    for (i, (m, l)) in lat_rows.iter().enumerate() {
        let y = top_b + i as f64 * ROW;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LABEL_W - 8.0,
            y + 15.0,
            esc(&m.title)
        );
        for (v, fill) in [
            (l.p999_ms, "#b9d3f0"),
            (l.p99_ms, "#6fa3dc"),
            (l.p50_ms, "#1f4e8c"),
        ] {
            let w = (log_position(v, lo, hi) * BAR_W).max(1.0);
            let _ = writeln!(
                s,
                r#"<rect x="{LABEL_W}" y="{}" width="{w:.1}" height="{}" fill="{fill}"/>"#,
                y + 4.0,
                ROW - 8.0
            );
        }
        let x = LABEL_W + log_position(l.p999_ms, lo, hi) * BAR_W + 6.0;
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{}">{:.2} / {:.2} / {:.2}</text>"#,
            y + 15.0,
            l.p50_ms,
            l.p99_ms,
            l.p999_ms
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_positions_span_the_axis() {
        assert_eq!(log_position(0.1, 0.1, 1000.0), 0.0);
        assert!((log_position(1000.0, 0.1, 1000.0) - 1.0).abs() < 1e-9);
        assert!((log_position(10.0, 0.1, 1000.0) - 0.5).abs() < 1e-9);
        assert_eq!(log_position(5000.0, 0.1, 1000.0), 1.0);
        assert_eq!(log_position(-1.0, 0.1, 1000.0), 0.0);
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
