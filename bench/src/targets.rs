//! Ratios to limits and the issue's targets, judged from one run's numbers.
//! A target that could not be measured says why; it never passes by default.

use serde::{Deserialize, Serialize};

/// `value / limit`, when both exist and the limit is positive.
pub fn ratio(value: Option<f64>, limit: Option<f64>) -> Option<f64> {
    match (value, limit) {
        (Some(v), Some(l)) if l > 0.0 && v.is_finite() && l.is_finite() => Some(v / l),
        _ => None,
    }
}

/// What a target requires of its measured number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    AtLeast(f64),
    AtMost(f64),
    Below(f64),
}

impl Bound {
    fn holds(self, x: f64) -> bool {
        match self {
            Bound::AtLeast(b) => x >= b,
            Bound::AtMost(b) => x <= b,
            Bound::Below(b) => x < b,
        }
    }

    fn describe(self, unit: &str) -> String {
        match self {
            Bound::AtLeast(b) => format!("≥ {b}{unit}"),
            Bound::AtMost(b) => format!("≤ {b}{unit}"),
            Bound::Below(b) => format!("< {b}{unit}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// Not measured in this run, with the reason.
    NotMeasured(String),
}

impl Verdict {
    pub fn label(&self) -> String {
        match self {
            Verdict::Pass => "PASS".into(),
            Verdict::Fail => "FAIL".into(),
            Verdict::NotMeasured(why) => format!("n/a ({why})"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetResult {
    pub name: String,
    pub requirement: String,
    pub measured: Option<f64>,
    pub unit: String,
    pub verdict: Verdict,
}

/// Judges `measured` (or the reason it is missing) against `bound`.
pub fn judge(name: &str, bound: Bound, unit: &str, measured: Result<f64, String>) -> TargetResult {
    let (value, verdict) = match measured {
        Ok(x) if x.is_finite() => (
            Some(x),
            if bound.holds(x) {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
        ),
        Ok(_) => (None, Verdict::NotMeasured("not a number".into())),
        Err(why) => (None, Verdict::NotMeasured(why)),
    };
    TargetResult {
        name: name.to_owned(),
        requirement: bound.describe(unit),
        measured: value,
        unit: unit.to_owned(),
        verdict,
    }
}

/// Database reads per coalescing window: `reads` over a storm of `storm_ms`
/// with windows of `window_ms` (a storm shorter than one window is one).
pub fn reads_per_window(reads: f64, storm_ms: f64, window_ms: f64) -> Option<f64> {
    if window_ms <= 0.0 || storm_ms < 0.0 {
        return None;
    }
    Some(reads / (storm_ms / window_ms).ceil().max(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ratio_needs_both_numbers_and_a_positive_limit() {
        assert_eq!(ratio(Some(7.0), Some(10.0)), Some(0.7));
        assert_eq!(ratio(None, Some(10.0)), None);
        assert_eq!(ratio(Some(7.0), None), None);
        assert_eq!(ratio(Some(7.0), Some(0.0)), None);
        assert_eq!(ratio(Some(f64::NAN), Some(1.0)), None);
    }

    #[test]
    fn at_least_passes_on_the_boundary_and_fails_below() {
        let t = judge("new keys", Bound::AtLeast(0.7), "×", Ok(0.7));
        assert_eq!(t.verdict, Verdict::Pass);
        assert_eq!(t.requirement, "≥ 0.7×");
        let t = judge("new keys", Bound::AtLeast(0.7), "×", Ok(0.69));
        assert_eq!(t.verdict, Verdict::Fail);
        assert_eq!(t.measured, Some(0.69));
    }

    #[test]
    fn at_most_and_below_differ_on_the_boundary() {
        assert_eq!(
            judge("g", Bound::AtMost(1.5), "×", Ok(1.5)).verdict,
            Verdict::Pass
        );
        assert_eq!(
            judge("r", Bound::Below(100.0), " MiB", Ok(100.0)).verdict,
            Verdict::Fail
        );
        assert_eq!(
            judge("r", Bound::Below(100.0), " MiB", Ok(99.9)).verdict,
            Verdict::Pass
        );
    }

    #[test]
    fn a_missing_measurement_is_never_a_pass() {
        let t = judge("storm", Bound::AtMost(1.0), "", Err("no /metrics".into()));
        assert_eq!(t.verdict, Verdict::NotMeasured("no /metrics".into()));
        assert_eq!(t.measured, None);
        assert_eq!(t.verdict.label(), "n/a (no /metrics)");
        let t = judge("x", Bound::AtLeast(1.0), "", Ok(f64::INFINITY));
        assert!(matches!(t.verdict, Verdict::NotMeasured(_)));
    }

    #[test]
    fn reads_are_spread_over_whole_windows() {
        assert_eq!(reads_per_window(4.0, 2000.0, 500.0), Some(1.0));
        assert_eq!(reads_per_window(4.0, 2001.0, 500.0), Some(0.8));
        assert_eq!(reads_per_window(3.0, 10.0, 500.0), Some(3.0));
        assert_eq!(reads_per_window(3.0, 10.0, 0.0), None);
    }
}
