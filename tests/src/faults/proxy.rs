//! A TCP proxy between a server and Postgres whose link the test can
//! degrade: added latency in both directions, and a cut that drops every
//! live connection and refuses new ones until the link heals.
//!
//! Latency delays each chunk by the same amount without slowing the stream
//! down (a reader stamps each chunk with when it may leave, a writer waits
//! for that moment), as a long cable would. A cut closes both sides of every
//! proxied connection at once, so a statement in flight may or may not have
//! committed when the server sees its connection die: exactly the
//! ambiguity a network partition leaves behind.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The state of the link, as every connection sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Link {
    latency: Duration,
    cut: bool,
}

/// A listener on a free local port that forwards to `upstream`; stops (and
/// drops every connection) when dropped.
pub struct Proxy {
    pub port: u16,
    link: watch::Sender<Link>,
    accept: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let (link, watcher) = watch::channel(Link::default());
        let accept = tokio::spawn(accept_loop(listener, upstream, watcher));
        Self { port, link, accept }
    }

    /// `url` (a `postgres://` URL) with its host and port replaced by this
    /// proxy's.
    pub fn url_for(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a URL");
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let user = authority
            .rsplit_once('@')
            .map(|(user, _)| format!("{user}@"))
            .unwrap_or_default();
        format!("{scheme}://{user}127.0.0.1:{}/{path}", self.port)
    }

    /// Adds `latency` to every chunk, in both directions.
    pub fn set_latency(&self, latency: Duration) {
        self.link.send_modify(|l| l.latency = latency);
    }

    /// Drops every live connection and refuses new ones until `heal`.
    pub fn cut(&self) {
        self.link.send_modify(|l| l.cut = true);
    }

    /// A clean link again: no cut, no added latency.
    pub fn heal(&self) {
        self.link.send_replace(Link::default());
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, link: watch::Receiver<Link>) {
    while let Ok((downstream, _)) = listener.accept().await {
        if link.borrow().cut {
            drop(downstream); // refused: closed before a byte is read
            continue;
        }
        tokio::spawn(forward(downstream, upstream, link.clone()));
    }
}

/// Forwards one connection until either side closes or the link is cut.
async fn forward(downstream: TcpStream, upstream: SocketAddr, mut link: watch::Receiver<Link>) {
    let Ok(upstream) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = downstream.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (down_read, down_write) = downstream.into_split();
    let (up_read, up_write) = upstream.into_split();
    let there = pump(down_read, up_write, link.clone());
    let back = pump(up_read, down_write, link.clone());
    let cut = async {
        loop {
            if link.borrow_and_update().cut {
                return;
            }
            if link.changed().await.is_err() {
                return;
            }
        }
    };
    // Whichever ends first ends the connection: dropping the halves closes
    // both sockets.
    tokio::select! {
        _ = async { tokio::join!(there, back) } => {}
        _ = cut => {}
    }
}

/// Copies one direction, each chunk leaving `latency` after it arrived.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, link: watch::Receiver<Link>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let due = Instant::now() + link.borrow().latency;
                    if tx.send((due, buf[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
