//! What the dashboard reads, through the engine rather than around it: the
//! tenant's usage series and live counts, and the effect ids it shows. Every
//! query is scoped to one tenant; a store failure is [`Refusal::Unavailable`]
//! like anywhere else.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Engine, Refusal};
use crate::domain::{OperationName, ScopedKey, TenantId};
use crate::store::{HotCount, HotKey, Rejection, UsageBucket};

impl Engine {
    /// The tenant's claims, replays and other counts per class, in buckets
    /// of `bucket` from `since` (buckets with nothing counted are absent).
    pub async fn usage_series(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        bucket: Duration,
    ) -> Result<Vec<UsageBucket>, Refusal> {
        Ok(self.store.usage_series(tenant, since, bucket).await?)
    }

    /// How many of the tenant's records are in each state, per class, with
    /// the oldest of each.
    pub async fn hot_counts(&self, tenant: &TenantId) -> Result<Vec<HotCount>, Refusal> {
        Ok(self.store.hot_counts(tenant).await?)
    }

    /// Per class, the `per_class` keys of the tenant claimed most since
    /// `since`, as flushed by every node's usage roll-up.
    pub async fn hot_keys(
        &self,
        tenant: &TenantId,
        since: DateTime<Utc>,
        per_class: u32,
    ) -> Result<Vec<HotKey>, Refusal> {
        Ok(self.store.hot_keys(tenant, since, per_class).await?)
    }

    /// The tenant's newest `key_reused` refusals (of one class, or of all),
    /// newest first, as flushed by every node's usage roll-up.
    pub async fn recent_rejections(
        &self,
        tenant: &TenantId,
        operation: Option<&OperationName>,
        limit: u32,
    ) -> Result<Vec<Rejection>, Refusal> {
        Ok(self
            .store
            .recent_rejections(tenant, operation, limit)
            .await?)
    }

    /// The key's effect id, as every answer about it carries.
    pub fn effect_id(&self, k: &ScopedKey) -> String {
        self.secret.effect_id(k)
    }

    /// The effect id of one named step of the key.
    pub fn step_effect_id(&self, k: &ScopedKey, step: &str) -> String {
        self.secret.step_effect_id(k, step)
    }
}
