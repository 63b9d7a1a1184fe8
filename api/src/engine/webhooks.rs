//! Webhook endpoints: the admin's calls that add, list and remove them, and
//! what the dashboard reads of their deliveries. Finding events and
//! delivering them is the webhook worker's (`workers::webhooks`), never a
//! claim's.
//!
//! A new endpoint's secret comes from the operating system's random source
//! through `rand`, and is answered once: every later read leaves it out.

use super::{Engine, Refusal};
use crate::domain::webhook::signature::{WebhookSecret, SECRET_BYTES};
use crate::domain::webhook::{EndpointSpec, MAX_ENDPOINTS_PER_CLASS};
use crate::domain::{OperationName, TenantId};
use crate::store::{Delivery, DeliveryCounts, NewEndpoint, StoredEndpoint};

/// What adding an endpoint did.
#[derive(Debug)]
pub enum NewWebhook {
    /// Added; `secret` is shown this once.
    Created {
        endpoint: Box<StoredEndpoint>,
        secret: String,
    },
    /// The class already has [`MAX_ENDPOINTS_PER_CLASS`] endpoints.
    ClassFull,
}

impl Engine {
    /// Adds an endpoint for the tenant's class `op`.
    pub async fn create_webhook(
        &self,
        tenant: &TenantId,
        op: &OperationName,
        spec: &EndpointSpec,
    ) -> Result<NewWebhook, Refusal> {
        let id = format!("wh_{}", hex::encode(rand::random::<[u8; 10]>()));
        let secret = WebhookSecret::from_bytes(rand::random::<[u8; SECRET_BYTES]>()).expose();
        let row = NewEndpoint {
            id: &id,
            operation: op,
            url: &spec.url,
            secret: &secret,
            events: &spec.events,
            stuck_after: spec.stuck_after,
            spike: spec.spike,
        };
        if !self
            .store
            .insert_endpoint(tenant, &row, MAX_ENDPOINTS_PER_CLASS)
            .await?
        {
            return Ok(NewWebhook::ClassFull);
        }
        let endpoint = self
            .store
            .endpoint(tenant, &id)
            .await?
            .ok_or(Refusal::Unavailable)?;
        Ok(NewWebhook::Created {
            endpoint: Box::new(endpoint),
            secret,
        })
    }

    /// The tenant's endpoints, of one class or of all.
    pub async fn webhooks(
        &self,
        tenant: &TenantId,
        op: Option<&OperationName>,
    ) -> Result<Vec<StoredEndpoint>, Refusal> {
        Ok(self.store.endpoints(tenant, op).await?)
    }

    /// The tenant's endpoint `id`, whatever its class.
    pub async fn webhook_by_id(
        &self,
        tenant: &TenantId,
        id: &str,
    ) -> Result<Option<StoredEndpoint>, Refusal> {
        Ok(self.store.endpoint(tenant, id).await?)
    }

    /// The tenant's endpoint `id` of class `op`, if there is one.
    pub async fn webhook(
        &self,
        tenant: &TenantId,
        op: &OperationName,
        id: &str,
    ) -> Result<Option<StoredEndpoint>, Refusal> {
        let found = self.store.endpoint(tenant, id).await?;
        Ok(found.filter(|e| &e.operation == op))
    }

    /// Removes the endpoint `id` of class `op` and its deliveries; false
    /// when the tenant has no such endpoint.
    pub async fn delete_webhook(
        &self,
        tenant: &TenantId,
        op: &OperationName,
        id: &str,
    ) -> Result<bool, Refusal> {
        if self.webhook(tenant, op, id).await?.is_none() {
            return Ok(false);
        }
        Ok(self.store.delete_endpoint(tenant, id).await?)
    }

    /// Deliveries per endpoint and state, for the tenant.
    pub async fn webhook_counts(&self, tenant: &TenantId) -> Result<Vec<DeliveryCounts>, Refusal> {
        Ok(self.store.delivery_counts(tenant).await?)
    }

    /// The newest `limit` deliveries of the tenant's endpoint `id`.
    pub async fn webhook_deliveries(
        &self,
        tenant: &TenantId,
        id: &str,
        limit: u32,
    ) -> Result<Vec<Delivery>, Refusal> {
        Ok(self.store.deliveries(tenant, id, limit).await?)
    }
}
