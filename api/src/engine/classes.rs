//! Operation classes: the policy a claim works under, and the admin's calls
//! that set and reset it.
//!
//! A class without a stored policy uses [`Policy::default`]. A stored policy
//! is complete (every field resolved when it was set), so changing the
//! built-in defaults later never changes a class an admin has set.
//!
//! If the store cannot answer, neither can we: a claim never falls back to
//! the defaults on an error (their window could be shorter than the class's),
//! it answers 503 like any other store failure.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::Engine;
use super::Refusal;
use crate::domain::{OperationName, Policy, TenantId};
use crate::store::{StoreError, StoredClass};

/// A class's policy as an admin sees it.
#[derive(Debug, Clone)]
pub struct OperationClass {
    pub policy: Arc<Policy>,
    /// True when nothing is stored for the class: it uses the defaults.
    pub is_default: bool,
    pub updated_at: Option<DateTime<Utc>>,
}

impl OperationClass {
    fn default_policy() -> Self {
        Self {
            policy: Arc::new(Policy::default()),
            is_default: true,
            updated_at: None,
        }
    }

    fn stored(class: StoredClass) -> Result<Self, StoreError> {
        // The API wrote this text after the same checks; failing them now
        // means the row was damaged (or a ceiling was lowered without a
        // migration). Answer 503 rather than guess a policy.
        let policy = Policy::from_json(class.policy_json.as_bytes())
            .map_err(|e| StoreError::Corrupt(format!("operation_class.policy: {e}")))?;
        Ok(Self {
            policy: Arc::new(policy),
            is_default: false,
            updated_at: Some(class.updated_at),
        })
    }
}

impl Engine {
    /// The policy a claim (or an owner's call) of this class works under,
    /// through the per-node cache (see `policy_cache` for its staleness
    /// bound).
    pub async fn policy(&self, t: &TenantId, op: &OperationName) -> Result<Arc<Policy>, Refusal> {
        if let Some(policy) = self.policies.get(t, op) {
            return Ok(policy);
        }
        let ticket = self.policies.ticket();
        let class = self.operation_class(t, op).await?;
        self.policies.insert(ticket, t, op, class.policy.clone());
        Ok(class.policy)
    }

    /// The class's policy read from the store, bypassing the cache.
    #[tracing::instrument(skip_all, fields(tenant = %t, operation = %op))]
    pub async fn operation_class(
        &self,
        t: &TenantId,
        op: &OperationName,
    ) -> Result<OperationClass, Refusal> {
        match self.store.find_class(t, op).await? {
            Some(stored) => Ok(OperationClass::stored(stored)?),
            None => Ok(OperationClass::default_policy()),
        }
    }

    /// Every class of the tenant with a stored policy, by name, read from
    /// the store (the dashboard lists them beside the classes in use).
    #[tracing::instrument(skip_all, fields(tenant = %t))]
    pub async fn stored_operation_classes(
        &self,
        t: &TenantId,
    ) -> Result<Vec<(OperationName, OperationClass)>, Refusal> {
        let mut classes = Vec::new();
        for (name, stored) in self.store.list_classes(t).await? {
            let op = OperationName::parse(&name)
                .map_err(|_| StoreError::Corrupt(format!("operation_class.operation {name:?}")))?;
            classes.push((op, OperationClass::stored(stored)?));
        }
        Ok(classes)
    }

    /// Sets the whole policy of a class. Records already written keep their
    /// window and tiering time; only new records use the new policy.
    #[tracing::instrument(skip_all, fields(tenant = %t, operation = %op))]
    pub async fn set_operation_class(
        &self,
        t: &TenantId,
        op: &OperationName,
        policy: &Policy,
    ) -> Result<OperationClass, Refusal> {
        self.remember_rules(&policy.fingerprint).await?;
        let stored = self.store.put_class(t, op, &policy.to_json()).await;
        self.policies.evict(t, op);
        Ok(OperationClass::stored(stored?)?)
    }

    /// Returns a class to the defaults (whether or not it had a policy).
    #[tracing::instrument(skip_all, fields(tenant = %t, operation = %op))]
    pub async fn reset_operation_class(
        &self,
        t: &TenantId,
        op: &OperationName,
    ) -> Result<OperationClass, Refusal> {
        let deleted = self.store.delete_class(t, op).await;
        self.policies.evict(t, op);
        deleted?;
        Ok(OperationClass::default_policy())
    }
}
