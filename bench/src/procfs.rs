//! What Linux's /proc says about the server process and the machine: CPU
//! time (utime + stime), peak and current RSS, open descriptors, machine-wide
//! CPU use and load. Parsing is pure and unit-tested; reading is thin.

use std::time::Duration;

use anyhow::{anyhow, Context};
use serde::{Deserialize, Serialize};

/// utime + stime in clock ticks, from the text of /proc/PID/stat.
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: the
    // fields we want are counted from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `Name:   1234 kB` line of /proc/PID/status (or /proc/meminfo), in bytes.
pub fn parse_kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        let kib: u64 = value.split_whitespace().next()?.parse().ok()?;
        Some(kib * 1024)
    })
}

/// Busy and total jiffies of the machine, from the `cpu` line of /proc/stat.
pub fn parse_machine_cpu(stat: &str) -> Option<CpuJiffies> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest is in user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some(CpuJiffies {
        busy: total - idle,
        total,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuJiffies {
    pub busy: u64,
    pub total: u64,
}

impl CpuJiffies {
    /// Share of the machine's CPU that was busy between `self` and `later`.
    pub fn busy_share_until(self, later: CpuJiffies) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let busy = later.busy.checked_sub(self.busy)?;
        (total > 0).then(|| busy as f64 / total as f64)
    }
}

/// The three load averages of /proc/loadavg.
pub fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// CPU time the process has used so far (user + system).
pub fn process_cpu(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    let ticks = parse_cpu_ticks(&stat).ok_or_else(|| anyhow!("unexpected /proc/{pid}/stat"))?;
    Ok(Duration::from_secs_f64(
        ticks as f64 / clock_ticks_per_second() as f64,
    ))
}

/// Peak resident set size (VmHWM) and current RSS (VmRSS), in bytes.
pub fn process_memory(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let hwm = parse_kib_field(&status, "VmHWM").ok_or_else(|| anyhow!("no VmHWM"))?;
    let rss = parse_kib_field(&status, "VmRSS").ok_or_else(|| anyhow!("no VmRSS"))?;
    Ok((hwm, rss))
}

/// Open file descriptors of the process (sockets included).
pub fn open_fds(pid: u32) -> anyhow::Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// Whether a process title (`/proc/PID/cmdline`, NULs as spaces) is a
/// Postgres backend serving database `db` ("postgres: 15/main: user db
/// host(port) state").
pub fn is_backend_of(cmdline: &str, db: &str) -> bool {
    cmdline.starts_with("postgres: ") && cmdline.split_whitespace().any(|w| w == db)
}

/// CPU time used so far by the Postgres backends serving database `db`
/// (those alive now: connections that closed took their time with them).
pub fn backends_cpu(db: &str) -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Duration::ZERO;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
                let text = String::from_utf8_lossy(&raw).replace('\0', " ");
                is_backend_of(&text, db)
            })
        })
        .filter_map(|pid| process_cpu(pid).ok())
        .sum()
}

pub fn machine_cpu() -> Option<CpuJiffies> {
    parse_machine_cpu(&std::fs::read_to_string("/proc/stat").ok()?)
}

pub fn loadavg() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The machine the numbers were taken on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cpus: usize,
    pub cpu_model: String,
    pub memory_gib: f64,
    /// Memory available when the run started (`free -h`'s "available").
    #[serde(default)]
    pub memory_available_gib: f64,
    pub kernel: String,
}

impl Machine {
    pub fn detect() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Self {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
            memory_gib: parse_kib_field(&meminfo, "MemTotal")
                .map_or(0.0, |b| b as f64 / (1u64 << 30) as f64),
            memory_available_gib: parse_kib_field(&meminfo, "MemAvailable")
                .map_or(0.0, |b| b as f64 / (1u64 << 30) as f64),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_owned())
                .unwrap_or_default(),
        }
    }
}

pub fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_utime_plus_stime_even_with_odd_command_names() {
        let stat = "4242 (idem key) (x)) S 1 4242 4242 0 -1 4194560 1187 0 0 0 \
                    150 37 0 0 20 0 3 0 123 1000 500 18446744073709551615";
        assert_eq!(parse_cpu_ticks(stat), Some(187));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn kib_fields_become_bytes() {
        let status = "Name:\tidemkey\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\n";
        assert_eq!(parse_kib_field(status, "VmHWM"), Some(20 << 20));
        assert_eq!(parse_kib_field(status, "VmRSS"), Some(10 << 20));
        assert_eq!(parse_kib_field(status, "VmSwap"), None);
    }

    #[test]
    fn machine_cpu_busy_share_excludes_idle_and_iowait() {
        let a = parse_machine_cpu("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(
            a,
            CpuJiffies {
                busy: 200,
                total: 1000
            }
        );
        let b = parse_machine_cpu("cpu  250 0 150 1400 200 0 0 0 0 0\n").unwrap();
        assert_eq!(a.busy_share_until(b), Some(200.0 / 1000.0));
        assert_eq!(b.busy_share_until(a), None);
    }

    #[test]
    fn backends_are_recognised_by_their_database_word() {
        let title = "postgres: 15/main: postgres idemkey_bench_1_new_keys 127.0.0.1(5000) idle";
        assert!(is_backend_of(title, "idemkey_bench_1_new_keys"));
        assert!(!is_backend_of(title, "idemkey_bench_1_new"));
        assert!(!is_backend_of(
            "postgres: 15/main: walwriter",
            "walwriter_db"
        ));
        assert!(!is_backend_of(
            "idemkey-bench idemkey_bench_1_new_keys",
            "idemkey_bench_1_new_keys"
        ));
    }

    #[test]
    fn load_averages_and_cpu_model_are_read() {
        assert_eq!(
            parse_loadavg("0.52 1.03 2.50 3/400 1234\n"),
            Some([0.52, 1.03, 2.5])
        );
        assert_eq!(parse_loadavg("0.5"), None);
        let info = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: x\n";
        assert_eq!(cpu_model(info).as_deref(), Some("AMD EPYC 7B13"));
    }
}
