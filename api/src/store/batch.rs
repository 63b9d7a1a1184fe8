//! Gathering concurrent calls of one kind into one statement and one
//! commit.
//!
//! Every new key costs a claim and a completion, each a statement and a
//! commit of its own; under load most of a commit's cost is the same
//! whether it carries one row or thirty. So concurrent claims on one node
//! are run together (and so are concurrent completions), while each call
//! still learns its own fate from its own row: the primary key decides a
//! claim and the owner-token guard a completion, row by row, exactly as
//! when they run alone.
//!
//! There is no timer and no background task. A caller queues its item,
//! then either finds a free slot (at most [`Batcher::new`]'s `in_flight`
//! batches run at once) and takes everything queued, up to the bound, as
//! one batch, or waits while a batch runs and is picked up by the next. So
//! a lone call on an idle node goes at once, alone; under load a batch
//! forms while the previous ones are in flight. A batch runs in a task of
//! its own, so a caller that goes away (its client hung up) cannot cancel
//! a statement other callers wait on; every caller is answered only after
//! the batch's commit.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, Semaphore};

use super::{StoreError, StoreResult};

type Reply<O> = oneshot::Sender<StoreResult<O>>;

/// Calls of one kind waiting to run, and the slots for running them.
pub struct Batcher<I, O> {
    queue: Mutex<Vec<(I, Reply<O>)>>,
    slots: Arc<Semaphore>,
    max: usize,
    together: fn(&I, &I) -> bool,
    sizes: Mutex<Sizes>,
}

/// How many batches ran and how many items they carried.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    pub batches: u64,
    pub items: u64,
    pub largest: usize,
}

