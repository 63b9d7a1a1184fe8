//! A Rust client for idemkey: run an effect at most once per idempotency
//! key, however often a logical operation is retried (docs/protocol.md).
//!
//! ```no_run
//! use idemkey_client::{Client, EffectError, Once, Outcome, Reconciliation, new_key};
//! use serde_json::json;
//!
//! # async fn charge(_: &str) -> Result<String, std::io::Error> { Ok("ch_1".into()) }
//! # async fn find_charge(_: &str) -> Option<String> { None }
//! # async fn demo() -> Result<(), idemkey_client::Error> {
//! let client = Client::new("http://127.0.0.1:8080", "<token>")?;
//! // Made ONCE per logical operation and stored before the first attempt.
//! let key = new_key();
//! let result = client
//!     .once(
//!         Once::new("charges.create", key, json!({"amount": "25.00", "currency": "EUR"})),
//!         |ctx| async move {
//!             let id = charge(ctx.effect_id()).await?; // an error here is ambiguous
//!             Ok::<_, EffectError>(Outcome::new(201).body(json!({"charge": id})))
//!         },
//!         |effect_id, _steps| async move {
//!             Ok(match find_charge(&effect_id).await {
//!                 Some(id) => Reconciliation::Done(Outcome::new(201).body(json!({"charge": id}))),
//!                 None => Reconciliation::NothingDone,
//!             })
//!         },
//!     )
//!     .await?;
//! println!("{} (replayed: {})", result.outcome.status_code, result.replayed);
//! # Ok(()) }
//! ```
//!
//! Modules by capability: [`Client`] and its retry loop (`client`), the
//! low-level calls (`calls`) and any call by path (`raw`), `once` and its
//! protocol (`once`), the effect's context and heartbeats (`context`), the
//! answers' types (`types`), errors (`error`, `problem`), the transport seam
//! (`transport`) and keys (`key`).

mod calls;
mod client;
mod context;
mod error;
mod key;
mod once;
mod problem;
mod raw;
mod transport;
mod types;

pub use calls::ClaimOptions;
pub use client::{Client, ClientOptions};
pub use context::{EffectContext, EffectError, LeaseSignal};
pub use error::{BoxError, Error, PROBLEM_CODES};
pub use key::{is_uuid_v7, key_timestamp_ms, new_key};
pub use once::{rerun_effect, Once, OnceResult, Reconciliation, Via};
pub use problem::Problem;
/// The HTTP method of [`Client::send_json`] (reqwest's).
pub use reqwest::Method;
pub use transport::{
    encode_segment, BoxFuture, HttpRequest, HttpResponse, ReqwestTransport, Transport,
};
pub use types::{
    Claim, CompletedClaim, FingerprintRules, HistoryEvent, InProgressClaim, KeyPage, KeyRecord,
    KeyState, KeySummary, ListQuery, Outcome, OwnedClaim, Policy, PreviousAttempt, Protected,
    Resolution, Resolved, StepRecord, Steps,
};
