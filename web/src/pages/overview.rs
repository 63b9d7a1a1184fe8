//! The overview: per operation class, claims and replays over the last hour,
//! day or week, with the figures that say whether idempotency is healthy.

use std::collections::{BTreeMap, BTreeSet};

use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse};
use askama::Template;
use chrono::{DateTime, Utc};
use idemkey_api::domain::usage::UsageCounts;
use idemkey_api::routes::AppState;
use idemkey_api::store::{HotCount, HotKey, HotState};
use serde::Deserialize;

use super::chart::{chart, Chart, Point};
use super::line_chart::{self, LineChart, Sample};
use super::{key_url, segment, Layout, Tab};
use crate::error::PageError;
use crate::format;
use crate::render::render;
use crate::session::{Keys, Session};

/// A chart's time span and how it is cut into bars.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Range {
    Hour,
    Day,
    Week,
}

impl Range {
    fn parse(s: Option<&str>) -> Option<Self> {
        match s {
            None | Some("hour") => Some(Self::Hour),
            Some("day") => Some(Self::Day),
            Some("week") => Some(Self::Week),
            Some(_) => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Week => "week",
        }
    }

    /// (number of bars, seconds per bar, time-axis format)
    fn shape(self) -> (i64, i64, &'static str) {
        match self {
            Self::Hour => (60, 60, "%H:%M UTC"),
            Self::Day => (48, 1800, "%H:%M UTC"),
            Self::Week => (84, 7200, "%a %H:%M UTC"),
        }
    }
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    layout: Layout,
    range: &'static str,
    tabs: Vec<Tab>,
    classes: Vec<ClassCard>,
}

struct ClassCard {
    name: String,
    keys_href: String,
    chart: Chart,
    /// Replay rate and p99 claim latency over the same buckets.
    lines: Vec<LineChart>,
    new_claims: String,
    replays: String,
    replay_rate: String,
    key_reuses: String,
    collisions: String,
    takeovers: String,
    releases: String,
    p99: String,
    in_progress: String,
    oldest_in_progress: String,
    stuck: i64,
    /// The most claimed keys over the last minute, then the last hour.
    hot: Vec<HotList>,
}

struct HotList {
    title: &'static str,
    rows: Vec<HotRow>,
}

/// One of a class's most claimed keys.
struct HotRow {
    key: String,
    href: String,
    claims: String,
}

/// Hot keys shown per class and span.
const HOT_SHOWN: u32 = 5;

#[derive(Deserialize)]
pub struct OverviewQuery {
    range: Option<String>,
}

