//! One HTTP/1.1 keep-alive connection per virtual client, on hyper directly:
//! no pool, no retries, no redirects — a request is exactly one exchange on
//! the client's own connection, and a lost connection is an error.

use std::net::SocketAddr;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

pub struct Conn {
    send: SendRequest<Full<Bytes>>,
    host: HeaderValue,
    /// The last token sent and its `Authorization` value, built once: the
    /// load generator's own work per request should be as small as it can.
    bearer: Option<(String, HeaderValue)>,
}

impl Conn {
    pub async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        let (send, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            // Ends when the server or the client closes the connection.
            let _ = conn.await;
        });
        Ok(Self {
            send,
            host: HeaderValue::try_from(addr.to_string())?,
            bearer: None,
        })
    }

    /// The server (or a protocol error) closed the connection.
    pub fn is_closed(&self) -> bool {
        self.send.is_closed()
    }

    /// Sends one request and reads the whole answer.
    pub async fn call(
        &mut self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.host.clone());
        if let Some(t) = token {
            if self.bearer.as_ref().is_none_or(|(last, _)| last != t) {
                let value = HeaderValue::try_from(format!("Bearer {t}"))?;
                self.bearer = Some((t.to_owned(), value));
            }
            let (_, value) = self.bearer.as_ref().expect("set above");
            req = req.header(AUTHORIZATION, value.clone());
        }
        if body.is_some() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        let req = req.body(Full::new(body.unwrap_or_default()))?;
        self.send.ready().await.context("connection closed")?;
        let resp = self.send.send_request(req).await?;
        let status = resp.status();
        let bytes = resp.into_body().collect().await?.to_bytes();
        Ok((status, bytes))
    }

    pub async fn get(
        &mut self,
        path: &str,
        token: Option<&str>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.call(Method::GET, path, token, None).await
    }

    pub async fn post(
        &mut self,
        path: &str,
        token: &str,
        body: impl Into<Bytes>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        self.call(Method::POST, path, Some(token), Some(body.into()))
            .await
    }
}
