//! Real idemkey servers for the SDK's tests: `target/debug/idemkey` (or
//! `IDEMKEY_BIN`) on the embedded default, its own temp data dir, a free
//! port, readiness by polling `/readyz`, dev tokens minted with
//! `idemkey token` on the same data dir, SIGKILL and restart on the same
//! port. And a transport wrapper that records, fakes or loses answers.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idemkey_client::{
    BoxError, BoxFuture, Client, ClientOptions, HttpRequest, HttpResponse, ReqwestTransport,
    Transport,
};
use tokio::process::{Child, Command};
use tokio::sync::Notify;

/// The server binary; panics with how to build it when it is missing.
pub fn binary() -> PathBuf {
    let bin = std::env::var_os("IDEMKEY_BIN").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/idemkey"),
        PathBuf::from,
    );
    assert!(
        bin.exists(),
        "{} is missing: build it first (`cargo build -p idemkey-web --bin idemkey`) or set IDEMKEY_BIN",
        bin.display()
    );
    bin
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

static DIRS: AtomicU64 = AtomicU64::new(0);

/// One server process (restartable), its data dir and a token.
pub struct TestServer {
    pub port: u16,
    dir: PathBuf,
    extra_env: Vec<(String, String)>,
    child: Option<Child>,
    /// A token for this server's tenant, roles client, viewer and admin.
    pub token: String,
}

impl TestServer {
    /// Starts a server; `extra_env` is added to its environment.
    pub async fn start_with(extra_env: &[(&str, &str)]) -> Self {
        let n = DIRS.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("idemkey-rust-sdk-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let mut server = Self {
            port: free_port(),
            dir,
            extra_env: extra_env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            child: None,
            token: String::new(),
        };
        server.restart().await;
        server.token = server.mint_token("t-rust-sdk", "client,viewer,admin").await;
        server
    }

    /// Starts a server on the defaults.
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(binary());
        cmd.env_clear()
            .env("IDEMKEY_DATA_DIR", self.dir.join("data"))
            .env("IDEMKEY_LISTEN", format!("127.0.0.1:{}", self.port))
            .env("RUST_LOG", "warn")
            .envs(self.extra_env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.dir);
        cmd
    }

    /// (Re)starts the process on the same port and data dir and waits until
    /// `/readyz` answers 200.
    pub async fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("log file");
        let child = self
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn idemkey");
        self.child = Some(child);
        let http = reqwest::Client::new();
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(Some(status)) = self.child.as_mut().map(|c| c.try_wait().ok().flatten()) {
                panic!(
                    "idemkey exited during start-up ({status}); log:\n{}",
                    self.log()
                );
            }
            let ready = http
                .get(format!("{}/readyz", self.base_url()))
                .timeout(Duration::from_secs(1))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200);
            if ready {
                return;
            }
            assert!(
                Instant::now() < until,
                "idemkey not ready after 30 s; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGKILL, and waits until the process is gone.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// `idemkey token --tenant T --roles R` on this server's data dir.
    pub async fn mint_token(&self, tenant: &str, roles: &str) -> String {
        let out = self
            .command()
            .args(["token", "--tenant", tenant, "--roles", roles])
            .output()
            .await
            .expect("run idemkey token");
        assert!(
            out.status.success(),
            "idemkey token failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_owned()
    }

    /// A client of this server.
    pub fn client(&self) -> Client {
        self.client_with(ClientOptions::default())
    }

    /// A client with these options.
    pub fn client_with(&self, options: ClientOptions) -> Client {
        Client::with_options(self.base_url(), self.token.clone(), options).expect("client")
    }

    /// A client whose requests go through `hook`.
    pub fn hooked_client(&self, hook: Hook) -> (Client, Hooked) {
        self.hooked_client_with(hook, ClientOptions::default())
    }

    /// A client with these options whose requests go through `hook`.
    pub fn hooked_client_with(&self, hook: Hook, options: ClientOptions) -> (Client, Hooked) {
        let hooked = Hooked(Arc::new(HookedState {
            inner: ReqwestTransport::new().expect("reqwest"),
            hook,
            calls: Mutex::new(Vec::new()),
            recorded: Notify::new(),
        }));
        let options = ClientOptions {
            transport: Some(Arc::new(hooked.clone())),
            ..options
        };
        (self.client_with(options), hooked)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What a hook decides for one request.
pub enum Verdict {
    /// Send it and hand the answer back.
    Pass,
    /// Send it, then lose the answer (the server applied it).
    LoseAnswer,
    /// Do not send it; answer this instead.
    Answer(HttpResponse),
    /// Do not send it; fail as if there were no connection.
    Fail,
}

/// Decides per request, given its method and URL.
pub type Hook = Box<dyn Fn(&HttpRequest) -> Verdict + Send + Sync>;

/// One request as the hooked transport saw it, with its status (0: no answer).
#[derive(Debug, Clone)]
pub struct Seen {
    pub url: String,
    pub at: Instant,
    pub status: u16,
}

/// A transport that applies a [`Hook`] and records every request.
#[derive(Clone)]
pub struct Hooked(Arc<HookedState>);

pub struct HookedState {
    inner: ReqwestTransport,
    hook: Hook,
    calls: Mutex<Vec<Seen>>,
    recorded: Notify,
}

impl Hooked {
    /// Every request so far.
    pub fn calls(&self) -> Vec<Seen> {
        self.0.calls.lock().expect("calls").clone()
    }

    /// The requests whose URL ends with `suffix`.
    pub fn calls_to(&self, suffix: &str) -> Vec<Seen> {
        self.calls()
            .into_iter()
            .filter(|c| c.url.ends_with(suffix))
            .collect()
    }

    fn record(&self, url: &str, at: Instant, status: u16) {
        self.0.calls.lock().expect("calls").push(Seen {
            url: url.to_owned(),
            at,
            status,
        });
        self.0.recorded.notify_waiters();
    }

    /// Waits until the requests answered so far satisfy `cond` (at most 30 s).
    pub async fn wait_until(&self, what: &str, cond: impl Fn(&[Seen]) -> bool) {
        let until = async {
            loop {
                // Registered before the check, so no answer is missed.
                let recorded = self.0.recorded.notified();
                if cond(&self.calls()) {
                    return;
                }
                recorded.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), until)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
    }
}

impl Transport for Hooked {
    fn send(&self, request: HttpRequest) -> BoxFuture<Result<HttpResponse, BoxError>> {
        let me = self.clone();
        Box::pin(async move {
            let at = Instant::now();
            let url = request.url.clone();
            match (me.0.hook)(&request) {
                Verdict::Pass => {
                    let answer = me.0.inner.send(request).await;
                    me.record(&url, at, answer.as_ref().map_or(0, |a| a.status));
                    answer
                }
                Verdict::LoseAnswer => {
                    let answer = me.0.inner.send(request).await;
                    me.record(&url, at, 0);
                    answer?;
                    Err("connection reset (simulated lost answer)".into())
                }
                Verdict::Answer(a) => {
                    me.record(&url, at, a.status);
                    Ok(a)
                }
                Verdict::Fail => {
                    me.record(&url, at, 0);
                    Err("connection refused (simulated)".into())
                }
            }
        })
    }
}

/// The key segment of a `/v1/keys/{op}/{key}/…` URL.
pub fn key_of(url: &str) -> Option<String> {
    url.split("/v1/keys/")
        .nth(1)?
        .split('/')
        .nth(1)
        .map(str::to_owned)
}