/// `GET /dashboard`.
pub async fn page(
    req: HttpRequest,
    state: web::Data<AppState>,
    session: Session,
    q: web::Query<OverviewQuery>,
) -> Result<HttpResponse, PageError> {
    let range = Range::parse(q.range.as_deref())
        .ok_or_else(|| PageError::BadRequest("range must be hour, day or week".into()))?;
    let (bars, secs, time_format) = range.shape();
    let now = Utc::now().timestamp();
    let first =
        DateTime::from_timestamp((now / secs - (bars - 1)) * secs, 0).expect("a time in range");
    let engine = &state.engine;
    let bucket = std::time::Duration::from_secs(secs as u64);
    let series = engine.usage_series(&session.tenant, first, bucket).await?;
    let hot = engine.hot_counts(&session.tenant).await?;
    // The current and the previous minute, and the last hour.
    let minute = DateTime::from_timestamp((now / 60 - 1) * 60, 0).expect("a time in range");
    let hour = DateTime::from_timestamp((now / 60 - 59) * 60, 0).expect("a time in range");
    let hot_minute = engine.hot_keys(&session.tenant, minute, HOT_SHOWN).await?;
    let hot_hour = engine.hot_keys(&session.tenant, hour, HOT_SHOWN).await?;

    let mut by_class: BTreeMap<&str, BTreeMap<i64, UsageCounts>> = BTreeMap::new();
    for row in &series {
        by_class
            .entry(&row.operation)
            .or_default()
            .insert(row.start.timestamp(), row.counts);
    }
    let names: BTreeSet<&str> = by_class
        .keys()
        .copied()
        .chain(hot.iter().map(|h| h.operation.as_str()))
        .collect();
    let classes = names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let buckets = by_class.remove(name).unwrap_or_default();
            let (points, samples): (Vec<Point>, Vec<Sample>) = (0..bars)
                .map(|b| {
                    let start = first.timestamp() + b * secs;
                    let start_at = DateTime::from_timestamp(start, 0).expect("a time in range");
                    let c = buckets.get(&start).copied().unwrap_or_default();
                    let point = Point {
                        start: start_at,
                        claims: c.claims,
                        replays: c.replays,
                    };
                    let sample = Sample {
                        start: start_at,
                        replay_rate: c.replay_rate(),
                        p99: c.latency_quantile(0.99),
                    };
                    (point, sample)
                })
                .unzip();
            let mut total = UsageCounts::default();
            buckets.values().for_each(|c| total.add(c));
            let chart = chart(
                format!("chart-{i}"),
                name,
                range.name(),
                &points,
                time_format,
            );
            let mut card = card(name, chart, &total, &hot);
            card.lines = vec![
                line_chart::replay_rate(format!("rate-{i}"), name, &samples, time_format),
                line_chart::p99_latency(format!("p99-{i}"), name, &samples, time_format),
            ];
            card.hot = vec![
                HotList {
                    title: "Hot keys, last minute",
                    rows: hot_rows(name, &hot_minute),
                },
                HotList {
                    title: "Hot keys, last hour",
                    rows: hot_rows(name, &hot_hour),
                },
            ];
            card
        })
        .collect();
    let tabs = [Range::Hour, Range::Day, Range::Week]
        .into_iter()
        .map(|r| Tab {
            label: format!("Last {}", r.name()),
            href: format!("/dashboard?range={}", r.name()),
            current: r == range,
        })
        .collect();
    let page = OverviewPage {
        layout: Layout::new("Overview", "overview", &session, &Keys::of(&req)),
        range: range.name(),
        tabs,
        classes,
    };
    Ok(render(StatusCode::OK, &page))
}

fn card(name: &str, chart: Chart, total: &UsageCounts, hot: &[HotCount]) -> ClassCard {
    let of = |state: HotState| hot.iter().find(|h| h.operation == name && h.state == state);
    let live = of(HotState::InProgress);
    let expired = of(HotState::LeaseExpired);
    let in_progress = live.map_or(0, |h| h.count) + expired.map_or(0, |h| h.count);
    let oldest = [live, expired]
        .into_iter()
        .flatten()
        .min_by_key(|h| h.oldest_created_at)
        .map(|h| format::age_at(h.oldest_created_at, h.observed_at))
        .unwrap_or_else(|| "—".to_owned());
    let stuck = expired.map_or(0, |h| h.count) + of(HotState::Quarantined).map_or(0, |h| h.count);
    ClassCard {
        name: name.to_owned(),
        keys_href: format!("/dashboard/keys?operation={}", segment(name)),
        chart,
        lines: Vec::new(),
        new_claims: format::count(total.claims),
        replays: format::count(total.replays),
        replay_rate: format::percent(total.replay_rate()),
        key_reuses: format::count(total.key_reuses),
        collisions: format::count(total.collisions),
        takeovers: format::count(total.takeovers),
        releases: format::count(total.releases),
        p99: format::latency(total.latency_quantile(0.99)),
        in_progress: format::count(in_progress),
        oldest_in_progress: oldest,
        stuck,
        hot: Vec::new(),
    }
}

/// The class's hot keys, most claimed first (as the store ordered them).
fn hot_rows(class: &str, hot: &[HotKey]) -> Vec<HotRow> {
    hot.iter()
        .filter(|h| h.operation.as_str() == class)
        .map(|h| HotRow {
            key: h.key.clone(),
            href: key_url(class, &h.key),
            claims: format::count(h.claims),
        })
        .collect()
}
