//! A worked example of idemkey's Rust client: a checkout that charges a card
//! and ships the parcel exactly once per checkout, however often the shopper
//! taps "pay", however many requests race, and whichever moment the process
//! dies at. The payment provider is a separate process with no idempotency
//! of its own (`fake-payments`); what makes the checkout safe is `once`
//! around the two steps, each step's effect id passed to the provider as its
//! reference, and a `reconcile` that looks those references up after a
//! crash. README.md walks through it.

pub mod crash;
pub mod pay;
pub mod payments;
