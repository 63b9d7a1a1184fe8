//! Latency histograms (HDR, microseconds) and their summary.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency recorded exactly: one minute (slower answers saturate).
const MAX_MICROS: u64 = 60_000_000;

/// A latency histogram in microseconds with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds")
}

/// Records one latency, saturating at the histogram's bounds.
pub fn record(h: &mut Histogram<u64>, latency: Duration) {
    let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    h.saturating_record(micros.clamp(1, MAX_MICROS));
}

/// What the report shows of a histogram, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// `None` for an empty histogram: no answers means no latency, not zero.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Some(Self {
            count: h.len(),
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_histogram_has_no_summary() {
        assert_eq!(Latency::of(&new_histogram()), None);
    }

    #[test]
    fn percentiles_come_from_the_recorded_latencies() {
        let mut h = new_histogram();
        for ms in 1..=1000 {
            record(&mut h, Duration::from_millis(ms));
        }
        let s = Latency::of(&h).unwrap();
        assert_eq!(s.count, 1000);
        let near = |got: f64, want: f64| (got - want).abs() <= want * 0.001 + 0.001;
        assert!(near(s.p50_ms, 500.0), "{s:?}");
        assert!(near(s.p99_ms, 990.0), "{s:?}");
        assert!(near(s.p999_ms, 999.0), "{s:?}");
        assert!(near(s.max_ms, 1000.0), "{s:?}");
        assert!(near(s.mean_ms, 500.5), "{s:?}");
    }

    #[test]
    fn latencies_outside_the_bounds_saturate() {
        let mut h = new_histogram();
        record(&mut h, Duration::ZERO);
        record(&mut h, Duration::from_secs(3600));
        let s = Latency::of(&h).unwrap();
        assert_eq!(s.count, 2);
        assert!(s.max_ms >= 59_999.0 && s.max_ms <= 60_100.0, "{s:?}");
    }
}
