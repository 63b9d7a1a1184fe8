//! Wake-ups for waiting claims, keyed by the scoped key's digest.
//!
//! A claim that will wait (`wait_ms`) subscribes *before* it reads the key,
//! so a change that lands between its read and its wait still wakes it: a
//! `watch` receiver remembers that something was sent since it last looked.
//! The value sent is the moment of the change, so the woken claim can insist
//! on a look that started after it (see `flight`).
//! Publishers are this node's own owner calls (at once) and, on Postgres,
//! the key-event listener (for changes made by other nodes).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio::time::Instant;

use crate::domain::KeyHash;

#[derive(Default)]
pub struct KeyEvents {
    slots: Mutex<HashMap<KeyHash, watch::Sender<Instant>>>,
}

/// One waiter's interest in one key; dropping it unsubscribes.
pub struct Subscription {
    events: Arc<KeyEvents>,
    hash: KeyHash,
    rx: Option<watch::Receiver<Instant>>,
    since: Instant,
}

impl KeyEvents {
    fn slots(&self) -> MutexGuard<'_, HashMap<KeyHash, watch::Sender<Instant>>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn subscribe(self: &Arc<Self>, hash: KeyHash) -> Subscription {
        let rx = self
            .slots()
            .entry(hash)
            .or_insert_with(|| watch::channel(Instant::now()).0)
            .subscribe();
        Subscription {
            events: self.clone(),
            hash,
            rx: Some(rx),
            since: Instant::now(),
        }
    }

    /// Wakes every claim waiting on `hash`.
    pub fn publish(&self, hash: KeyHash) {
        if let Some(tx) = self.slots().get(&hash) {
            tx.send_replace(Instant::now());
        }
    }

    /// Wakes every waiting claim (after events may have been lost).
    pub fn publish_all(&self) {
        let now = Instant::now();
        for tx in self.slots().values() {
            tx.send_replace(now);
        }
    }

    /// Keys with at least one waiter.
    #[cfg(test)]
    pub fn watched(&self) -> usize {
        self.slots().len()
    }
}

impl Subscription {
    /// Resolves once the key changed since the last call (or since the
    /// subscription, the first time).
    pub async fn changed(&mut self) {
        if let Some(rx) = self.rx.as_mut() {
            // The sender lives as long as any subscription to its key.
            if rx.changed().await.is_ok() {
                self.since = self.since.max(*rx.borrow_and_update());
            }
        }
    }

    /// The latest change this subscription knows of (at first, the moment
    /// it subscribed): a look that started before it may have missed it.
    pub fn since(&self) -> Instant {
        self.since
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut slots = self.events.slots();
        drop(self.rx.take());
        if slots
            .get(&self.hash)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            slots.remove(&self.hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn h(n: u8) -> KeyHash {
        KeyHash([n; 16])
    }

    #[tokio::test]
    async fn a_change_between_subscribing_and_waiting_is_not_lost() {
        let events = Arc::new(KeyEvents::default());
        let mut sub = events.subscribe(h(1));
        events.publish(h(1));
        tokio::time::timeout(Duration::from_secs(5), sub.changed())
            .await
            .expect("woken");
    }

    #[tokio::test]
    async fn other_keys_do_not_wake_a_waiter() {
        let events = Arc::new(KeyEvents::default());
        let mut sub = events.subscribe(h(1));
        events.publish(h(2));
        let woken = tokio::time::timeout(Duration::from_millis(50), sub.changed()).await;
        assert!(woken.is_err());
        events.publish_all();
        tokio::time::timeout(Duration::from_secs(5), sub.changed())
            .await
            .expect("woken by publish_all");
    }

    #[test]
    fn the_last_subscription_removes_its_slot() {
        let events = Arc::new(KeyEvents::default());
        let a = events.subscribe(h(1));
        let b = events.subscribe(h(1));
        assert_eq!(events.watched(), 1);
        drop(a);
        assert_eq!(events.watched(), 1);
        drop(b);
        assert_eq!(events.watched(), 0);
    }
}