impl<I, O> std::fmt::Debug for Batcher<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("max", &self.max)
            .field(
                "sizes",
                &*self.sizes.lock().unwrap_or_else(|e| e.into_inner()),
            )
            .finish_non_exhaustive()
    }
}

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// At most `in_flight` batches at once, each of at most `max` items
    /// that `together` accepts beside the batch's first (the rest wait for
    /// a batch of their own).
    pub fn new(in_flight: usize, max: usize, together: fn(&I, &I) -> bool) -> Self {
        Self {
            queue: Mutex::new(Vec::new()),
            slots: Arc::new(Semaphore::new(in_flight.max(1))),
            max: max.max(1),
            together,
            sizes: Mutex::new(Sizes::default()),
        }
    }

    /// Runs `item` in a batch with whatever else is queued. `run` gets the
    /// batch in queue order and answers one result per item, in the same
    /// order; it is called by whichever caller takes the batch.
    pub async fn submit<F, Fut>(&self, item: I, run: F) -> StoreResult<O>
    where
        F: Fn(Vec<I>) -> Fut,
        Fut: Future<Output = Vec<StoreResult<O>>> + Send + 'static,
    {
        let (reply, mut answer) = oneshot::channel();
        self.lock_queue().push((item, reply));
        loop {
            tokio::select! {
                biased;
                answered = &mut answer => return answered.unwrap_or_else(|_| Err(gone())),
                slot = self.slots.clone().acquire_owned() => {
                    let slot = slot.expect("the batcher's semaphore is never closed");
                    let batch = self.take();
                    if batch.is_empty() {
                        // Another caller took this item: its batch answers.
                        drop(slot);
                        return answer.await.unwrap_or_else(|_| Err(gone()));
                    }
                    self.count(batch.len());
                    let (items, replies): (Vec<I>, Vec<Reply<O>>) = batch.into_iter().unzip();
                    let results = run(items);
                    tokio::spawn(async move {
                        let _slot = slot;
                        let mut results = results.await.into_iter();
                        for reply in replies {
                            let result = results.next().unwrap_or_else(|| Err(gone()));
                            // A caller that went away no longer listens.
                            let _ = reply.send(result);
                        }
                    });
                }
            }
        }
    }

    /// Batches run so far, for tests and the metrics.
    pub fn sizes(&self) -> Sizes {
        *self.sizes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The oldest queued item and, in queue order, as many of the others
    /// that go with it as fit.
    fn take(&self) -> Vec<(I, Reply<O>)> {
        let mut queue = self.lock_queue();
        if queue.is_empty() {
            return Vec::new();
        }
        let first = queue.remove(0);
        let mut batch = vec![first];
        let mut i = 0;
        while i < queue.len() && batch.len() < self.max {
            if (self.together)(&batch[0].0, &queue[i].0) {
                batch.push(queue.remove(i));
            } else {
                i += 1;
            }
        }
        batch
    }

    fn count(&self, n: usize) {
        let mut sizes = self.sizes.lock().unwrap_or_else(|e| e.into_inner());
        sizes.batches += 1;
        sizes.items += n as u64;
        sizes.largest = sizes.largest.max(n);
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<(I, Reply<O>)>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A batch that ended without answering an item (its task panicked, or
/// the runtime is shutting down): whether its statement committed is
/// unknown, so the answer is "could not answer", never a guess.
fn gone() -> StoreError {
    StoreError::Unavailable(sqlx::Error::WorkerCrashed)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_lone_call_goes_at_once_alone() {
        let b = Batcher::<u32, u32>::new(1, 8, |_, _| true);
        let out = b
            .submit(7, |items| async move {
                items.into_iter().map(|i| Ok(i * 2)).collect()
            })
            .await
            .unwrap();
        assert_eq!(out, 14);
        assert_eq!(
            b.sizes(),
            Sizes {
                batches: 1,
                items: 1,
                largest: 1
            }
        );
    }

    /// While one batch is held in flight, callers queue; each gets its own
    /// result when the next batch runs, and no batch exceeds the bound.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn callers_queued_behind_a_batch_run_together_and_get_their_own_results() {
        let b = Arc::new(Batcher::<u32, u32>::new(1, 16, |_, _| true));
        let (open, gate) = tokio::sync::watch::channel(false);
        let started = Arc::new(AtomicUsize::new(0));
        let run = {
            let started = started.clone();
            move |items: Vec<u32>| {
                let mut gate = gate.clone();
                started.fetch_add(1, Ordering::SeqCst);
                async move {
                    gate.wait_for(|open| *open).await.unwrap();
                    items.into_iter().map(|i| Ok(i + 1000)).collect()
                }
            }
        };
        let first = tokio::spawn({
            let (b, run) = (b.clone(), run.clone());
            async move { b.submit(0, run).await }
        });
        while started.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        let rest: Vec<_> = (1..=40)
            .map(|i| {
                let (b, run) = (b.clone(), run.clone());
                tokio::spawn(async move { (i, b.submit(i, run).await) })
            })
            .collect();
        while b.lock_queue().len() < 40 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        open.send(true).unwrap();
        assert_eq!(first.await.unwrap().unwrap(), 1000);
        for task in rest {
            let (i, out) = task.await.unwrap();
            assert_eq!(out.unwrap(), i + 1000);
        }
        let sizes = b.sizes();
        assert_eq!(sizes.items, 41);
        assert_eq!(sizes.largest, 16, "{sizes:?}");
        assert_eq!(sizes.batches, 1 + 3, "{sizes:?}");
    }

    #[tokio::test]
    async fn only_items_that_go_together_share_a_batch() {
        let b = Batcher::<u32, u32>::new(1, 8, |a, b| a % 2 == b % 2);
        for i in 0..6 {
            let (reply, _answer) = oneshot::channel();
            b.lock_queue().push((i, reply));
        }
        let taken: Vec<u32> = b.take().into_iter().map(|(i, _)| i).collect();
        assert_eq!(taken, [0, 2, 4]);
        let taken: Vec<u32> = b.take().into_iter().map(|(i, _)| i).collect();
        assert_eq!(taken, [1, 3, 5]);
    }

    #[tokio::test]
    async fn a_batch_that_answers_too_few_is_unavailable_for_the_rest() {
        let b = Batcher::<u32, u32>::new(1, 8, |_, _| true);
        let out = b.submit(1, |_| async move { Vec::new() }).await;
        assert!(matches!(out, Err(StoreError::Unavailable(_))));
    }
}
