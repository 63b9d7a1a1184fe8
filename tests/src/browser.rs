//! A real headless Chromium, driven through WebDriver (chromedriver) with
//! fantoccini. `scripts/services.sh` installs Debian's `chromium` and
//! `chromium-driver` when they are missing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use tokio::process::{Child, Command};

pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// A chromedriver process on a free port and one browser session in it.
/// Dropping it kills chromedriver (and with it the browser).
pub struct Browser {
    pub client: Client,
    _driver: Child,
    profile: PathBuf,
}

impl Browser {
    /// Starts chromedriver and a headless browser with a fresh profile.
    pub async fn start() -> Self {
        for program in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(program).exists(),
                "{program} is missing: run the tests through scripts/test.sh, which installs chromium and chromium-driver"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let url = format!("http://127.0.0.1:{port}");
        wait_for_driver(&url).await;
        let profile =
            std::env::temp_dir().join(format!("idemkey-chromium-{:016x}", rand::random::<u64>()));
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--window-size=1280,900".to_owned(),
            format!("--user-data-dir={}", profile.display()),
        ];
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({ "binary": CHROMIUM, "args": args }),
        );
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(caps)
            .connect(&url)
            .await
            .expect("a browser session");
        Self {
            client,
            _driver: driver,
            profile,
        }
    }

    /// Saves a PNG of the current page as `dir/name.png`.
    pub async fn screenshot(&self, dir: &Path, name: &str) -> PathBuf {
        std::fs::create_dir_all(dir).expect("screenshot dir");
        let png = self.client.screenshot().await.expect("screenshot");
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
        path
    }

    /// Ends the browser session and removes the profile.
    pub async fn close(self) {
        let _ = self.client.close().await;
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Where the end-to-end tests leave their screenshots: `target/screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("screenshots")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

async fn wait_for_driver(url: &str) {
    let status = format!("{url}/status");
    for _ in 0..100 {
        if let Ok(r) = reqwest::get(&status).await {
            if r.status().is_success() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not answer at {status} within 10 s");
}
