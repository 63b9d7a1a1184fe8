//! Failing fast while the database is away.
//!
//! Without this, every request that reaches a dead Postgres waits the pool's
//! whole acquire timeout (sqlx retries the connection until then) before its
//! 503, and requests pile up behind it. The breaker counts consecutive
//! *connection* failures (a statement the database refused for its own
//! reasons is an answer, not a failure); after [`OPEN_AFTER`] of them it
//! opens, and every call is refused at once — `unavailable`, retryable,
//! never "not found" — for [`OPEN_FOR`]. Then one call goes through as a
//! probe: if it reaches the database the breaker closes, otherwise it opens
//! again. So recovery follows the database by at most [`OPEN_FOR`].

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{StoreError, StoreResult};

/// Consecutive connection failures that open the breaker.
pub const OPEN_AFTER: u32 = 3;

/// How long an open breaker refuses calls before it lets a probe through.
pub const OPEN_FOR: Duration = Duration::from_millis(250);

/// A probe that has not reported by then (its request was dropped, say) no
/// longer holds the others back: the next call probes instead. Longer than
/// the pool's acquire timeout.
const PROBE_FOR: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub struct Breaker {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
enum State {
    #[default]
    Closed,
    /// Counting failures in a row.
    Failing(u32),
    /// Refusing calls until the instant; then the next call probes.
    Open(Instant),
    /// One call has been probing since the instant; the others are refused.
    Probing(Instant),
}

impl Breaker {
    /// Runs `call` unless the breaker refuses it, and learns from its result.
    pub async fn guard<T>(&self, call: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        self.admit()?;
        let result = call.await;
        self.learn(result.as_ref().err());
        result
    }

    /// Whether calls are being refused right now.
    pub fn is_open(&self) -> bool {
        match *self.lock() {
            State::Open(until) => Instant::now() < until,
            State::Probing(since) => since.elapsed() < PROBE_FOR,
            State::Closed | State::Failing(_) => false,
        }
    }

    fn admit(&self) -> StoreResult<()> {
        let mut state = self.lock();
        match *state {
            State::Closed | State::Failing(_) => Ok(()),
            State::Open(until) if Instant::now() >= until => {
                *state = State::Probing(Instant::now());
                Ok(())
            }
            State::Probing(since) if since.elapsed() >= PROBE_FOR => {
                *state = State::Probing(Instant::now());
                Ok(())
            }
            State::Open(_) | State::Probing(_) => Err(StoreError::Unreachable),
        }
    }

    fn learn(&self, error: Option<&StoreError>) {
        let mut state = self.lock();
        let failed = error.is_some_and(StoreError::is_connection);
        let next = match (&*state, failed) {
            (_, false) => State::Closed,
            (State::Closed, true) => State::Failing(1),
            (State::Failing(n), true) if n + 1 < OPEN_AFTER => State::Failing(n + 1),
            (State::Failing(_) | State::Probing(_), true) => State::Open(Instant::now() + OPEN_FOR),
            // A call admitted before the breaker opened: it stays open.
            (State::Open(until), true) => State::Open(*until),
        };
        match (&*state, &next) {
            (State::Open(_) | State::Probing(_), State::Closed) => {
                tracing::warn!("the database answers again; calls go through");
            }
            (State::Failing(_), State::Open(_)) => tracing::warn!(
                "{OPEN_AFTER} database connection failures in a row; \
                 refusing calls at once for {OPEN_FOR:?} at a time"
            ),
            _ => {}
        }
        *state = next;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl StoreError {
    /// The database could not be reached (as opposed to answering with an
    /// error of its own).
    pub fn is_connection(&self) -> bool {
        match self {
            StoreError::Unreachable => true,
            // Connection exceptions (class 08) and the server going away
            // (57P01-57P03: shutdown, crash, not accepting connections yet)
            // arrive as database errors, but they say the same thing.
            StoreError::Unavailable(sqlx::Error::Database(e)) => e
                .code()
                .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
            StoreError::Unavailable(e) => matches!(
                e,
                sqlx::Error::PoolTimedOut
                    | sqlx::Error::PoolClosed
                    | sqlx::Error::Io(_)
                    | sqlx::Error::Tls(_)
                    | sqlx::Error::WorkerCrashed
                    | sqlx::Error::Protocol(_)
            ),
            StoreError::Corrupt(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused() -> StoreResult<()> {
        Err(StoreError::Unavailable(sqlx::Error::PoolTimedOut))
    }

    #[tokio::test]
    async fn opens_after_consecutive_connection_failures_and_refuses_at_once() {
        let b = Breaker::default();
        for _ in 0..OPEN_AFTER {
            assert!(b.guard(async { refused() }).await.is_err());
        }
        assert!(b.is_open());
        let mut ran = false;
        let answer = b
            .guard(async {
                ran = true;
                Ok(())
            })
            .await;
        assert!(matches!(answer, Err(StoreError::Unreachable)));
        assert!(!ran, "an open breaker does not call the database");
    }

    #[tokio::test]
    async fn a_success_in_between_resets_the_count() {
        let b = Breaker::default();
        for _ in 0..OPEN_AFTER - 1 {
            let _ = b.guard(async { refused() }).await;
        }
        b.guard(async { Ok(()) }).await.unwrap();
        for _ in 0..OPEN_AFTER - 1 {
            let _ = b.guard(async { refused() }).await;
        }
        assert!(!b.is_open());
    }

    #[tokio::test]
    async fn an_error_the_database_answered_with_is_not_a_connection_failure() {
        let b = Breaker::default();
        for _ in 0..OPEN_AFTER + 2 {
            let answered = Err::<(), _>(StoreError::Unavailable(sqlx::Error::RowNotFound));
            let _ = b.guard(async { answered }).await;
        }
        assert!(!b.is_open());
    }

    #[tokio::test]
    async fn after_the_open_period_one_probe_closes_it_or_opens_it_again() {
        let b = Breaker::default();
        for _ in 0..OPEN_AFTER {
            let _ = b.guard(async { refused() }).await;
        }
        // The period is over: the next call probes, and fails.
        *b.lock() = State::Open(Instant::now());
        assert!(b.guard(async { refused() }).await.is_err());
        assert!(b.is_open(), "a failed probe opens it again");
        *b.lock() = State::Open(Instant::now());
        b.guard(async { Ok(()) }).await.unwrap();
        assert!(!b.is_open(), "a probe that reaches the database closes it");
        b.guard(async { Ok(()) }).await.unwrap();
    }
}
