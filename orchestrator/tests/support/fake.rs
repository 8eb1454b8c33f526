//! A fake rdmabw (a shell script) for sweep tests without RDMA: it answers `--version`,
//! `rails --json` from a file, runs `server --daemon` as a sleeping process whose PID it
//! records, and for `client` prints a canned report chosen per rail (`-d mlx5_N` is rail N,
//! `--netdev netN` rail N-1); `batch` runs clients from its input lines the way rdmabw's does
//! (recording its PID in batch.pids), unless a file `no-batch` says it is an older build.
//! `lat` (alone or in a batch) prints a latency report of p99 `lat-p99-[NODE-]IFACE` us (4 by
//! default), below threshold and exit 1 above its `--max-p99-us` as rdmabw lat; a file
//! `lat-fail-IFACE` makes it fail as a server without latency tests would. A
//! secret read with `--secret-stdin` goes to server-secret (the daemon's) or secrets.log (one
//! line per client or batch). A daemon given `--exit-on-stdin-eof` ends at the end of its
//! input and appends `eof` to server-end (a file `no-exit-flag`: it refuses the flag as an
//! older build would; a file `server-linger`: it ends that many seconds after its input; a
//! file `server-flood`: it prints lines as fast as it can for `flood-secs` seconds, and the
//! bytes it printed go to `flood-count`, as dd says them, as they do for the floods of
//! [`Behave`]). `rails` announces rdmabw's capabilities, less those a marker file
//! (`no-exit-flag`, `no-batch`, `no-bind`, `no-lat`) takes away.
//!
//! Per node ([`Fake::per_node`]): where its ancestors include a test cluster node agent
//! (`testcluster node --name NODE`), the fake knows its node; `rails` then reports that node's
//! own addresses, and a client reads the server's node from the address it is given, so a
//! behaviour or report set for one node ([`Fake::behave_on`], [`Fake::report_on`]) applies to
//! every pair that node is in, on either side, and a report set for two nodes
//! ([`Fake::report_between`]) to their pairs.
// Each test file uses part of it.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tempfile::TempDir;

/// How the fake client behaves on a rail.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy)]
pub enum Behave {
    /// Prints an ok report, exit 0.
    Ok,
    /// Prints a failed report, exit 2.
    Fail,
    /// Prints nothing, a connection error on stderr, exit 2.
    Crash,
    /// Sleeps 600 s (records its PID in hang-IFACE.pid).
    Hang,
    /// Fails the first time, then is ok.
    Once,
    /// Sleeps 1 s, then ok.
    Slow,
    /// Kills the server daemon (SIGKILL), then fails as a client whose peer died.
    KillServer,
    /// Prints a line of 3 MB (no newline until its end), then its ok report.
    Flood,
    /// For the seconds in the file `flood-secs` (10 if none): short lines on its stdout as
    /// fast as it can (the bytes, as dd counts them, in `flood-count`), then its ok report.
    FloodLines,
    /// The same on its stderr.
    FloodStderr,
    /// For the seconds in `flood-secs`: one line without a newline, then its ok report.
    FloodLine,
    /// Sleeps the seconds in `flood-secs`, then its ok report (a test as long as a flood of
    /// the server daemon's).
    Linger,
}

impl Behave {
    fn word(self) -> &'static str {
        match self {
            Behave::Ok => "ok",
            Behave::Fail => "fail",
            Behave::Crash => "crash",
            Behave::Hang => "hang",
            Behave::Once => "once",
            Behave::Slow => "slow",
            Behave::KillServer => "killsrv",
            Behave::Flood => "flood",
            Behave::FloodLines => "floodlines",
            Behave::FloodStderr => "floodstderr",
            Behave::FloodLine => "floodline",
            Behave::Linger => "linger",
        }
    }
}

/// `railsweep run` between two local network namespaces' worth of `-` pods, with the fake at
/// `fake` as rdmabw: what every local sweep of the tests starts with.
pub fn local_run(fake: &str) -> Vec<&str> {
    vec![
        "run",
        "--runner",
        "local",
        "--client-pod",
        "-",
        "--server-pod",
        "-",
        "--rdmabw",
        fake,
    ]
}

/// The fake and its data folder.
pub struct Fake {
    dir: PathBuf,
    /// The folder's owner where it is a temporary one ([`Fake::new`]): removed with the fake.
    _temp: Option<TempDir>,
}

/// The fake rdmabw's script, its folder as `@DIR@`.
const SCRIPT: &str = include_str!("fake-rdmabw.sh");

/// A fake perftest `ib_write_bw` (what it does: the comment at the top of its script), its
/// folder as `@DIR@`.
const IB_WRITE_BW: &str = include_str!("fake-ib_write_bw.sh");

