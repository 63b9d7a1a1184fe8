//! Idle keep-alive connections: open many, use each once (so the server has
//! set up its per-connection state), leave them open, and read the server's
//! memory while they are all still there.

use std::time::Duration;

use anyhow::bail;
use hyper::StatusCode;

use crate::http::Conn;
use crate::procfs;
use crate::server::Server;

pub struct IdleResult {
    pub connections: usize,
    /// RSS before any connection, in MiB.
    pub rss_before_mib: f64,
    /// RSS with every connection open, in MiB.
    pub rss_with_connections_mib: f64,
    /// Peak RSS (VmHWM) of the process so far, in MiB.
    pub peak_rss_mib: f64,
    /// Descriptors the server held at the measurement (proves they were open).
    pub server_fds: usize,
}

const MIB: f64 = (1u64 << 20) as f64;

pub async fn run(server: &Server, connections: usize) -> anyhow::Result<IdleResult> {
    let (_, rss_before) = procfs::process_memory(server.pid)?;
    let addr = server.addr;
    let mut open = Vec::with_capacity(connections);
    // In batches, so the listen backlog never overflows.
    while open.len() < connections {
        let batch: Vec<_> = (open.len()..connections.min(open.len() + 100))
            .map(|_| {
                tokio::spawn(async move {
                    let mut c = Conn::connect(addr).await?;
                    let (status, _) = c.get("/healthz", None).await?;
                    anyhow::ensure!(status == StatusCode::OK, "healthz answered {status}");
                    Ok(c)
                })
            })
            .collect();
        for task in batch {
            open.push(task.await??);
        }
    }
    // Idle now; actix closes keep-alive connections after 5 s by default,
    // so measure well inside that.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let fds = procfs::open_fds(server.pid)?;
    let (hwm, rss) = procfs::process_memory(server.pid)?;
    let still_open = open.iter().filter(|c| !c.is_closed()).count();
    if still_open < connections {
        bail!("only {still_open} of {connections} connections were still open at the measurement");
    }
    drop(open);
    Ok(IdleResult {
        connections,
        rss_before_mib: rss_before as f64 / MIB,
        rss_with_connections_mib: rss as f64 / MIB,
        peak_rss_mib: hwm as f64 / MIB,
        server_fds: fds,
    })
}
