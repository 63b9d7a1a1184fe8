//! The real `idemkey` server as a separate process, started the way the
//! end-to-end tests start it (`tests/src/process.rs`): port 0, then the
//! "idemkey listening addr=…" log line tells the bound address.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use idemkey_api::auth::{mint, Role, RoleSet};
use idemkey_api::domain::TenantId;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::http::Conn;
use crate::procfs;
use crate::workload::TENANT;

/// What the server is started with; one per suite run.
#[derive(Clone)]
pub struct ServerEnv {
    pub binary: PathBuf,
    pub data_dir: PathBuf,
    jwt_secret: String,
    effect_secret: String,
    /// Extra variables (the cache switch, when the server has one).
    pub extra: Vec<(String, String)>,
}

const KID: &str = "bench";

impl ServerEnv {
    pub fn new(binary: PathBuf, data_dir: PathBuf) -> Self {
        let secret = |label: &str| {
            let bytes: [u8; 32] = rand::random();
            format!("{label}{}", hex::encode(bytes))
        };
        Self {
            binary,
            data_dir,
            jwt_secret: secret("jwt-"),
            effect_secret: secret("effect-"),
            extra: Vec::new(),
        }
    }

    /// The server's command; without a database URL it opens its embedded
    /// default, a SQLite file in the data directory.
    fn command(&self, database_url: Option<&str>) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.env_clear().current_dir(&self.data_dir);
        if let Some(url) = database_url {
            cmd.env("IDEMKEY_DATABASE_URL", url);
        }
        cmd.env("IDEMKEY_DATA_DIR", &self.data_dir)
            .env("IDEMKEY_JWT_SECRETS", format!("{KID}={}", self.jwt_secret))
            .env("IDEMKEY_SECRET", &self.effect_secret)
            .env("RUST_LOG", "info")
            .envs(self.extra.iter().map(|(k, v)| (k, v)));
        // SAFETY: prctl is async-signal-safe and touches no memory of ours.
        // The server dies with the harness even when the harness is killed
        // (kill_on_drop only covers an orderly exit).
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        cmd
    }

    /// A client token for the bench tenant, signed with the server's secret.
    pub fn token(&self) -> anyhow::Result<String> {
        self.token_with(Role::Client)
    }

    /// A token with one role for the bench tenant (`metrics` to scrape).
    fn token_with(&self, role: Role) -> anyhow::Result<String> {
        let mut roles = RoleSet::default();
        roles.insert(role);
        let tenant = TenantId::parse(TENANT).map_err(|e| anyhow!("tenant: {e:?}"))?;
        mint(
            KID,
            self.jwt_secret.as_bytes(),
            "idemkey",
            "idemkey",
            &tenant,
            roles,
            Duration::from_secs(4 * 3600),
        )
    }

    /// `idemkey migrate`: the schema, without a server (for pgbench limits).
    pub async fn migrate(&self, database_url: &str) -> anyhow::Result<()> {
        let out = self
            .command(Some(database_url))
            .arg("migrate")
            .output()
            .await
            .with_context(|| format!("running {}", self.binary.display()))?;
        if !out.status.success() {
            bail!(
                "idemkey migrate failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    pub async fn start(&self, database_url: &str) -> anyhow::Result<Server> {
        self.start_on(Some(database_url)).await
    }

    /// The server on its embedded default: no `IDEMKEY_DATABASE_URL`, so
    /// it opens (and migrates) `idemkey.db` in `data_dir`, as a fresh
    /// install does.
    pub async fn start_embedded(&self) -> anyhow::Result<Server> {
        self.start_on(None).await
    }

    async fn start_on(&self, database_url: Option<&str>) -> anyhow::Result<Server> {
        let mut child = self
            .command(database_url)
            .arg("serve")
            .env("IDEMKEY_LISTEN", "127.0.0.1:0")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.binary.display()))?;
        let pid = child.id().ok_or_else(|| anyhow!("server exited at once"))?;
        let stderr = child.stderr.take().ok_or_else(|| anyhow!("no stderr"))?;
        let mut lines = BufReader::new(stderr).lines();
        let announced = async {
            while let Some(line) = lines.next_line().await? {
                if line.contains("idemkey listening") {
                    if let Some(rest) = line.split("addr=").nth(1) {
                        let addr = rest.split_whitespace().next().unwrap_or_default();
                        return Ok(addr.parse::<SocketAddr>()?);
                    }
                }
            }
            bail!("idemkey exited before listening")
        };
        let addr = tokio::time::timeout(Duration::from_secs(60), announced)
            .await
            .context("idemkey did not announce its address within 60 s")??;
        // Keep draining stderr so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let metrics_token = self.token_with(Role::Metrics)?;
        Ok(Server {
            addr,
            pid,
            child,
            metrics_token,
        })
    }
}

pub struct Server {
    pub addr: SocketAddr,
    pub pid: u32,
    child: Child,
    /// Scrapes `/metrics` (which needs the `metrics` role).
    metrics_token: String,
}

impl Server {
    pub fn cpu(&self) -> anyhow::Result<Duration> {
        procfs::process_cpu(self.pid)
    }

    /// Peak RSS (VmHWM) in MiB.
    pub fn peak_rss_mib(&self) -> anyhow::Result<f64> {
        Ok(procfs::process_memory(self.pid)?.0 as f64 / (1u64 << 20) as f64)
    }

    /// The Prometheus text of `/metrics`, or `None` when the server has no
    /// such endpoint (this build: the cache branch adds it).
    pub async fn metrics(&self) -> anyhow::Result<Option<String>> {
        let mut conn = Conn::connect(self.addr).await?;
        let (status, body) = conn.get("/metrics", Some(&self.metrics_token)).await?;
        if !status.is_success() {
            return Ok(None);
        }
        Ok(Some(String::from_utf8_lossy(&body).into_owned()))
    }

    /// SIGTERM (graceful), then SIGKILL after 10 s.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let pid = libc::pid_t::try_from(self.pid)?;
        // SAFETY: kill has no memory-safety preconditions; the pid is our child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// The sum of every sample of `metric` (all label sets) in Prometheus text.
pub fn metric_sum(text: &str, metric: &str) -> Option<f64> {
    let mut found = false;
    let mut sum = 0.0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue; // a longer name with this prefix
        }
        let value = rest.rsplit_once('}').map_or(rest, |(_, v)| v);
        if let Some(v) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            found = true;
            sum += v;
        }
    }
    found.then_some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_samples_are_summed_over_labels_and_prefixes_are_not_confused() {
        let text = "# HELP idemkey_db_reads_total reads\n\
                    # TYPE idemkey_db_reads_total counter\n\
                    idemkey_db_reads_total{kind=\"find\"} 3\n\
                    idemkey_db_reads_total{kind=\"insert\",x=\"}\"} 4\n\
                    idemkey_db_reads_total_created 99\n\
                    idemkey_db_reads 1e3\n";
        assert_eq!(metric_sum(text, "idemkey_db_reads_total"), Some(7.0));
        assert_eq!(metric_sum(text, "idemkey_db_reads"), Some(1000.0));
        assert_eq!(metric_sum(text, "absent"), None);
    }
}