pub fn rail(rail: u32, usable: bool) -> Value {
    json!({
        "rail": rail, "iface": format!("net{}", rail + 1), "ipv4": format!("10.224.{rail}.2"),
        "device": format!("mlx5_{rail}"), "port": 1, "gid_index": 3, "state": if usable { "ACTIVE" } else { "DOWN" },
        "link_layer": "Ethernet", "rate_gbps": 100.0, "active_mtu_bytes": 4096, "pci": null,
        "numa_node": null, "gpus": [], "attachment": "sriov", "usable": usable,
        "reason": if usable { Value::Null } else { json!("port state DOWN") },
    })
}

fn endpoint(host: &str, rail: u32, gid: u32) -> Value {
    json!({
        "host": host, "device": format!("mlx5_{rail}"), "port": 1, "gid_index": gid,
        "gid": "0000:0000:0000:0000:0000:ffff:0ae0:0002", "netdev": format!("net{}", rail + 1),
        "ipv4": format!("10.224.{rail}.2"), "active_mtu_bytes": 4096, "line_rate_gbps": 100.0,
    })
}

/// `rdmabw rails --json` of `host` with `rails`.
fn rails_doc(host: &str, rails: Vec<Value>) -> String {
    json!({
        "schema_version": 1, "rdmabw_version": "0.1.0", "host": host, "rails": rails, "not_rails": [],
    })
    .to_string()
}

/// The rail of interface `netN`: N - 1 (0 for another name).
fn rail_of(iface: &str) -> u32 {
    iface
        .trim_start_matches("net")
        .parse::<u32>()
        .map_or(0, |n| n.saturating_sub(1))
}

pub fn report(rail: u32, gbps: f64, failed: Option<&str>) -> Value {
    report_iters(rail, gbps, failed, 1000)
}

pub fn report_iters(rail: u32, gbps: f64, failed: Option<&str>, iterations: u64) -> Value {
    let results = if failed.is_some() {
        json!([])
    } else {
        json!([{
            "msg_size_bytes": 65536, "iterations": iterations, "bw_peak_gbps": gbps + 0.5,
            "bw_avg_gbps": gbps, "msg_rate_mpps": 0.18, "bw_p1_gbps": gbps - 1.0,
            "bw_p50_gbps": gbps, "bw_p99_gbps": gbps + 0.2, "interval_ms": 100,
            "measured_s": 1.0, "cpu_s": 0.9,
        }])
    };
    json!({
        "schema_version": 1, "rdmabw_version": "0.1.0", "role": "client",
        "params": {
            "sizes": { "one": { "msg_size_bytes": 65536 } },
            "length": { "duration": { "duration_s": 1.0, "warmup_s": 0.0, "cooldown_s": 0.0 } },
            "qps": 1, "connection": "RC", "bidirectional": false,
        },
        "tuning": {
            "tx_depth": 128, "cq_mod": 100, "post_list": 1, "inline_bytes": 0, "traffic_class": 41,
            "service_level": 0, "hop_limit": 64, "mtu_bytes": null, "ack_timeout": 14, "retry_count": 7,
        },
        "path_mtu_bytes": 4096, "memory": "host",
        "local": endpoint("podA", rail, 3), "remote": endpoint("podB", rail, 5),
        "results": results, "line_rate_gbps": 100.0,
        "line_rate_pct": if failed.is_some() { Value::Null } else { json!(gbps) },
        "threshold_gbps": null,
        "status": if failed.is_some() { "failed" } else { "ok" },
        "error": failed,
    })
}

impl Fake {
    /// A fake with `rails` rails, all usable and ok, in a temporary folder.
    pub fn new(rails: u32) -> Fake {
        let temp = tempfile::tempdir().expect("tempdir");
        Fake::install(temp.path().to_path_buf(), Some(temp), rails)
    }

    /// The same in `dir`, an existing folder that outlives the fake (scripts/bench-fleet's).
    pub fn in_dir(dir: &Path, rails: u32) -> Fake {
        Fake::install(dir.to_path_buf(), None, rails)
    }

    fn install(dir: PathBuf, temp: Option<TempDir>, rails: u32) -> Fake {
        let f = Fake { dir, _temp: temp };
        for (name, script) in [("rdmabw", SCRIPT), ("ib_write_bw", IB_WRITE_BW)] {
            f.write(name, &script.replace("@DIR@", &f.dir.display().to_string()));
            std::fs::set_permissions(f.file(name), std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        f.write("version", "rdmabw 0.1.0\n");
        f.set_rails((0..rails).map(|r| rail(r, true)).collect());
        for r in 0..rails {
            f.write(
                &format!("report-net{}.json", r + 1),
                &report(r, 96.0 + f64::from(r) / 10.0, None).to_string(),
            );
        }
        f.write(
            "report-fail.json",
            &report(0, 0.0, Some("the server refused the test: device busy")).to_string(),
        );
        f
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join("rdmabw")
    }

    /// The fake perftest `ib_write_bw` beside it.
    pub fn ib_write_bw(&self) -> PathBuf {
        self.dir.join("ib_write_bw")
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.join(name), text).expect("writes");
    }

    /// A file of its folder, empty when absent.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    pub fn set_rails(&self, rails: Vec<Value>) {
        self.write("rails.json", &rails_doc("fake", rails));
    }

