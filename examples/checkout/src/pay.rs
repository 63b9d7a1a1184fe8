//! Paying for a checkout: charge, then ship, inside `once`.
//!
//! The checkout id is the idempotency key: the shopper's page made it once,
//! when the cart became a checkout, and sends it with every tap of "pay".
//! Each step passes its own effect id to the provider as the reference, and
//! is recorded on the key as soon as the provider confirms it, so:
//!
//! - a second tap while the first is running waits for it, then replays its
//!   outcome; a tap after it replays at once — the effect never runs twice;
//! - a process that dies after the charge leaves the key in progress; when
//!   its lease runs out the next tap takes over (`recovering`) and
//!   `reconcile` asks the provider about each reference first, so a charge
//!   that happened is found, not made again;
//! - a process that dies after recording the charge step resumes at the
//!   shipment: the recorded step is skipped.

use std::collections::BTreeMap;
use std::time::Duration;

use idemkey_client::{
    Client, EffectContext, EffectError, Error, Once, OnceResult, Outcome, Reconciliation, Steps,
};
use serde_json::{json, Value};

use crate::crash;
use crate::payments::Payments;

/// The operation class of a checkout's payment.
pub const OPERATION: &str = "checkout.pay";

/// What the shopper's tap sends.
#[derive(Debug, Clone)]
pub struct Order {
    /// The checkout id: the idempotency key.
    pub checkout: String,
    /// A decimal string, such as "25.00".
    pub amount: String,
    /// Such as "EUR".
    pub currency: String,
}

/// The checkout: an idemkey client and the provider.
#[derive(Clone)]
pub struct Checkout {
    /// The idemkey client.
    pub idemkey: Client,
    /// The payment provider.
    pub payments: Payments,
    /// The lease each attempt asks for; after a crash, the next attempt
    /// takes over once it has run out.
    pub lease: Duration,
}

fn outcome(order: &str, charge: &str, shipment: &str) -> Outcome {
    Outcome::new(201).body(json!({"checkout": order, "charge": charge, "shipment": shipment}))
}

impl Checkout {
    /// Pays for the order at most once, and answers the one outcome.
    pub async fn pay(&self, order: Order) -> Result<OnceResult, Error> {
        // What must not change between retries of the same checkout.
        let request: Value = json!({"amount": order.amount, "currency": order.currency});
        let once = Once::new(OPERATION, order.checkout.clone(), request)
            .lease(self.lease)
            .deadline(self.lease * 3 + Duration::from_secs(5));
        let (effect_order, reconcile_payments) = (order.clone(), self.payments.clone());
        self.idemkey
            .once(
                once,
                |ctx| self.charge_and_ship(ctx, effect_order),
                |effect_id, steps| reconcile(reconcile_payments, order.checkout, effect_id, steps),
            )
            .await
    }

    /// The effect: each step runs unless it is already recorded.
    async fn charge_and_ship(
        &self,
        ctx: EffectContext,
        order: Order,
    ) -> Result<Outcome, EffectError> {
        // Borrowed by the steps' futures, which `step` awaits in place.
        let (payments, order) = (&self.payments, &order);
        let charge = ctx
            .step("charge", |reference| async move {
                let id = payments
                    .charge(&reference, &order.checkout, &order.amount, &order.currency)
                    .await?;
                crash::point("after_charge");
                Ok(id)
            })
            .await?;
        crash::point("after_charge_step");
        let paid_by = charge.as_str();
        let shipment = ctx
            .step("ship", |reference| async move {
                payments.ship(&reference, &order.checkout, paid_by).await
            })
            .await?;
        Ok(outcome(&order.checkout, &charge, &shipment))
    }
}

/// On `recovering`: the previous attempt died. Ask the provider about each
/// step it did not record, by the step's reference; run only what is missing.
async fn reconcile(
    payments: Payments,
    checkout: String,
    effect_id: String,
    steps: Steps,
) -> Result<Reconciliation, EffectError> {
    let mut known: BTreeMap<String, String> = steps
        .iter()
        .map(|(name, s)| (name.clone(), s.provider_ref.clone()))
        .collect();
    let mut found = BTreeMap::new();
    if !known.contains_key("charge") {
        if let Some(id) = payments.find_charge(&format!("{effect_id}.charge")).await? {
            found.insert("charge".to_owned(), id);
        }
    }
    if !known.contains_key("ship") {
        if let Some(id) = payments.find_shipment(&format!("{effect_id}.ship")).await? {
            found.insert("ship".to_owned(), id);
        }
    }
    known.extend(found.clone());
    Ok(match (known.get("charge"), known.get("ship")) {
        (Some(charge), Some(ship)) => Reconciliation::Done(outcome(&checkout, charge, ship)),
        _ if found.is_empty() => Reconciliation::NothingDone,
        _ => Reconciliation::StepsDone(found),
    })
}
