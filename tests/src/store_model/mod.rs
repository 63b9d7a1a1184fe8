//! A reference model of one key's record under the claim protocol, and the
//! runner that drives a store and the model side by side, step by step
//! (`tests/tests/store_model.rs` generates the histories).
//!
//! The model is written from the protocol, not from the SQL: a key is gone
//! once its window is over (a completed record at its window end, which a
//! completion moves to a whole window after it; a record never completed a
//! whole window after its last lease); a takeover or an expiry quarantine
//! acts only on the very version its look saw; owners act only with the
//! current attempt's token, and only while the record is not gone.

mod model;

use std::collections::BTreeMap;
use std::mem::discriminant;
use std::time::{Duration, Instant};

use idemkey_api::domain::policy::LeaseExpiry;
use idemkey_api::domain::{decide, Decision, OwnerToken, RecordState, ScopedKey};
use idemkey_api::store::{Resolver, StepDone, Store};

use crate::stores::{advance, fingerprint, fresh_key, Outcome};
use model::{bump, new_claim, Client, Model, Pending, Row, LEASE_MS, REAL_TIME_BUDGET, TICK_MS};
pub use model::{Figures, Op};

/// Runs one history against a fresh key; `Err` names the first departure
/// from the model, with the history up to it.
pub async fn run_case(
    store: &Store,
    on_expiry: LeaseExpiry,
    ops: &[Op],
    figures: &Figures,
) -> Result<(), String> {
    let k = fresh_key("model");
    let mut run = Run {
        store,
        k: &k,
        model: Model {
            now: 0,
            row: None,
            on_expiry,
        },
        clients: Default::default(),
        figures,
        outcomes: 0,
    };
    let started = Instant::now();
    let mut history = Vec::new();
    for op in ops {
        bump(&figures.steps);
        let said = run.step(op).await;
        history.push(format!("  {op:?} -> {}", said.as_deref().unwrap_or("?")));
        let checked = match said {
            Ok(_) => run.check().await,
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            return Err(format!("{e}\nhistory:\n{}", history.join("\n")));
        }
    }
    if started.elapsed() > REAL_TIME_BUDGET {
        return Err(format!(
            "the case took {:?} of real time: too slow for its clock",
            started.elapsed()
        ));
    }
    Ok(())
}

struct Run<'a> {
    store: &'a Store,
    k: &'a ScopedKey,
    model: Model,
    clients: [Client; 3],
    figures: &'a Figures,
    outcomes: u32,
}

/// What the store answered, against what the model expected.
fn expect(what: &str, did: bool, expected: bool) -> Result<String, String> {
    match did == expected {
        true => Ok(format!("{what}: {}", if did { "done" } else { "refused" })),
        false => Err(format!(
            "{what}: the store did={did}, the model expected={expected}"
        )),
    }
}

