//! Steady closed-loop scenarios against a running server: new keys (claim →
//! complete), replays of completed keys, the 80/20 mix, and `GET /healthz`
//! (the HTTP limit: the cheapest answer the server gives).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use hyper::StatusCode;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use crate::http::Conn;
use crate::load::{closed_loop, LoadResult, LoadSpec, OpResult};
use crate::server::Server;
use crate::workload::{self, NEW_OPERATION, REPLAY_OPERATION};

#[derive(Debug, Clone, Copy)]
pub enum Mix {
    /// Claim a fresh key, then complete it: one operation.
    NewKeys,
    /// Claim one of the `replay_keys` completed keys: a replay.
    Replays,
    /// `new_percent` % new keys, the rest replays.
    Mixed { new_percent: u32 },
    /// `GET /healthz`.
    Healthz,
}

pub struct Client {
    addr: SocketAddr,
    conn: Conn,
    token: Arc<str>,
    rng: SmallRng,
    replay_keys: u64,
    /// The replay's claim body, built once (the same for every replay).
    replay_body: Bytes,
}

#[derive(Deserialize)]
struct Answer {
    owner_token: Option<String>,
    code: Option<String>,
}

fn label(call: &str, status: StatusCode, body: &[u8]) -> String {
    let code = serde_json::from_slice::<Answer>(body)
        .ok()
        .and_then(|a| a.code)
        .unwrap_or_default();
    format!("{call} {} {code}", status.as_u16())
}

async fn new_key(c: &mut Client) -> OpResult {
    let key = workload::random_key(&mut c.rng);
    let (status, body) = c
        .conn
        .post(
            &workload::claim_path(NEW_OPERATION, &key),
            &c.token,
            workload::new_key_claim_body(&key),
        )
        .await
        .map_err(|e| format!("claim: {e}"))?;
    if status != StatusCode::CREATED {
        return Err(label("claim", status, &body));
    }
    let owner = serde_json::from_slice::<Answer>(&body)
        .ok()
        .and_then(|a| a.owner_token)
        .ok_or("claim: no owner_token")?;
    let (status, body) = c
        .conn
        .post(
            &workload::complete_path(NEW_OPERATION, &key),
            &c.token,
            workload::complete_body(&owner),
        )
        .await
        .map_err(|e| format!("complete: {e}"))?;
    if status != StatusCode::OK {
        return Err(label("complete", status, &body));
    }
    Ok(())
}

async fn replay(c: &mut Client) -> OpResult {
    let key = c.rng.random_range(1..=c.replay_keys).to_string();
    let (status, body) = c
        .conn
        .post(
            &workload::claim_path(REPLAY_OPERATION, &key),
            &c.token,
            c.replay_body.clone(),
        )
        .await
        .map_err(|e| format!("replay: {e}"))?;
    // The answer's first member, as the server writes it; a byte check
    // rather than a parse keeps the load generator's own CPU per replay
    // close to what it spends on `/healthz`.
    let replayed = status == StatusCode::OK && body.starts_with(br#"{"status":"completed","#);
    if !replayed {
        return Err(label("replay", status, &body));
    }
    Ok(())
}

async fn healthz(c: &mut Client) -> OpResult {
    let (status, body) = c
        .conn
        .get("/healthz", None)
        .await
        .map_err(|e| format!("healthz: {e}"))?;
    if status != StatusCode::OK {
        return Err(label("healthz", status, &body));
    }
    Ok(())
}

/// Connects `clients` clients to `server` and drives `mix` through them;
/// `db` is the server's Postgres database (its backends' CPU is sampled),
/// `None` for the embedded store, whose work is in the server's own CPU.
pub async fn run(
    server: &Server,
    db: Option<&str>,
    token: &str,
    mix: Mix,
    clients: usize,
    replay_keys: u64,
    spec: LoadSpec,
) -> anyhow::Result<LoadResult> {
    let (addr, server_pid) = (server.addr, server.pid);
    let token: Arc<str> = token.into();
    let mut states = Vec::with_capacity(clients);
    for _ in 0..clients {
        states.push(Client {
            addr,
            conn: Conn::connect(addr).await?,
            token: token.clone(),
            rng: SmallRng::from_rng(&mut rand::rng()),
            replay_keys: replay_keys.max(1),
            replay_body: workload::replay_claim_body().into(),
        });
    }
    Ok(
        closed_loop(spec, Some(server_pid), db, states, move |mut c| {
            Box::pin(async move {
                let result = match mix {
                    Mix::NewKeys => new_key(&mut c).await,
                    Mix::Replays => replay(&mut c).await,
                    Mix::Mixed { new_percent } => {
                        if c.rng.random_range(0..100) < new_percent {
                            new_key(&mut c).await
                        } else {
                            replay(&mut c).await
                        }
                    }
                    Mix::Healthz => healthz(&mut c).await,
                };
                if c.conn.is_closed() {
                    // Counted as an error above; carry on with a new connection.
                    if let Ok(conn) = Conn::connect(c.addr).await {
                        c.conn = conn;
                    }
                }
                (c, result)
            })
        })
        .await,
    )
}
