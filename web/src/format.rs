//! How numbers, ages and times read on the dashboard.

use std::time::Duration;

use chrono::{DateTime, Utc};
use idemkey_api::domain::usage::LatencyBound;

/// `1234567` → `1,234,567`.
pub fn count(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

/// A short age: `42s`, `5m 3s`, `2h 10m`, `3d 4h`.
pub fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

/// The age of `then` at `now` (zero if `then` is later).
pub fn age_at(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    age((now - then).to_std().unwrap_or_default())
}

/// A share as a percentage with one decimal, or a dash.
pub fn percent(share: Option<f64>) -> String {
    match share {
        Some(s) => format!("{:.1}%", s * 100.0),
        None => "—".to_owned(),
    }
}

/// A latency bucket bound: `≤ 1 ms`, `≤ 250 µs`, `> 4.1 s`.
pub fn latency(bound: Option<LatencyBound>) -> String {
    match bound {
        None => "—".to_owned(),
        Some(LatencyBound::AtMost(d)) => format!("≤ {}", short_duration(d)),
        Some(LatencyBound::Over(d)) => format!("> {}", short_duration(d)),
    }
}

fn short_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us < 1000 {
        format!("{us} µs")
    } else if us < 1_000_000 {
        format!("{} ms", us / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// A byte size: `512 B`, `64 KiB`, `1 MiB`.
pub fn bytes(n: usize) -> String {
    match n {
        0..1024 => format!("{n} B"),
        1024..1_048_576 => format!("{} KiB", n / 1024),
        _ if n.is_multiple_of(1_048_576) => format!("{} MiB", n / 1_048_576),
        _ => format!("{:.1} MiB", n as f64 / 1_048_576.0),
    }
}

/// A timestamp as people read it in UTC: `2026-12-01 14:03:07 UTC`.
pub fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_naturally() {
        assert_eq!(count(0), "0");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(count(-1000), "-1,000");
        assert_eq!(age(Duration::from_secs(42)), "42s");
        assert_eq!(age(Duration::from_secs(303)), "5m 3s");
        assert_eq!(age(Duration::from_secs(7800)), "2h 10m");
        assert_eq!(age(Duration::from_secs(273600)), "3d 4h");
        assert_eq!(percent(Some(0.125)), "12.5%");
        assert_eq!(percent(None), "—");
        assert_eq!(
            latency(Some(LatencyBound::AtMost(Duration::from_micros(250)))),
            "≤ 250 µs"
        );
        assert_eq!(
            latency(Some(LatencyBound::Over(Duration::from_micros(4_096_000)))),
            "> 4.1 s"
        );
        assert_eq!(bytes(1_048_576), "1 MiB");
        assert_eq!(bytes(65536), "64 KiB");
    }
}
