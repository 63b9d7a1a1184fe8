//! The most claimed keys of one class in one minute, in bounded memory:
//! the Space-Saving heavy-hitters summary (Metwally, Agrawal and El Abbadi,
//! 2005). It keeps at most `capacity` counters however many distinct keys
//! arrive. A key it holds is counted exactly from the moment it was taken
//! in; a new key arriving when the summary is full takes over the smallest
//! counter and inherits its count as the key's possible overcount
//! (`error`). So `count - error` is a floor of the key's real claims and
//! `count` a ceiling, and any key claimed more than `total / capacity`
//! times is certain to be held.
//!
//! Pure: no clock, no I/O. The usage roll-up keeps one summary per tenant,
//! class and minute, and writes the top few of each on every flush.

use std::collections::HashMap;

/// Counters kept per summary. Memory is bounded by this many keys (each at
/// most 255 bytes) whatever the key cardinality.
pub const CAPACITY: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counter {
    count: u64,
    /// How much of `count` may belong to keys this counter held before.
    error: u64,
}

/// One key's standing in a summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopKey {
    pub key: String,
    /// At least this many claims are certainly this key's.
    pub at_least: u64,
    /// At most this many.
    pub at_most: u64,
}

#[derive(Debug, Clone)]
pub struct TopKeys {
    capacity: usize,
    counters: HashMap<String, Counter>,
}

impl Default for TopKeys {
    fn default() -> Self {
        Self::new(CAPACITY)
    }
}

impl TopKeys {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            counters: HashMap::with_capacity(capacity),
        }
    }

    /// Counts one claim of `key`.
    pub fn offer(&mut self, key: &str) {
        if let Some(c) = self.counters.get_mut(key) {
            c.count += 1;
            return;
        }
        if self.counters.len() < self.capacity {
            self.counters
                .insert(key.to_owned(), Counter { count: 1, error: 0 });
            return;
        }
        // Full: the new key takes the smallest counter over. An O(capacity)
        // scan, only for a key not already held.
        let smallest = self
            .counters
            .iter()
            .min_by_key(|(_, c)| c.count)
            .map(|(k, c)| (k.clone(), c.count));
        if let Some((evicted, min)) = smallest {
            self.counters.remove(&evicted);
            self.counters.insert(
                key.to_owned(),
                Counter {
                    count: min + 1,
                    error: min,
                },
            );
        }
    }

    /// How many keys are held (at most the capacity).
    pub fn len(&self) -> usize {
        self.counters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The `n` keys with the most certain claims, at least `min_claims`
    /// each, most first (ties by key, so the order is stable).
    pub fn top(&self, n: usize, min_claims: u64) -> Vec<TopKey> {
        let mut held: Vec<TopKey> = self
            .counters
            .iter()
            .map(|(key, c)| TopKey {
                key: key.clone(),
                at_least: c.count - c.error,
                at_most: c.count,
            })
            .filter(|t| t.at_least >= min_claims)
            .collect();
        held.sort_by(|a, b| b.at_least.cmp(&a.at_least).then_with(|| a.key.cmp(&b.key)));
        held.truncate(n);
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_within_capacity_are_counted_exactly() {
        let mut top = TopKeys::new(4);
        for (key, n) in [("a", 5), ("b", 3), ("c", 1)] {
            (0..n).for_each(|_| top.offer(key));
        }

        let got = top.top(10, 1);

        let exact = |key: &str, n| TopKey {
            key: key.into(),
            at_least: n,
            at_most: n,
        };
        assert_eq!(got, vec![exact("a", 5), exact("b", 3), exact("c", 1)]);
        assert_eq!(top.top(10, 2).len(), 2, "c was claimed once");
        assert_eq!(top.top(1, 1), vec![exact("a", 5)]);
    }

    #[test]
    fn a_storm_of_one_key_among_a_million_distinct_keys_stays_on_top_in_bounded_memory() {
        let mut top = TopKeys::default();
        let mut longest = 0;
        for i in 0..1_000_000u32 {
            let key = format!("distinct-{i:07}-{}", "x".repeat(40));
            longest = longest.max(key.len());
            top.offer(&key);
            // A storm: one claim in twenty (above 1 / CAPACITY, the share
            // Space-Saving guarantees to hold).
            if i % 20 == 0 {
                top.offer("the-storm");
            }
            assert!(top.len() <= CAPACITY);
        }

        let first = &top.top(1, 1)[0];

        println!(
            "1,000,000 distinct keys + 50,000 claims of one: {} counters held \
             (≤ {} bytes of keys), the storm counted {}..={}",
            top.len(),
            top.len() * longest,
            first.at_least,
            first.at_most
        );
        assert_eq!(first.key, "the-storm");
        assert!(first.at_most >= 50_000, "a ceiling never undercounts");
        assert!(first.at_least <= 50_000, "a floor never overcounts");
        assert!(first.at_least > 0);
        assert_eq!(top.len(), CAPACITY);
    }

    #[test]
    fn every_key_claimed_more_than_total_over_capacity_is_held() {
        // Three heavy keys in a stream of 3,000 one-off keys, capacity 16:
        // each heavy key (400 claims) is above 4,200 / 16 and must be held.
        let mut top = TopKeys::new(16);
        for i in 0..3_000 {
            top.offer(&format!("once-{i}"));
            if i % 8 == 0 {
                ["h1", "h2", "h3"].iter().for_each(|k| top.offer(k));
            }
            if i % 8 == 4 {
                ["h1", "h2", "h3"].iter().for_each(|k| top.offer(k));
            }
        }

        let held: Vec<String> = top.top(3, 1).into_iter().map(|t| t.key).collect();

        assert_eq!(held, ["h1", "h2", "h3"]);
        for t in top.top(3, 1) {
            assert!(t.at_least <= 750 && t.at_most >= 750, "{t:?}");
        }
    }
}
