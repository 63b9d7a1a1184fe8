//! Per-tenant quotas on the claim path: this node's *standing* — which
//! tenants are refused new keys — kept in memory and refreshed on a timer.
//!
//! - **No query per claim.** A claim asks [`Quotas::refuses`], a lookup in
//!   a map of the tenants that reached a limit (and, while no tenant has,
//!   one atomic load). The map is rebuilt by [`Engine::quota_pass`], which
//!   the workers run every `IDEMKEY_WORKER_INTERVAL` on every node; the
//!   measurement itself (a scan) runs only on nodes with workers.
//! - **Only a new key is refused.** A claim of a tenant in the map does not
//!   try the insert: it reads the key, and only when there is no record (or
//!   only one past its window, which a claim would renew) is it refused
//!   with [`Refusal::QuotaExceeded`]. A replay, a takeover, an answer of
//!   `in_progress`, `key_reused` or `quarantined`, and every owner's call
//!   go on as ever: their effect may already have happened.
//! - **Soft, and never a reason to refuse wrongly for long.** The figures
//!   are as of the last measurement, so a tenant may pass its limit by what
//!   it stores within one interval, and a tenant back under its limit is
//!   let in again after the next measurement and refresh. A refresh that
//!   fails keeps the previous standing (logged by the worker).
//! - **Off by default.** With no default limit and no override row, the
//!   pass reads the (empty) override table and nothing else.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};

use super::refusal::Refusal;
use super::Engine;
use crate::domain::quota::{refuses, Exceeded, Limit, Limits, Stored};
use crate::domain::TenantId;

/// This node's quota standing.
#[derive(Debug, Default)]
pub struct Quotas {
    /// The server's defaults (`IDEMKEY_QUOTA_MAX_KEYS`,
    /// `IDEMKEY_QUOTA_MAX_OUTCOME_BYTES`).
    defaults: Limits,
    /// Whether any tenant is refused: the claim path's only cost while none is.
    any: AtomicBool,
    /// The tenants refused new keys, and why.
    refused: RwLock<Arc<HashMap<TenantId, Exceeded>>>,
}

/// One tenant's quota and storage, for the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaUsage {
    pub limits: Limits,
    /// What it stores, as last measured (`None`: never measured).
    pub stored: Option<Stored>,
    pub measured_at: Option<DateTime<Utc>>,
    /// Whether this node refuses the tenant new keys now.
    pub refused: bool,
}

impl Quotas {
    pub fn new(defaults: Limits) -> Self {
        Self {
            defaults,
            ..Self::default()
        }
    }

    /// Why `tenant` may not create a new key, if it may not.
    pub fn refuses(&self, tenant: &TenantId) -> Option<Exceeded> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let refused = self.refused.read().unwrap_or_else(|e| e.into_inner());
        refused.get(tenant).copied()
    }

    fn replace(&self, refused: HashMap<TenantId, Exceeded>) {
        let any = !refused.is_empty();
        *self.refused.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(refused);
        self.any.store(any, Ordering::Release);
    }
}

impl Engine {
    /// One quota pass: when any limit is configured, measure every
    /// tenant's storage (if `measure`: nodes running the workers) and
    /// rebuild this node's standing from the stored figures.
    pub async fn quota_pass(&self, measure: bool) -> anyhow::Result<()> {
        let defaults = self.quotas.defaults;
        let overrides = self.store.all_quotas().await?;
        let limits: HashMap<TenantId, Limits> = overrides
            .into_iter()
            .map(|q| {
                let l = Limits::resolve(defaults, q.max_keys, q.max_outcome_bytes);
                (q.tenant, l)
            })
            .collect();
        if defaults.is_unlimited() && limits.values().all(Limits::is_unlimited) {
            self.quotas.replace(HashMap::new());
            return Ok(());
        }
        if measure {
            self.store.measure_storage().await?;
        }
        let mut stored: HashMap<TenantId, Stored> = (self.store.all_storage().await?)
            .into_iter()
            .map(|s| (s.tenant, s.stored))
            .collect();
        // A tenant with a limit and nothing stored yet (a limit of 0).
        for tenant in limits.keys() {
            stored.entry(tenant.clone()).or_default();
        }
        let refused = stored
            .into_iter()
            .filter_map(|(tenant, s)| {
                let l = limits.get(&tenant).copied().unwrap_or(defaults);
                refuses(&s, &l).map(|e| (tenant, e))
            })
            .collect::<HashMap<_, _>>();
        if !refused.is_empty() {
            tracing::info!(
                tenants = refused.len(),
                "tenants over quota: new keys refused"
            );
        }
        self.quotas.replace(refused);
        Ok(())
    }

    /// `tenant`'s limits and storage as last measured (the dashboard's).
    pub async fn quota_usage(&self, tenant: &TenantId) -> Result<QuotaUsage, Refusal> {
        let over = self.store.quota_of(tenant).await?;
        let (keys, bytes) = over.map_or((Limit::Default, Limit::Default), |q| {
            (q.max_keys, q.max_outcome_bytes)
        });
        let storage = self.store.storage_of(tenant).await?;
        Ok(QuotaUsage {
            limits: Limits::resolve(self.quotas.defaults, keys, bytes),
            stored: storage.as_ref().map(|s| s.stored),
            measured_at: storage.map(|s| s.measured_at),
            refused: self.quotas.refuses(tenant).is_some(),
        })
    }
}