impl Run<'_> {
    async fn step(&mut self, op: &Op) -> Result<String, String> {
        let now = self.model.now;
        let (store, k) = (self.store, self.k);
        let err = |e: idemkey_api::store::StoreError| format!("store error: {e}");
        match *op {
            Op::Look { client, request } => self.look(client, request).await,
            Op::Act { client } => self.act(client).await,
            Op::Complete { client } => {
                let token = self.clients[client].token();
                let outcome = self.next_outcome();
                let done = Outcome::numbered(outcome);
                let c = idemkey_api::store::Completion {
                    owner: token,
                    outcome_json: &done.json,
                    outcome_hash: done.hash,
                };
                let did = store.complete(k, &c).await.map_err(err)?.is_some();
                let row = self.model.row.as_mut().filter(|r| r.owned_by(token, now));
                let expected = row.is_some();
                if let Some(row) = row {
                    row.complete(outcome, now);
                    bump(&self.figures.completed);
                } else {
                    bump(&self.figures.refused);
                }
                expect("complete", did, expected)
            }
            Op::Release { client } => {
                let token = self.clients[client].token();
                let did = store.release(k, token).await.map_err(err)?;
                let expected = self
                    .model
                    .row
                    .as_ref()
                    .is_some_and(|r| r.state == RecordState::InProgress && r.owner == token);
                if expected {
                    self.model.row = None;
                }
                expect("release", did, expected)
            }
            Op::Heartbeat { client } => {
                let token = self.clients[client].token();
                let did = store.heartbeat(k, token, None).await.map_err(err)?;
                let row = self.model.row.as_mut().filter(|r| r.owned_by(token, now));
                let expected = row.is_some();
                if let Some(row) = row {
                    row.lease_end = now + LEASE_MS;
                }
                expect("heartbeat", did.is_some(), expected)
            }
            Op::Step { client, step } => {
                let token = self.clients[client].token();
                let (name, reference) = (format!("s{step}"), format!("ref-{client}"));
                let s = StepDone {
                    owner: token,
                    step: &name,
                    provider_ref: &reference,
                };
                let did = store.record_step(k, &s).await.map_err(err)?.is_some();
                let row = self.model.row.as_mut().filter(|r| {
                    r.owned_by(token, now) && r.steps.get(&step).is_none_or(|c| *c == client)
                });
                let expected = row.is_some();
                if let Some(row) = row {
                    row.steps.insert(step, client);
                }
                expect("step", did, expected)
            }
            Op::Quarantine { client } => {
                let token = self.clients[client].token();
                let did = store.quarantine(k, token, "unsure").await.map_err(err)?;
                let row = self.model.row.as_mut().filter(|r| r.owned_by(token, now));
                let expected = row.is_some();
                if let Some(row) = row {
                    row.state = RecordState::Quarantined;
                }
                expect("quarantine", did.is_some(), expected)
            }
            Op::Resolve { complete } => {
                let admin = Resolver {
                    owner: None,
                    actor: "admin:model".into(),
                };
                let resolvable = self.model.row.as_ref().is_some_and(|r| {
                    !r.gone(now)
                        && (r.state == RecordState::Quarantined
                            || (r.state == RecordState::InProgress && r.lease_end <= now))
                });
                if complete {
                    let outcome = self.next_outcome();
                    let done = Outcome::numbered(outcome);
                    let c = done.by(&OwnerToken::generate());
                    let did = store.resolve_complete(k, &admin, &c).await.map_err(err)?;
                    if resolvable {
                        let row = self.model.row.as_mut().expect("resolvable");
                        row.complete(outcome, now);
                    }
                    expect("resolve with an outcome", did.is_some(), resolvable)
                } else {
                    let did = store.resolve_release(k, &admin, None).await.map_err(err)?;
                    if resolvable {
                        self.model.row = None;
                    }
                    expect("resolve by release", did, resolvable)
                }
            }
            Op::Advance { tens } => {
                let by = TICK_MS * i64::from(tens);
                advance(store, k, Duration::from_millis(by as u64)).await;
                self.model.now += by;
                Ok(format!("now {} s", self.model.now / 1000))
            }
            Op::Cleanup => {
                store.delete_expired(10_000).await.map_err(err)?;
                if self.model.row.as_ref().is_some_and(|r| r.gone(now)) {
                    self.model.row = None;
                    return Ok("removed".into());
                }
                Ok("kept".into())
            }
        }
    }

    fn next_outcome(&mut self) -> u32 {
        self.outcomes += 1;
        self.outcomes
    }

    async fn look(&mut self, client: usize, request: u8) -> Result<String, String> {
        let (store, k, now) = (self.store, self.k, self.model.now);
        let err = |e: idemkey_api::store::StoreError| format!("store error: {e}");
        let candidate = OwnerToken::generate();
        let inserted = store
            .insert_claim(k, &new_claim(request, &candidate))
            .await
            .map_err(err)?;
        if self.model.row.is_none() {
            if inserted.is_none() {
                return Err("insert refused for a key the model has no record of".into());
            }
            self.model.row = Some(Row::new(request, candidate.hash(), now));
            self.clients[client].owned = Some(candidate);
            bump(&self.figures.claimed);
            return Ok("claimed (insert)".into());
        }
        if inserted.is_some() {
            return Err("insert won over a record the model still has".into());
        }
        let Some(seen) = store.find(k).await.map_err(err)? else {
            return Err("find: no record where the model has one".into());
        };
        let decision = decide(&seen.seen(), &fingerprint(request), self.model.on_expiry);
        let expected = self.model.decide(request);
        if discriminant(&decision) != discriminant(&expected) {
            return Err(format!("look decided {decision:?}, the model {expected:?}"));
        }
        if decision == Decision::Replay {
            let stored = self.model.row.as_ref().and_then(|r| r.outcome);
            let want = stored.map(|n| Outcome::numbered(n).json);
            if seen.outcome != want {
                return Err(format!("replay of {:?}, the model {want:?}", seen.outcome));
            }
            bump(&self.figures.replays);
        }
        if decision == Decision::Renew {
            bump(&self.figures.gone);
        }
        self.clients[client].pending = Some(Pending {
            request,
            candidate,
            decision,
            seen: seen.version(),
        });
        Ok(format!("{decision:?}"))
    }

    async fn act(&mut self, client: usize) -> Result<String, String> {
        let (store, k, now) = (self.store, self.k, self.model.now);
        let err = |e: idemkey_api::store::StoreError| format!("store error: {e}");
        let Some(p) = self.clients[client].pending.take() else {
            return Ok("nothing to act on".into());
        };
        let lease = Duration::from_millis(LEASE_MS as u64);
        let (what, did, expected) = match p.decision {
            Decision::Renew => {
                let fresh = new_claim(p.request, &p.candidate);
                let did = store.renew_expired(k, &fresh).await.map_err(err)?.is_some();
                let expected = self.model.row.as_ref().is_some_and(|r| r.gone(now));
                if expected {
                    self.model.row = Some(Row::new(p.request, p.candidate.hash(), now));
                    self.clients[client].owned = Some(p.candidate);
                    bump(&self.figures.renewed);
                }
                ("renew", did, expected)
            }
            Decision::TakeOver => {
                let taken = store.take_over(k, p.seen, p.candidate.hash(), lease);
                let did = taken.await.map_err(err)?.is_some();
                let row = self.model.expired_version(p.seen);
                let expected = row.is_some();
                if let Some(row) = row {
                    row.attempt += 1;
                    row.owner = p.candidate.hash();
                    row.lease_end = now + LEASE_MS;
                    self.clients[client].owned = Some(p.candidate);
                    bump(&self.figures.recovering);
                }
                ("take over", did, expected)
            }
            Decision::Quarantine => {
                let done = store.quarantine_expired(k, p.seen).await.map_err(err)?;
                let row = self.model.expired_version(p.seen);
                let expected = row.is_some();
                if let Some(row) = row {
                    row.state = RecordState::Quarantined;
                }
                ("quarantine the expired lease", done.is_some(), expected)
            }
            d => return Ok(format!("{d:?}: nothing to do")),
        };
        if !expected {
            bump(&self.figures.stale_acts);
        }
        expect(what, did, expected)
    }

    /// The stored record matches the model's.
    async fn check(&self) -> Result<(), String> {
        let found = self.store.find(self.k).await.map_err(|e| e.to_string())?;
        let (found, row) = match (found, &self.model.row) {
            (None, None) => return Ok(()),
            (Some(found), Some(row)) => (found, row),
            (found, row) => {
                return Err(format!(
                    "the store has {:?}, the model {:?}",
                    found.map(|f| f.state),
                    row.as_ref().map(|r| r.state)
                ))
            }
        };
        let steps: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(&found.steps).map_err(|e| e.to_string())?;
        let stored_steps: Vec<(String, String)> = steps
            .iter()
            .map(|(name, s)| {
                (
                    name.clone(),
                    s["provider_ref"].as_str().unwrap_or("").into(),
                )
            })
            .collect();
        let model_steps: Vec<(String, String)> = row
            .steps
            .iter()
            .map(|(s, c)| (format!("s{s}"), format!("ref-{c}")))
            .collect();
        let ours = (
            row.state,
            row.attempt,
            fingerprint(row.request),
            row.owner,
            row.outcome.map(|n| Outcome::numbered(n).json),
            model_steps,
            row.gone(self.model.now),
        );
        let theirs = (
            found.state,
            found.attempt,
            found.fingerprint,
            found.owner_token_hash,
            found.outcome.clone(),
            stored_steps,
            found.is_expired(),
        );
        if ours != theirs {
            return Err(format!(
                "record differs:\n  store {theirs:?}\n  model {ours:?}"
            ));
        }
        Ok(())
    }
}
