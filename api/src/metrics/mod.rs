//! Prometheus metrics, served at `GET /metrics` (OpenMetrics text).
//!
//! One registry per running application, not a global one: tests run many
//! servers in one process and each must count only its own work. Labels are
//! fixed words (statement names, layers, answer words); no tenant, key or
//! other caller data ever becomes a label.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

mod labels;

pub use labels::*;

pub struct Metrics {
    registry: Registry,
    /// Statements sent to the database, by name.
    pub store_statements: Family<Statement, Counter>,
    /// Cache lookups by layer (`local`, `redis`) and result (`hit`, `miss`).
    pub cache_lookups: Family<CacheLookup, Counter>,
    /// Redis calls that were skipped or failed, so the database answered.
    pub redis_fallbacks: Family<Reason, Counter>,
    /// 1 while the Redis circuit breaker is open (Redis is being skipped).
    pub redis_circuit_open: Gauge,
    /// Claim answers by their `status` word or problem `code`.
    pub claims: Family<Status, Counter>,
    /// Claims that joined another request's read of the same key.
    pub coalesced_reads: Counter,
    /// Claims waiting (`wait_ms`) for another attempt right now.
    pub claim_waiters: Gauge,
    /// Why a waiting claim looked at its key again.
    pub waiter_wakeups: Family<Cause, Counter>,
    /// Key change events received, by where they came from.
    pub key_events: Family<Source, Counter>,
    pub stuck_keys: Family<Kind, Gauge>,
    pub stuck_oldest_age_seconds: Family<Kind, Gauge>,
    pub lease_watch_quarantined: Counter,
    /// Webhook delivery attempts, by result.
    pub webhook_deliveries: Family<DeliveryResult, Counter>,
    pub rate_limited: Counter,
    pub claim_seconds: Family<Status, Histogram, fn() -> Histogram>,
    pub outcome_bytes: Histogram,
    pub tiered_records: Counter,
    pub segments_written: Counter,
    pub cleaned_records: Counter,
    pub segments_deleted: Counter,
    pub archive_reads: Family<Status, Counter>,
    pub tiering_lag_seconds: Gauge,
    pub cleanup_lag_seconds: Gauge,
    pub archive_segments: Gauge,
    pub archive_segment_records: Gauge,
    pub archive_bytes: Gauge,
    /// Background worker passes, by worker and result (`ok`, `failed`).
    pub worker_passes: Family<WorkerPass, Counter>,
    /// How long each worker's passes take.
    pub worker_pass_seconds: Family<Worker, Histogram, fn() -> Histogram>,
    /// The series a cached replay touches, looked up once here: a family
    /// lookup (lock, hash of the labels) on every call was ~4 % of a cached
    /// replay's CPU. Each shares its value with the family's series.
    hot: HotSeries,
}

struct HotSeries {
    local_hit: Counter,
    local_miss: Counter,
    completed: Counter,
    completed_seconds: Histogram,
}

