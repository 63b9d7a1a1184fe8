//! Usage figures: what one tenant's operation class did in one minute.
//!
//! Counts are plain integers so they add up across nodes and restarts: each
//! node adds its own minute's counts to the stored row, and a chart sums
//! rows. Claim latency is kept the same way, as counts per fixed log-scale
//! bucket, because percentiles themselves cannot be merged but bucket counts
//! can: p99 over any set of rows is read off their summed buckets.
//!
//! Buckets double from 250 µs: bucket `i` (0–14) holds latencies up to
//! `250 µs × 2^i` (the last bounded one ends at 4.096 s); bucket 15 holds
//! everything slower. A percentile is reported as the upper bound of its
//! bucket, so it overstates by less than a factor of two and never
//! understates.

use std::time::Duration;

/// How many latency buckets a row has.
pub const LATENCY_BUCKETS: usize = 16;

/// Upper bound of the first bucket, in microseconds.
const FIRST_BOUND_US: u64 = 250;

/// The upper bound of bucket `i`, or `None` for the last (unbounded) one.
pub fn bucket_bound(i: usize) -> Option<Duration> {
    (i < LATENCY_BUCKETS - 1).then(|| Duration::from_micros(FIRST_BOUND_US << i))
}

/// The bucket a latency falls in.
pub fn latency_bucket(d: Duration) -> usize {
    (0..LATENCY_BUCKETS - 1)
        .find(|&i| d <= Duration::from_micros(FIRST_BOUND_US << i))
        .unwrap_or(LATENCY_BUCKETS - 1)
}

/// What a claim or release request came to, as usage counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageEvent {
    /// A new key (or one past its window): ownership granted.
    Claimed,
    /// A completed key's outcome replayed.
    Replayed,
    /// The key was used with a different request (422 `key_reused`).
    KeyReused,
    /// Another attempt held the key (409 `in_progress`).
    InProgress,
    /// A key given back: by its owner, or released by a resolve.
    Released,
    /// An expired lease taken over (`recovering`).
    TakenOver,
}

/// One row's counts. Signed because both databases store `bigint`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageCounts {
    pub claims: i64,
    pub replays: i64,
    pub key_reuses: i64,
    pub collisions: i64,
    pub releases: i64,
    pub takeovers: i64,
    /// Claim calls per latency bucket.
    pub latency: [i64; LATENCY_BUCKETS],
}

/// A percentile read off bucket counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LatencyBound {
    /// At most this long.
    AtMost(Duration),
    /// Slower than the last bounded bucket.
    Over(Duration),
}

impl UsageCounts {
    /// Counts one event.
    pub fn count(&mut self, event: UsageEvent) {
        let field = match event {
            UsageEvent::Claimed => &mut self.claims,
            UsageEvent::Replayed => &mut self.replays,
            UsageEvent::KeyReused => &mut self.key_reuses,
            UsageEvent::InProgress => &mut self.collisions,
            UsageEvent::Released => &mut self.releases,
            UsageEvent::TakenOver => &mut self.takeovers,
        };
        *field += 1;
    }

    /// Counts one claim call's latency.
    pub fn time(&mut self, latency: Duration) {
        self.latency[latency_bucket(latency)] += 1;
    }

    pub fn add(&mut self, other: &UsageCounts) {
        self.claims += other.claims;
        self.replays += other.replays;
        self.key_reuses += other.key_reuses;
        self.collisions += other.collisions;
        self.releases += other.releases;
        self.takeovers += other.takeovers;
        for (mine, theirs) in self.latency.iter_mut().zip(other.latency) {
            *mine += theirs;
        }
    }

    /// Every claim call that got an answer from the engine, whatever it was
    /// (each one is timed exactly once).
    pub fn claim_calls(&self) -> i64 {
        self.latency.iter().sum()
    }

    /// Replays as a share of claim calls; `None` without calls.
    pub fn replay_rate(&self) -> Option<f64> {
        let calls = self.claim_calls();
        (calls > 0).then(|| self.replays as f64 / calls as f64)
    }

    /// The `q`-quantile (0 < q ≤ 1) of claim latency; `None` without calls.
    pub fn latency_quantile(&self, q: f64) -> Option<LatencyBound> {
        let calls = self.claim_calls();
        if calls == 0 {
            return None;
        }
        // The rank of the call at quantile q, counted from 1.
        let rank = ((q * calls as f64).ceil() as i64).clamp(1, calls);
        let mut seen = 0;
        for (i, n) in self.latency.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(match bucket_bound(i) {
                    Some(bound) => LatencyBound::AtMost(bound),
                    None => LatencyBound::Over(bucket_bound(i - 1).expect("a bounded bucket")),
                });
            }
        }
        unreachable!("the buckets add up to the call count")
    }

    pub fn is_empty(&self) -> bool {
        *self == UsageCounts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_double_from_a_quarter_millisecond() {
        assert_eq!(bucket_bound(0), Some(Duration::from_micros(250)));
        assert_eq!(bucket_bound(2), Some(Duration::from_millis(1)));
        assert_eq!(bucket_bound(14), Some(Duration::from_micros(4_096_000)));
        assert_eq!(bucket_bound(15), None);
        assert_eq!(latency_bucket(Duration::ZERO), 0);
        assert_eq!(latency_bucket(Duration::from_micros(250)), 0);
        assert_eq!(latency_bucket(Duration::from_micros(251)), 1);
        assert_eq!(latency_bucket(Duration::from_millis(3)), 4);
        assert_eq!(latency_bucket(Duration::from_secs(60)), 15);
    }

    #[test]
    fn p99_is_the_bound_of_the_bucket_holding_the_99th_percentile() {
        let mut c = UsageCounts::default();
        for _ in 0..99 {
            c.time(Duration::from_micros(900)); // bucket 2 (≤ 1 ms)
        }
        c.time(Duration::from_millis(30)); // bucket 7 (≤ 32 ms)
        assert_eq!(
            c.latency_quantile(0.99),
            Some(LatencyBound::AtMost(Duration::from_millis(1)))
        );
        assert_eq!(
            c.latency_quantile(1.0),
            Some(LatencyBound::AtMost(Duration::from_millis(32)))
        );
        c.time(Duration::from_secs(9));
        c.time(Duration::from_secs(9));
        assert_eq!(
            c.latency_quantile(0.99),
            Some(LatencyBound::Over(Duration::from_micros(4_096_000)))
        );
        assert_eq!(UsageCounts::default().latency_quantile(0.99), None);
    }

    #[test]
    fn counts_from_two_nodes_add_up() {
        let mut a = UsageCounts::default();
        a.count(UsageEvent::Claimed);
        a.count(UsageEvent::Replayed);
        a.time(Duration::from_millis(1));
        a.time(Duration::from_millis(1));
        let mut b = UsageCounts::default();
        b.count(UsageEvent::Replayed);
        b.count(UsageEvent::KeyReused);
        b.time(Duration::from_millis(100));
        a.add(&b);
        assert_eq!((a.claims, a.replays, a.key_reuses), (1, 2, 1));
        assert_eq!(a.claim_calls(), 3);
        assert_eq!(a.replay_rate(), Some(2.0 / 3.0));
        assert!(!a.is_empty() && UsageCounts::default().is_empty());
    }
}
