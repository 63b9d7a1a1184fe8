//! Claim: take ownership of a key, or learn what became of it.

use std::time::Duration;

use tokio::time::Instant;

use super::Engine;
use crate::domain::{decide, Decision, Fingerprint, OwnerToken, Policy, ScopedKey};
use crate::error::ApiError;
use crate::store::{KeyRecord, NewClaim};

/// How often a contended claim re-runs its statements before giving up with
/// a retryable error. Each retry follows a row change by somebody else, so
/// running out means the key is being churned, not that we raced once.
const MAX_RACES: usize = 8;

pub struct ClaimRequest {
    pub fingerprint: Fingerprint,
    pub lease_ms: Option<u64>,
    pub wait_ms: Option<u64>,
}

pub enum ClaimAnswer {
    /// A new key (or one past its window): this attempt owns it.
    Claimed {
        record: KeyRecord,
        token: OwnerToken,
    },
    /// The previous owner's lease ran out: this attempt took over.
    Recovering {
        record: KeyRecord,
        token: OwnerToken,
        previous: Box<KeyRecord>,
    },
    /// Completed earlier: replay.
    Completed { record: KeyRecord },
}

impl Engine {
    #[tracing::instrument(skip_all, fields(tenant = %k.tenant, operation = %k.operation))]
    pub async fn claim(
        &self,
        k: &ScopedKey,
        policy: &Policy,
        req: &ClaimRequest,
    ) -> Result<ClaimAnswer, ApiError> {
        let lease = policy.lease_for(req.lease_ms).map_err(|e| {
            ApiError::bad_request(
                "invalid_lease",
                format!("lease_ms must be 1000-{}", e.max_ms),
            )
        })?;
        let deadline = Instant::now() + policy.wait_for(req.wait_ms);
        let token = OwnerToken::generate();
        let claim = NewClaim {
            fingerprint: req.fingerprint,
            owner: token.hash(),
            lease,
            replay_window: policy.replay_window,
            tier_after: policy.tier_after(),
        };
        let mut poll = Duration::from_millis(10);
        let mut races = 0;
        while races < MAX_RACES {
            if let Some(record) = self.store.insert_claim(k, &claim).await? {
                return Ok(ClaimAnswer::Claimed { record, token });
            }
            // Someone holds the key. Read it as its own statement (never in
            // the same statement as the insert: under concurrency that read
            // can miss the winner's row).
            let Some(seen) = self.store.find(k).await? else {
                races += 1; // released in between: try to insert again
                continue;
            };
            match decide(&seen.seen(), &req.fingerprint, policy.on_lease_expiry) {
                Decision::Renew => {
                    if let Some(record) = self.store.renew_expired(k, &claim).await? {
                        return Ok(ClaimAnswer::Claimed { record, token });
                    }
                }
                Decision::KeyReused => return Err(ApiError::KeyReused),
                Decision::Replay => return Ok(ClaimAnswer::Completed { record: seen }),
                Decision::Quarantined => return Err(ApiError::Quarantined),
                Decision::TakeOver => {
                    let taken = self
                        .store
                        .take_over(k, seen.attempt, claim.owner, lease)
                        .await?;
                    if let Some(record) = taken {
                        return Ok(ClaimAnswer::Recovering {
                            record,
                            token,
                            previous: Box::new(seen),
                        });
                    }
                }
                Decision::Quarantine => {
                    if self
                        .store
                        .quarantine_expired(k, seen.attempt)
                        .await?
                        .is_some()
                    {
                        return Err(ApiError::Quarantined);
                    }
                }
                Decision::InProgress { retry_after } => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(in_progress(&seen, retry_after));
                    }
                    // Bounded wait: look again shortly, never past the caller's
                    // deadline. Waiting does not count as a race.
                    tokio::time::sleep(poll.min(deadline - now)).await;
                    poll = (poll * 2).min(Duration::from_millis(200));
                    continue;
                }
            }
            races += 1;
        }
        tracing::warn!("claim kept losing races; answering unavailable");
        Err(ApiError::Unavailable)
    }
}

fn in_progress(seen: &KeyRecord, retry_after: Duration) -> ApiError {
    let mut extra = serde_json::Map::new();
    extra.insert("attempt".into(), seen.attempt.into());
    extra.insert(
        "lease_expires_at".into(),
        crate::routes::view::rfc3339(seen.lease_expires_at).into(),
    );
    extra.insert(
        "expires_at".into(),
        crate::routes::view::rfc3339(seen.expires_at).into(),
    );
    ApiError::InProgress { retry_after, extra }
}
