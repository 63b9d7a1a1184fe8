//! The one way this crate keeps a bounded in-process map: quick_cache (see
//! `local` for why quick_cache and not moka). Time is never the cache's
//! business: each user keeps a deadline or a read time in its values and
//! checks it on every read, so an entry past it is a miss and stays only
//! until it is evicted or replaced.

use std::hash::Hash;

use quick_cache::sync::Cache;
use quick_cache::OptionsBuilder;

/// Shards of a [`bounded`] cache: a power of two, so that the bound, rounded
/// down to a multiple of it, splits evenly (quick_cache rounds each shard's
/// share up, which could let the whole exceed the bound).
const SHARDS: usize = 16;

/// A cache of at most `items` entries (exactly: `items` rounded down to a
/// multiple of [`SHARDS`], at least one per shard), evicting what is least
/// likely to be read again.
pub fn bounded<K: Eq + Hash, V: Clone>(items: usize) -> Cache<K, V> {
    let bound = (items / SHARDS * SHARDS).max(SHARDS);
    let options = OptionsBuilder::new()
        .shards(SHARDS)
        .estimated_items_capacity(bound)
        .weight_capacity(bound as u64)
        .build();
    match options {
        Ok(options) => Cache::with_options(
            options,
            Default::default(),
            Default::default(),
            Default::default(),
        ),
        // Not reached: every required option is set.
        Err(_) => Cache::new(bound),
    }
}

#[cfg(test)]
mod tests {
    use super::bounded;

    #[test]
    fn a_bounded_cache_never_holds_more_than_its_bound() {
        for items in [100, 10_000, 10_001, 50_000] {
            let cache = bounded::<usize, ()>(items);
            for i in 0..items * 2 {
                cache.insert(i, ());
            }
            assert!(cache.len() <= items, "{items}: {}", cache.len());
        }
    }
}
