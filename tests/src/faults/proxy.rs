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
//!
//! A [`Tap`] counts the chunks towards the database that contain a given
//! byte string, such as a key's name as a statement's parameter: the test
//! learns when the server sent a statement about that key.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
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

/// Byte strings counted in the traffic towards the database.
#[derive(Clone, Default)]
pub struct Tap(Arc<Mutex<Vec<Needle>>>);

/// A byte string and how many chunks contained it.
struct Needle {
    bytes: Vec<u8>,
    count: watch::Sender<u32>,
}

impl Tap {
    /// Counts, from now on, the chunks that contain `needle`.
    pub fn watch(&self, needle: Vec<u8>) -> watch::Receiver<u32> {
        assert!(!needle.is_empty(), "an empty needle matches nothing");
        let (count, seen) = watch::channel(0);
        let bytes = needle;
        self.0.lock().expect("tap").push(Needle { bytes, count });
        seen
    }

    /// The needle of a text parameter `value` of a statement: its length
    /// (four bytes, big-endian) and its bytes, as the protocol sends it.
    pub fn parameter(value: &str) -> Vec<u8> {
        let mut needle = (value.len() as u32).to_be_bytes().to_vec();
        needle.extend_from_slice(value.as_bytes());
        needle
    }

    fn see(&self, chunk: &[u8]) {
        for needle in self.0.lock().expect("tap").iter() {
            let bytes = needle.bytes.as_slice();
            if chunk.windows(bytes.len()).any(|w| w == bytes) {
                needle.count.send_modify(|n| *n += 1);
            }
        }
    }
}

/// A listener on a free local port that forwards to `upstream`; stops (and
/// drops every connection) when dropped.
pub struct Proxy {
    pub port: u16,
    /// What passes towards `upstream`.
    pub tap: Tap,
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
        let tap = Tap::default();
        let accept = tokio::spawn(accept_loop(listener, upstream, watcher, tap.clone()));
        Self {
            port,
            tap,
            link,
            accept,
        }
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

async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    link: watch::Receiver<Link>,
    tap: Tap,
) {
    while let Ok((downstream, _)) = listener.accept().await {
        if link.borrow().cut {
            drop(downstream); // refused: closed before a byte is read
            continue;
        }
        tokio::spawn(forward(downstream, upstream, link.clone(), tap.clone()));
    }
}

/// Forwards one connection until either side closes or the link is cut.
async fn forward(
    downstream: TcpStream,
    upstream: SocketAddr,
    mut link: watch::Receiver<Link>,
    tap: Tap,
) {
    let Ok(upstream) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = downstream.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let (down_read, down_write) = downstream.into_split();
    let (up_read, up_write) = upstream.into_split();
    let there = pump(down_read, up_write, link.clone(), Some(tap));
    let back = pump(up_read, down_write, link.clone(), None);
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

/// Copies one direction, each chunk leaving `latency` after it arrived
/// (and shown to `tap` as it arrives).
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    link: watch::Receiver<Link>,
    tap: Option<Tap>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if let Some(tap) = &tap {
                        tap.see(&buf[..n]);
                    }
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