    /// Make `rails` report the interfaces of the pod's network namespace whose names start with
    /// `prefix` (the rails a DRA driver moved in), rail 0 up in name order, without RDMA
    /// devices (so clients name `--netdev` and `--server-netdev`); a client on such a rail prints
    /// rail 0's report with those interfaces as its ends' netdevs.
    pub fn rails_from_links(&self, prefix: &str) {
        self.write("rails-links", prefix);
    }

    /// Make the fake claim another version, in `--version` and in its rails report.
    #[allow(dead_code)]
    pub fn set_version(&self, v: &str) {
        self.write("version", &format!("rdmabw {v}\n"));
        let path = self.dir.join("rails.json");
        let mut doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("reads")).expect("json");
        doc["rdmabw_version"] = json!(v);
        std::fs::write(path, doc.to_string()).expect("writes");
    }

    /// Make each of `nodes` (test cluster node names) report rail addresses of its own, so
    /// that behaviours and reports can be set per node. `rails` rails. Node i (from 1) has
    /// 10.(100 + rail).(i / 250).(i % 250 + 2) on each rail: room for a fleet of thousands.
    pub fn per_node(&self, nodes: &[&str], rails: u32) {
        for (i, node) in (1usize..).zip(nodes) {
            let list: Vec<Value> = (0..rails)
                .map(|r| {
                    let mut v = rail(r, true);
                    let ip = format!("10.{}.{}.{}", 100 + r, i / 250, i % 250 + 2);
                    self.write(&format!("node-at-{ip}"), node);
                    v["ipv4"] = json!(ip);
                    v
                })
                .collect();
            self.write(&format!("rails-{node}.json"), &rails_doc(node, list));
        }
        self.write("per-node", "");
    }

    /// How the client behaves on `iface` in every pair `node` is in (see [`Fake::per_node`]).
    pub fn behave_on(&self, node: &str, iface: &str, b: Behave) {
        self.write(&format!("behave-{node}-{iface}"), b.word());
    }

    /// The report of `iface` in every pair `node` is in: `gbps` (see [`Fake::per_node`]).
    pub fn report_on(&self, node: &str, iface: &str, gbps: f64) {
        self.write(
            &format!("report-{node}-{iface}.json"),
            &report(rail_of(iface), gbps, None).to_string(),
        );
    }

    /// The p99 latency `rdmabw lat` reports on `iface`, in every pair `node` is in (every pair,
    /// with `node` `None`).
    pub fn lat_p99(&self, node: Option<&str>, iface: &str, p99_us: f64) {
        let name = match node {
            Some(n) => format!("lat-p99-{n}-{iface}"),
            None => format!("lat-p99-{iface}"),
        };
        self.write(&name, &format!("{p99_us}"));
    }

    /// The report of `iface` in the pairs of `a` and `b` alone, either side the client: `gbps`
    /// (a pair's own report comes before each node's; see [`Fake::per_node`]).
    pub fn report_between(&self, a: &str, b: &str, iface: &str, gbps: f64) {
        let text = report(rail_of(iface), gbps, None).to_string();
        self.write(&format!("report-{a}-{b}-{iface}.json"), &text);
        self.write(&format!("report-{b}-{a}-{iface}.json"), &text);
    }

    /// Undo [`Fake::behave_on`].
    pub fn clear_on(&self, node: &str, iface: &str) {
        let _ = std::fs::remove_file(self.dir.join(format!("behave-{node}-{iface}")));
    }

    pub fn behave(&self, iface: &str, b: Behave) {
        self.write(&format!("behave-{iface}"), b.word());
    }

    #[allow(dead_code)]
    pub fn client_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("client-args.log")).unwrap_or_default()
    }

    /// The PIDs a file of its folder lists, one a line (none when it is absent).
    pub fn pids(&self, name: &str) -> Vec<u32> {
        self.read(name)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    pub fn pid_in(&self, name: &str) -> Option<u32> {
        std::fs::read_to_string(self.dir.join(name))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }
}

/// Whether every process of `pids` has ended within `limit` (a node agent ends what exec
/// started in a deleted pod after the pod's grace period).
pub async fn ended_within(pids: &[u32], limit: std::time::Duration) -> bool {
    let t0 = std::time::Instant::now();
    while pids.iter().any(|&p| alive(p)) {
        if t0.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    true
}

/// Whether a process is still there (and not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[allow(dead_code)]
pub fn exists(p: &Path) -> bool {
    p.exists()
}
