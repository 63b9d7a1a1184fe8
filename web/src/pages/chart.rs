//! Claims-and-replays bar charts as SVG view models: every coordinate is
//! computed here, and `_chart.html` only writes them out. Bars stack new
//! claims (bottom) and replays (top) per time bucket.

use chrono::{DateTime, Utc};

use crate::format;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 26.0;

pub struct Chart {
    /// Unique on the page: the id of the SVG's `<title>`.
    pub id: String,
    /// What the chart shows, in words (its accessible name).
    pub label: String,
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub baseline: f64,
    pub bars: Vec<Bar>,
    pub y_ticks: Vec<Tick>,
    pub x_ticks: Vec<Tick>,
}

pub struct Bar {
    pub x: f64,
    pub w: f64,
    pub claims_y: f64,
    pub claims_h: f64,
    pub replays_y: f64,
    pub replays_h: f64,
    /// The bucket's figures, shown as a tooltip.
    pub title: String,
}

pub struct Tick {
    pub x: f64,
    pub y: f64,
    /// Where a grid line for this tick goes (y ticks only).
    pub line_y: f64,
    pub label: String,
    pub anchor: &'static str,
}

/// One bucket's figures.
pub struct Point {
    pub start: DateTime<Utc>,
    pub claims: i64,
    pub replays: i64,
}

/// A coordinate rounded to a tenth, as the SVG writes it.
pub(super) fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The time axis's two labels: the first bucket's start at the left edge
/// (`left`), "now" at the right edge (`right`), on the line `y`.
pub(super) fn time_ticks(
    first: Option<DateTime<Utc>>,
    time_format: &str,
    left: f64,
    right: f64,
    y: f64,
    baseline: f64,
) -> Vec<Tick> {
    let Some(first) = first else {
        return Vec::new();
    };
    vec![
        Tick {
            x: left,
            y,
            line_y: baseline,
            label: first.format(time_format).to_string(),
            anchor: "start",
        },
        Tick {
            x: right,
            y,
            line_y: baseline,
            label: "now".to_owned(),
            anchor: "end",
        },
    ]
}

/// The smallest 1, 2 or 5 × 10^k at least `n` (and at least 1).
fn nice_ceiling(n: i64) -> i64 {
    let mut step = 1;
    loop {
        for m in [1, 2, 5] {
            if m * step >= n {
                return m * step;
            }
        }
        step *= 10;
    }
}

/// A chart of `points` (oldest first); `time_format` labels the time axis.
pub fn chart(id: String, class: &str, range: &str, points: &[Point], time_format: &str) -> Chart {
    let n = points.len().max(1) as f64;
    let top = points
        .iter()
        .map(|p| p.claims + p.replays)
        .max()
        .unwrap_or(0);
    let y_max = nice_ceiling(top.max(1)) as f64;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let baseline = HEIGHT - BOTTOM;
    let slot = plot_w / n;
    let height_of = |v: i64| v as f64 / y_max * plot_h;
    let bars = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.claims + p.replays > 0)
        .map(|(i, p)| {
            let claims_h = height_of(p.claims);
            let replays_h = height_of(p.replays);
            Bar {
                x: r1(LEFT + slot * i as f64 + slot * 0.15),
                w: r1((slot * 0.7).max(1.0)),
                claims_y: r1(baseline - claims_h),
                claims_h: r1(claims_h),
                replays_y: r1(baseline - claims_h - replays_h),
                replays_h: r1(replays_h),
                title: format!(
                    "{}: {} new claims, {} replays",
                    p.start.format(time_format),
                    format::count(p.claims),
                    format::count(p.replays)
                ),
            }
        })
        .collect();
    // Halfway only where it is a whole number (not for a maximum of 1 or 5).
    let fractions: &[f64] = if y_max as i64 % 2 == 0 {
        &[0.0, 0.5, 1.0]
    } else {
        &[0.0, 1.0]
    };
    let y_ticks = fractions
        .iter()
        .map(|&f| Tick {
            x: LEFT - 6.0,
            y: r1(baseline - f * plot_h + 4.0),
            line_y: r1(baseline - f * plot_h),
            label: format::count((y_max * f).round() as i64),
            anchor: "end",
        })
        .collect();
    let x_ticks = time_ticks(
        points.first().map(|p| p.start),
        time_format,
        LEFT,
        WIDTH - RIGHT,
        HEIGHT - 8.0,
        baseline,
    );
    let claims: i64 = points.iter().map(|p| p.claims).sum();
    let replays: i64 = points.iter().map(|p| p.replays).sum();
    Chart {
        id,
        label: format!(
            "{class}: {} new claims and {} replays over the last {range}",
            format::count(claims),
            format::count(replays)
        ),
        width: WIDTH,
        height: HEIGHT,
        left: LEFT,
        right: WIDTH - RIGHT,
        baseline,
        bars,
        y_ticks,
        x_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_stack_replays_on_claims_and_fit_the_plot() {
        let start = DateTime::from_timestamp(0, 0).unwrap();
        let points = vec![
            Point {
                start,
                claims: 3,
                replays: 2,
            },
            Point {
                start,
                claims: 0,
                replays: 0,
            },
            Point {
                start,
                claims: 1,
                replays: 0,
            },
        ];
        let c = chart("c1".into(), "charges.create", "hour", &points, "%H:%M");
        assert_eq!(c.bars.len(), 2, "empty buckets draw nothing");
        let b = &c.bars[0];
        assert_eq!(b.claims_y + b.claims_h, c.baseline);
        assert!((b.replays_y + b.replays_h - b.claims_y).abs() < 0.11);
        assert!(b.replays_y >= TOP - 0.1, "a bucket at the maximum fits");
        assert_eq!(c.y_ticks.last().unwrap().label, "5");
        assert_eq!(c.y_ticks.len(), 2, "no halfway tick at 2.5");
        assert!(c.label.contains("4 new claims and 2 replays"));
    }

    #[test]
    fn axis_maximums_are_round_numbers() {
        assert_eq!(nice_ceiling(1), 1);
        assert_eq!(nice_ceiling(3), 5);
        assert_eq!(nice_ceiling(7), 10);
        assert_eq!(nice_ceiling(11), 20);
        assert_eq!(nice_ceiling(4000), 5000);
    }
}