impl HotSeries {
    fn of(
        lookups: &Family<CacheLookup, Counter>,
        claims: &Family<Status, Counter>,
        seconds: &Family<Status, Histogram, fn() -> Histogram>,
    ) -> Self {
        let local = |result| CacheLookup {
            layer: "local",
            result,
        };
        let completed = Status {
            status: "completed",
        };
        // One statement each: `get_or_create` holds the family's lock until
        // the end of the statement, and the next insert needs it.
        let local_hit = lookups.get_or_create(&local("hit")).clone();
        let local_miss = lookups.get_or_create(&local("miss")).clone();
        let completed_seconds = seconds.get_or_create(&completed).clone();
        let completed = claims.get_or_create(&completed).clone();
        Self {
            local_hit,
            local_miss,
            completed,
            completed_seconds,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("idemkey");
        let cache_lookups = Family::default();
        let claims = Family::default();
        let claim_seconds = Family::new_with_constructor(claim_histogram as fn() -> Histogram);
        let hot = HotSeries::of(&cache_lookups, &claims, &claim_seconds);
        let m = Self {
            store_statements: Family::default(),
            cache_lookups,
            redis_fallbacks: Family::default(),
            redis_circuit_open: Gauge::default(),
            claims,
            coalesced_reads: Counter::default(),
            claim_waiters: Gauge::default(),
            waiter_wakeups: Family::default(),
            key_events: Family::default(),
            stuck_keys: Family::default(),
            stuck_oldest_age_seconds: Family::default(),
            lease_watch_quarantined: Counter::default(),
            webhook_deliveries: Family::default(),
            rate_limited: Counter::default(),
            claim_seconds,
            // 64 bytes to 8 MiB, the largest outcome a class may allow.
            outcome_bytes: Histogram::new(exponential_buckets(64.0, 2.0, 18)),
            tiered_records: Counter::default(),
            segments_written: Counter::default(),
            cleaned_records: Counter::default(),
            segments_deleted: Counter::default(),
            archive_reads: Family::default(),
            tiering_lag_seconds: Gauge::default(),
            cleanup_lag_seconds: Gauge::default(),
            archive_segments: Gauge::default(),
            archive_segment_records: Gauge::default(),
            archive_bytes: Gauge::default(),
            worker_passes: Family::default(),
            worker_pass_seconds: Family::new_with_constructor(
                worker_histogram as fn() -> Histogram,
            ),
            registry: Registry::default(),
            hot,
        };
        registry.register(
            "store_statements",
            "Statements sent to the database, by statement",
            m.store_statements.clone(),
        );
        registry.register(
            "cache_lookups",
            "Outcome cache lookups by layer and result",
            m.cache_lookups.clone(),
        );
        registry.register(
            "redis_fallbacks",
            "Redis calls skipped or failed (the database answered instead), by reason",
            m.redis_fallbacks.clone(),
        );
        registry.register(
            "redis_circuit_open",
            "1 while Redis is being skipped after failures",
            m.redis_circuit_open.clone(),
        );
        registry.register(
            "claims",
            "Claim answers by status word or problem code",
            m.claims.clone(),
        );
        registry.register(
            "coalesced_reads",
            "Claims that shared another claim's read of the same key",
            m.coalesced_reads.clone(),
        );
        registry.register(
            "claim_waiters",
            "Claims waiting for another attempt right now",
            m.claim_waiters.clone(),
        );
        registry.register(
            "waiter_wakeups",
            "Why a waiting claim looked at its key again",
            m.waiter_wakeups.clone(),
        );
        registry.register(
            "key_events",
            "Key change events received, by source",
            m.key_events.clone(),
        );
        registry.register(
            "stuck_keys",
            "Keys in progress, with an expired lease, or quarantined (lease watch; all tenants)",
            m.stuck_keys.clone(),
        );
        registry.register(
            "stuck_oldest_age_seconds",
            "Age of the oldest key of each stuck kind (since its claim, lease end or quarantine)",
            m.stuck_oldest_age_seconds.clone(),
        );
        registry.register(
            "lease_watch_quarantined",
            "Expired leases the lease watch quarantined under a quarantine policy",
            m.lease_watch_quarantined.clone(),
        );
        registry.register(
            "webhook_deliveries",
            "Webhook delivery attempts by result: delivered, retried (to be tried again) or failed (given up)",
            m.webhook_deliveries.clone(),
        );
        registry.register(
            "claim_seconds",
            "Claim latency as the server saw it (body read to answer), by status word or problem code",
            m.claim_seconds.clone(),
        );
        registry.register(
            "outcome_bytes",
            "Sizes of outcomes stored by complete and resolve",
            m.outcome_bytes.clone(),
        );
        registry.register(
            "rate_limited",
            "API calls refused with 429 because their tenant was over its rate limit on this node",
            m.rate_limited.clone(),
        );
        registry.register(
            "tiered_records",
            "Records whose outcome this node moved to the archive",
            m.tiered_records.clone(),
        );
        registry.register(
            "segments_written",
            "Archive segments this node wrote and verified",
            m.segments_written.clone(),
        );
        registry.register(
            "cleaned_records",
            "Records past their replay window this node removed",
            m.cleaned_records.clone(),
        );
        registry.register(
            "segments_deleted",
            "Archive segments this node deleted (every record expired, or orphaned)",
            m.segments_deleted.clone(),
        );
        registry.register(
            "archive_reads",
            "Reads of tiered outcomes from the archive, by result",
            m.archive_reads.clone(),
        );
        registry.register(
            "tiering_lag_seconds",
            "How long the oldest record due for tiering has waited (0: none waiting)",
            m.tiering_lag_seconds.clone(),
        );
        registry.register(
            "cleanup_lag_seconds",
            "How long the oldest expired record has waited for cleanup (0: none waiting)",
            m.cleanup_lag_seconds.clone(),
        );
        registry.register(
            "archive_segments",
            "Live segments in the archive",
            m.archive_segments.clone(),
        );
        registry.register(
            "archive_segment_records",
            "Records packed into live segments (including expired ones not yet cleaned up)",
            m.archive_segment_records.clone(),
        );
        registry.register(
            "archive_bytes",
            "Bytes in live segments",
            m.archive_bytes.clone(),
        );
        registry.register(
            "worker_passes",
            "Background worker passes, by worker and result",
            m.worker_passes.clone(),
        );
        registry.register(
            "worker_pass_seconds",
            "How long background worker passes take, by worker",
            m.worker_pass_seconds.clone(),
        );
        Self { registry, ..m }
    }

    pub fn statement(&self, statement: &'static str) {
        self.store_statements
            .get_or_create(&Statement { statement })
            .inc();
    }

    pub fn cache_lookup(&self, layer: &'static str, hit: bool) {
        match (layer, hit) {
            ("local", true) => self.hot.local_hit.inc(),
            ("local", false) => self.hot.local_miss.inc(),
            _ => {
                let result = if hit { "hit" } else { "miss" };
                (self.cache_lookups)
                    .get_or_create(&CacheLookup { layer, result })
                    .inc()
            }
        };
    }

    pub fn redis_fallback(&self, reason: &'static str) {
        self.redis_fallbacks.get_or_create(&Reason { reason }).inc();
    }

    pub fn claim_answered(&self, status: &'static str, took: std::time::Duration) {
        if status == "completed" {
            self.hot.completed.inc();
            self.hot.completed_seconds.observe(took.as_secs_f64());
            return;
        }
        self.claims.get_or_create(&Status { status }).inc();
        self.claim_seconds
            .get_or_create(&Status { status })
            .observe(took.as_secs_f64());
    }

    pub fn woken(&self, cause: &'static str) {
        self.waiter_wakeups.get_or_create(&Cause { cause }).inc();
    }

    pub fn key_event(&self, source: &'static str) {
        self.key_events.get_or_create(&Source { source }).inc();
    }

    /// What the lease watch counted (all tenants): how many keys of a kind
    /// and how old the oldest is, in whole seconds.
    pub fn stuck(&self, kind: &'static str, count: i64, oldest_age_seconds: i64) {
        self.stuck_keys.get_or_create(&Kind { kind }).set(count);
        self.stuck_oldest_age_seconds
            .get_or_create(&Kind { kind })
            .set(oldest_age_seconds);
    }

    pub fn webhook_delivery(&self, result: &'static str) {
        self.webhook_deliveries
            .get_or_create(&DeliveryResult { result })
            .inc();
    }

    /// Counts a waiting claim until the guard is dropped.
    pub fn archive_read(&self, status: &'static str) {
        self.archive_reads.get_or_create(&Status { status }).inc();
    }

    /// One pass of a background worker, and how long it took.
    pub fn worker_pass(&self, worker: &'static str, ok: bool, took: std::time::Duration) {
        let result = if ok { "ok" } else { "failed" };
        (self.worker_passes)
            .get_or_create(&WorkerPass { worker, result })
            .inc();
        (self.worker_pass_seconds)
            .get_or_create(&Worker { worker })
            .observe(took.as_secs_f64());
    }

    pub fn waiting(&self) -> Waiting<'_> {
        self.claim_waiters.inc();
        Waiting(self)
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

pub struct Waiting<'a>(&'a Metrics);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.claim_waiters.dec();
    }
}

/// 250 µs to about 4 s, doubling: the same scale as the dashboard's latency.
fn claim_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_25, 2.0, 15))
}

/// 1 ms to about 65 s, quadrupling: a pass is a few statements or a
/// whole backlog.
fn worker_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 4.0, 9))
}

#[cfg(test)]
mod tests;
