//! Line charts beside the bars: the replay rate (0–100 %) and the p99 claim
//! latency (a log scale: latencies span microseconds to seconds) per time
//! bucket, as SVG view models; `_line_chart.html` only writes them out. A
//! bucket without claims has no value and leaves a gap in the line rather
//! than pretend to be zero.

use std::time::Duration;

use chrono::{DateTime, Utc};
use idemkey_api::domain::usage::LatencyBound;

use super::chart::{r1, time_ticks, Tick};
use crate::format;

const WIDTH: f64 = 440.0;
const HEIGHT: f64 = 150.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 8.0;
const TOP: f64 = 10.0;
const BOTTOM: f64 = 24.0;

pub struct LineChart {
    /// Unique on the page: the id of the SVG's `<title>`.
    pub id: String,
    pub heading: &'static str,
    /// What the chart shows, in words (its accessible name).
    pub label: String,
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub baseline: f64,
    /// An SVG path (`M x y L x y …`), broken where a bucket has no value.
    pub path: String,
    pub dots: Vec<Dot>,
    pub y_ticks: Vec<Tick>,
    pub x_ticks: Vec<Tick>,
}

pub struct Dot {
    pub x: f64,
    pub y: f64,
    pub title: String,
}

/// One bucket's figures.
pub struct Sample {
    pub start: DateTime<Utc>,
    pub replay_rate: Option<f64>,
    pub p99: Option<LatencyBound>,
}

