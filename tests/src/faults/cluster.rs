//! A private Postgres cluster, so a test may restart its database without
//! disturbing the machine's shared server (which other tests use at the
//! same time).
//!
//! It is made with the installed server's own `initdb` and `pg_ctl`
//! (`/usr/lib/postgresql/<newest>/bin`, or `IDEMKEY_TEST_PG_BIN`), lives in
//! a scratch directory on a free port with trust authentication, and is
//! stopped and removed when dropped. Postgres refuses to run as root, so
//! when the tests run as root the cluster belongs to the `postgres` user.

use std::path::{Path, PathBuf};
use std::process::Command;

use sqlx::Connection;

/// A running private cluster.
pub struct PgCluster {
    pub port: u16,
    dir: PathBuf,
    bin: PathBuf,
    as_postgres: bool,
}

impl PgCluster {
    /// Creates and starts a cluster; fails loudly if Postgres is missing.
    pub async fn start() -> Self {
        let bin = pg_bin();
        let as_postgres = running_as_root();
        let dir = std::env::temp_dir().join(format!("pg-{:016x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("cluster dir");
        if as_postgres {
            give_to_postgres(&dir);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let cluster = Self {
            port,
            dir,
            bin,
            as_postgres,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &["-D", &data, "-U", "postgres", "--auth=trust", "--no-sync"],
        );
        let settings = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nmax_connections = 200\n",
            cluster.dir.display()
        );
        let conf = cluster.dir.join("data/postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str(&settings);
        std::fs::write(&conf, text).expect("write postgresql.conf");
        cluster.start_server();
        cluster
    }

    /// The URL of database `name` on this cluster.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates an empty database and returns its URL.
    pub async fn fresh_database(&self) -> String {
        let name = format!("idemkey_fault_{:08x}", rand::random::<u32>());
        let mut conn = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .expect("connect to the private cluster");
        sqlx::query(&format!("create database {name}"))
            .execute(&mut conn)
            .await
            .expect("create database");
        self.url(&name)
    }

    /// Stops the server: `immediate` is a crash (no checkpoint, every
    /// connection dropped, WAL replayed at the next start), `fast` a clean
    /// shutdown that still aborts open transactions.
    pub fn stop(&self, mode: &str) {
        self.run("pg_ctl", &["stop", "-D", &self.data(), "-m", mode, "-w"]);
    }

    /// Starts the stopped server and waits until it accepts connections.
    pub fn start_server(&self) {
        let log = self.dir.join("postgres.log").display().to_string();
        self.run(
            "pg_ctl",
            &["start", "-D", &self.data(), "-l", &log, "-w", "-t", "60"],
        );
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// Runs one of the cluster's programs, as `postgres` when we are root.
    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&program);
            c
        } else {
            Command::new(&program)
        };
        let out = command
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        assert!(
            out.status.success(),
            "{} {args:?} failed: {}{}",
            program.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data();
        let program = self.bin.join("pg_ctl");
        let args = ["stop", "-D", &data, "-m", "immediate", "-w"];
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .output()
        } else {
            Command::new(&program).args(args).output()
        };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest installed Postgres's programs.
fn pg_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("IDEMKEY_TEST_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("Postgres server programs in /usr/lib/postgresql (run scripts/services.sh)")
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .expect("no /usr/lib/postgresql/*/bin/initdb: install PostgreSQL (scripts/services.sh)")
}

fn running_as_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// Hands `dir` to `postgres`, which must also be able to walk down to it.
fn give_to_postgres(dir: &Path) {
    let status = Command::new("chown")
        .args(["postgres:", &dir.display().to_string()])
        .status()
        .expect("chown");
    assert!(status.success(), "chown postgres {}", dir.display());
    let reachable = Command::new("runuser")
        .args(["-u", "postgres", "--", "test", "-w"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        reachable,
        "the postgres user cannot write {}: point TMPDIR at a directory it can reach",
        dir.display()
    );
}