/// The replay rate per bucket, 0 to 100 %.
pub fn replay_rate(id: String, class: &str, samples: &[Sample], time_format: &str) -> LineChart {
    let values: Vec<Option<f64>> = samples.iter().map(|s| s.replay_rate).collect();
    let ticks = [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")]
        .map(|(v, l)| (v, l.to_owned()))
        .to_vec();
    let mut chart = line(
        id,
        samples,
        &values,
        (0.0, 1.0),
        ticks,
        time_format,
        |s, v| format!("{}: replay rate {}", s, format::percent(Some(v))),
    );
    chart.heading = "Replay rate";
    chart.label = format!("{class}: replay rate per bucket, 0 to 100 %");
    chart
}

/// The p99 claim latency per bucket, on a log scale in milliseconds.
pub fn p99_latency(id: String, class: &str, samples: &[Sample], time_format: &str) -> LineChart {
    let ms = |b: &LatencyBound| match b {
        LatencyBound::AtMost(d) | LatencyBound::Over(d) => d.as_secs_f64() * 1000.0,
    };
    let values: Vec<Option<f64>> = samples
        .iter()
        .map(|s| s.p99.as_ref().map(|b| ms(b).max(0.01).log10()))
        .collect();
    let highest = values.iter().flatten().fold(0.0_f64, |m, v| m.max(*v));
    // Decades from 0.1 ms up to the first one above every value.
    let top = highest.ceil().max(1.0);
    let ticks = (-1..=top as i32)
        .map(|e| {
            let label = format::latency(Some(LatencyBound::AtMost(Duration::from_secs_f64(
                10f64.powi(e) / 1000.0,
            ))));
            (f64::from(e), label.trim_start_matches("≤ ").to_owned())
        })
        .collect();
    let bounds: Vec<Option<&LatencyBound>> = samples.iter().map(|s| s.p99.as_ref()).collect();
    let mut chart = line(
        id,
        samples,
        &values,
        (-1.0, top),
        ticks,
        time_format,
        |s, _| s,
    );
    for (dot, bound) in chart.dots.iter_mut().zip(bounds.iter().flatten()) {
        dot.title = format!("{}: p99 {}", dot.title, format::latency(Some(**bound)));
    }
    chart.heading = "p99 claim latency";
    chart.label = format!("{class}: p99 claim latency per bucket, log scale");
    chart
}

/// The plot of `values` (one per sample, `None` for a gap) between
/// `range.0` and `range.1`.
fn line(
    id: String,
    samples: &[Sample],
    values: &[Option<f64>],
    range: (f64, f64),
    y_ticks: Vec<(f64, String)>,
    time_format: &str,
    title: impl Fn(String, f64) -> String,
) -> LineChart {
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let baseline = HEIGHT - BOTTOM;
    let slot = plot_w / samples.len().max(1) as f64;
    let y_of = |v: f64| {
        let share = ((v - range.0) / (range.1 - range.0)).clamp(0.0, 1.0);
        r1(baseline - share * plot_h)
    };
    let mut path = String::new();
    let mut dots = Vec::new();
    let mut pen_down = false;
    for (i, (sample, value)) in samples.iter().zip(values).enumerate() {
        let Some(v) = value else {
            pen_down = false;
            continue;
        };
        let (x, y) = (r1(LEFT + slot * (i as f64 + 0.5)), y_of(*v));
        path.push_str(&format!("{}{x} {y} ", if pen_down { "L" } else { "M" }));
        pen_down = true;
        dots.push(Dot {
            x,
            y,
            title: title(sample.start.format(time_format).to_string(), *v),
        });
    }
    let y_ticks = y_ticks
        .into_iter()
        .map(|(v, label)| Tick {
            x: LEFT - 6.0,
            y: y_of(v) + 4.0,
            line_y: y_of(v),
            label,
            anchor: "end",
        })
        .collect();
    let x_ticks = time_ticks(
        samples.first().map(|s| s.start),
        time_format,
        LEFT,
        WIDTH - RIGHT,
        HEIGHT - 6.0,
        baseline,
    );
    LineChart {
        id,
        heading: "",
        label: String::new(),
        width: WIDTH,
        height: HEIGHT,
        left: LEFT,
        right: WIDTH - RIGHT,
        baseline,
        path: path.trim_end().to_owned(),
        dots,
        y_ticks,
        x_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(min: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(min * 60, 0).unwrap()
    }

    #[test]
    fn a_bucket_without_claims_breaks_the_line_and_values_fit_the_plot() {
        let samples = vec![
            Sample {
                start: at(0),
                replay_rate: Some(0.0),
                p99: Some(LatencyBound::AtMost(Duration::from_micros(250))),
            },
            Sample {
                start: at(1),
                replay_rate: None,
                p99: None,
            },
            Sample {
                start: at(2),
                replay_rate: Some(1.0),
                p99: Some(LatencyBound::Over(Duration::from_secs(4))),
            },
            Sample {
                start: at(3),
                replay_rate: Some(0.5),
                p99: Some(LatencyBound::AtMost(Duration::from_millis(2))),
            },
        ];

        let rate = replay_rate("r".into(), "c", &samples, "%H:%M");
        let p99 = p99_latency("p".into(), "c", &samples, "%H:%M");

        assert_eq!(rate.path.matches('M').count(), 2, "two runs: {}", rate.path);
        assert_eq!(rate.dots.len(), 3);
        assert_eq!(rate.dots[0].y, rate.baseline, "0 % on the axis");
        assert_eq!(rate.dots[1].y, TOP, "100 % at the top");
        assert!(rate.dots[2].title.contains("50.0%"));
        assert!(p99.dots.iter().all(|d| d.y >= TOP && d.y <= p99.baseline));
        assert!(p99.dots[0].y > p99.dots[2].y, "2 ms above 250 µs");
        assert!(p99.dots[1].y < p99.dots[2].y, "over 4 s highest");
        assert!(
            p99.dots[1].title.contains("> 4.0 s"),
            "{}",
            p99.dots[1].title
        );
        let labels: Vec<&str> = p99.y_ticks.iter().map(|t| t.label.as_str()).collect();
        assert_eq!(labels.first(), Some(&"100 µs"));
        assert_eq!(labels.last(), Some(&"10.0 s"));
    }
}
