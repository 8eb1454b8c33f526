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
    pub dir: TempDir,
}

const SCRIPT: &str = r#"#!/bin/sh
dir=@DIR@
# The node this runs on: what the node agent says (TESTCLUSTER_NODE; one agent may host many
# nodes), else the --name of a node agent among its ancestors (empty elsewhere).
my_node() {
    [ -n "${TESTCLUSTER_NODE:-}" ] && { echo "$TESTCLUSTER_NODE"; return; }
    p=$$
    while [ "${p:-1}" -gt 1 ]; do
      n=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n '/^--name$/{n;p;q;}')
      [ -n "$n" ] && { echo "$n"; return; }
      p=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f2)
    done
}
# The seconds a flood lasts: the file flood-secs, else 10.
flood_secs() { cat "$dir/flood-secs" 2>/dev/null || echo 10; }
# The first of these files that exists.
first() { for f in "$@"; do [ -e "$f" ] && { echo "$f"; return; }; done; echo "$1"; }
# A rails report of this network namespace's interfaces named PREFIX*, in name order.
rails_from_links() {
    i=0; sep=""
    printf '{"schema_version":1,"rdmabw_version":"%s","host":"fake","rails":[' "$(sed 's/^rdmabw //' "$dir/version")"
    for n in $(ip -o link show | sed -n 's/^[0-9]*: \([^:@]*\).*/\1/p' | grep "^$1" | sort); do
      printf '%s{"rail":%d,"iface":"%s","ipv4":"10.225.%d.2","device":null,"port":null,"gid_index":null,"state":"ACTIVE","link_layer":"Ethernet","rate_gbps":100.0,"active_mtu_bytes":4096,"pci":null,"numa_node":null,"gpus":[],"attachment":"unknown","usable":true,"reason":null}' "$sep" "$i" "$n" "$i"
      sep=","; i=$((i + 1))
    done
    printf '],"not_rails":[]}\n'
}
# The report on standard input with the capabilities this build announces first: rdmabw's,
# less what a marker file (no-exit-flag, no-batch, no-bind, no-lat) says an older build lacks.
announce() {
    caps=""
    [ -e "$dir/no-exit-flag" ] || caps="$caps,\"exit-on-stdin-eof\""
    [ -e "$dir/no-batch" ] || caps="$caps,\"batch\""
    [ -e "$dir/no-bind" ] || caps="$caps,\"bind-addresses\""
    [ -e "$dir/no-lat" ] || caps="$caps,\"latency\""
    sed "1s/^{/{\"capabilities\":[${caps#,}],/"
}
# A latency report of p99 $1 us for interface $2, judged against --max-p99-us $3; exit 1 above.
lat_report() {
    p99=$1; nd=$2; max=$3
    st=ok; err=null; rc=0
    if [ -n "$max" ] && awk "BEGIN{exit !($p99 > $max)}"; then
      st=below_threshold; err="\"2 B: p99 latency $p99 us is above --max-p99-us $max\""; rc=1
    fi
    row="{\"role\":\"client\",\"device\":\"mlx5_0\",\"port\":1,\"gid_index\":3,\"netdev\":\"$nd\",\"remote_host\":\"10.224.0.2\",\"remote_device\":\"mlx5_0\",\"msg_size_bytes\":2,\"iterations\":1000,\"samples\":999,\"t_min_us\":1.0,\"t_max_us\":$p99,\"t_typical_us\":1.5,\"t_avg_us\":1.6,\"t_stdev_us\":0.2,\"t_p99_us\":$p99,\"t_p99_9_us\":$p99,\"p50_us\":1.5,\"p99_us\":$p99,\"p99_9_us\":$p99,\"max_us\":$p99,\"status\":\"$st\"}"
    printf '{"schema_version":1,"test":"latency","role":"client","params":{"sizes":{"one":{"msg_size_bytes":2}},"length":{"iterations":{"iterations":1000}},"qps":1,"connection":"RC","bidirectional":false,"latency":true},"path_mtu_bytes":4096,"max_p99_us":%s,"results":[%s],"peer_results":[],"status":"%s","error":%s}\n' \
      "${max:-null}" "$row" "$st" "$err"
    return $rc
}
client() {
    nd=""; snd=""; prev=""; last=""; maxp99=""
    for a in "$@"; do
      [ "$prev" = "--netdev" ] && nd=$a
      [ "$prev" = "--server-netdev" ] && snd=$a
      [ "$prev" = "-d" ] && nd=net$(( ${a#mlx5_} + 1 ))
      [ "$prev" = "--max-p99-us" ] && maxp99=$a
      prev=$a; last=$a
    done
    echo "$*" >>"$dir/client-args.log"
    case " $* " in *" --secret-stdin "*) IFS= read -r s; echo "$s" >>"$dir/secrets.log" ;; esac
    me=""; peer=""
    if [ -e "$dir/per-node" ]; then
      me=$(my_node); peer=$(cat "$dir/node-at-$last" 2>/dev/null)
    fi
    if [ "$1" = lat ]; then
      [ -e "$dir/lat-fail-$nd" ] && {
        echo "rdmabw: error: the server runs no latency tests (an older rdmabw)" >&2; return 2; }
      lat_report "$(cat "$(first "$dir/lat-p99-$me-$nd" "$dir/lat-p99-$peer-$nd" "$dir/lat-p99-$nd")" 2>/dev/null || echo 4.0)" "$nd" "${maxp99:-}"
      return $?
    fi
    b=$(cat "$(first "$dir/behave-$me-$nd" "$dir/behave-$peer-$nd" "$dir/behave-$nd")" 2>/dev/null || echo ok)
    rep=$(first "$dir/report-$me-$peer-$nd.json" "$dir/report-$me-$nd.json" "$dir/report-$peer-$nd.json" "$dir/report-$nd.json")
    if [ -e "$dir/rails-links" ] && [ ! -e "$rep" ]; then
      # Rails from the namespace's links: rail 0's report, with these interfaces (local first).
      sed -e "s/\"netdev\":\"net1\"/\"netdev\":\"$nd\"/" -e "s/\"netdev\":\"net1\"/\"netdev\":\"$snd\"/" \
        "$dir/report-net1.json" >"$dir/report-links-$$.json"
      rep="$dir/report-links-$$.json"
    fi
    # Against perftest's server (--peer perftest) the report names its peer, as rdmabw's does,
    # and not the server's device or GID index (empty and u32::MAX, as rdmabw's).
    case " $* " in *" --peer perftest "*)
      sed -e '1s/^{/{"peer":{"tool":"perftest","version":"6.24"},/' \
        -e 's/"remote":{"active_mtu_bytes":\([0-9]*\),"device":"[^"]*","gid":"\([^"]*\)","gid_index":[0-9]*/"remote":{"active_mtu_bytes":\1,"device":"","gid":"\2","gid_index":4294967295/' \
        "$rep" >"$dir/report-perftest-$$.json"
      rep="$dir/report-perftest-$$.json" ;; esac
    case "$b" in
      ok) cat "$rep" ;;
      fail) cat "$dir/report-fail.json"; return 2 ;;
      crash) echo "rdmabw: error: cannot connect to the server: connection refused" >&2; return 2 ;;
      hang) echo $$ >"$dir/hang-$nd.pid"; exec sleep 600 ;;
      once) echo ok >"$dir/behave-$nd"; cat "$dir/report-fail.json"; return 2 ;;
      slow) sleep 1; cat "$rep" ;;
      flood) head -c 3000000 /dev/zero | tr '\0' x; echo; cat "$rep" ;;
      floodlines) timeout "$(flood_secs)" yes "rdmabw: a line of a flood" | dd bs=64k 2>"$dir/flood-count"
        cat "$rep" ;;
      floodstderr) timeout "$(flood_secs)" yes "rdmabw: a line of a flood" | dd bs=64k >&2 2>"$dir/flood-count"
        cat "$rep" ;;
      linger) sleep "$(flood_secs)"; cat "$rep" ;;
      floodline) timeout "$(flood_secs)" tr '\0' x </dev/zero | dd bs=64k 2>"$dir/flood-count"
        echo; cat "$rep" ;;
      killsrv) kill -9 "$(cat "$dir/server.pid")"; sleep 0.3
        echo "rdmabw: error: the server stopped answering (no heartbeat for 1.5 s)" >&2; return 2 ;;
    esac
}
case "$1" in
  --version) cat "$dir/version" ;;
  rails)
    if [ -e "$dir/rails-links" ]; then rails_from_links "$(cat "$dir/rails-links")"
    elif [ -e "$dir/per-node" ]; then cat "$(first "$dir/rails-$(my_node).json" "$dir/rails.json")"
    else cat "$dir/rails.json"; fi | announce ;;
  server)
    # A one-test server for perftest's client (--client-tool ib_write_bw): it records its
    # arguments (pt-server-args.log) and PID (pt-server.pids), says it listens as rdmabw's does,
    # waits for the fake ib_write_bw client's mark pt-client-PORT (or forever), then prints the
    # server's report of that rail: the client's figures, without window or samples. A file
    # pt-server-fail makes it fail at once as one whose address is taken.
    case " $* " in *" --peer perftest "*)
      echo "$*" >>"$dir/pt-server-args.log"; echo $$ >>"$dir/pt-server.pids"
      prev=""; port=""; nd=""; addr=""
      for a in "$@"; do
        [ "$prev" = "-p" ] && port=$a
        [ "$prev" = "--bind" ] && addr=$a
        [ "$prev" = "-d" ] && nd=net$(( ${a#mlx5_} + 1 ))
        prev=$a
      done
      [ -e "$dir/pt-server-fail" ] && {
        echo "rdmabw: error: --bind $addr: cannot listen on port $port: address in use" >&2
        sed -e 's/"role":"client"/"role":"server"/' \
          -e "s/\"error\":\"[^\"]*\"/\"error\":\"--bind $addr: cannot listen on port $port: address in use\"/" \
          "$dir/report-fail.json"; exit 2; }
      echo "rdmabw server: listening on $addr:$port" >&2
      while [ ! -e "$dir/pt-client-$port" ]; do sleep 0.05; done
      sed -e 's/"role":"client"/"role":"server"/' -e '1s/^{/{"peer":{"tool":"perftest","version":"6.24"},/' \
        -e 's/"interval_ms":[0-9]*/"interval_ms":0/' -e 's/"measured_s":[0-9.]*/"measured_s":0.0/' \
        "$dir/report-$nd.json"
      exit 0 ;; esac
    case " $* " in *" --exit-on-stdin-eof "*) [ -e "$dir/no-exit-flag" ] && {
      echo "error: unexpected argument '--exit-on-stdin-eof' found" >&2; exit 2; } ;; esac
    echo $$ >"$dir/server.pid"; echo $$ >>"$dir/server.pids"; echo "$*" >"$dir/server-args"
    case " $* " in *" --secret-stdin "*) IFS= read -r s; echo "$s" >"$dir/server-secret" ;; esac
    # A file server-flood: the daemon prints lines as fast as it can for flood-secs seconds.
    [ -e "$dir/server-flood" ] && { timeout "$(flood_secs)" yes "rdmabw: a daemon's flood" \
      | dd bs=64k 2>"$dir/flood-count" & }
    # As rdmabw's: with the flag it stops at the end of its input (and says so in server-end).
    case " $* " in *" --exit-on-stdin-eof "*) cat >/dev/null 2>&1; echo eof >>"$dir/server-end"
      [ -e "$dir/server-linger" ] && sleep "$(cat "$dir/server-linger")"; exit 0 ;; esac
    exec sleep 600 ;;
  client|lat) client "$@"; exit $? ;;
  batch)
    [ -e "$dir/no-batch" ] && { echo "error: unrecognized subcommand 'batch'" >&2; exit 2; }
    echo $$ >>"$dir/batch.pids"
    [ "$2" = --secret-stdin ] && { IFS= read -r s; echo "$s" >>"$dir/secrets.log"; }
    n=0
    # railsweep's argument vectors hold no quotes, commas or spaces: split the JSON array.
    while IFS= read -r line; do
      n=$((n + 1))
      # shellcheck disable=SC2046
      set -- $(printf '%s' "$line" | sed -e 's/^\[//' -e 's/\]$//' -e 's/","/ /g' -e 's/"//g')
      client "$@"; rc=$?
      echo "rdmabw-batch-end {\"test\":$n,\"exit_code\":$rc}"
      echo "rdmabw-batch-end {\"test\":$n,\"exit_code\":$rc}" >&2
    done ;;
  *) echo "fake rdmabw: unknown command $1" >&2; exit 2 ;;
esac
"#;

/// A fake perftest `ib_write_bw` server: it records its arguments (ib_write_bw-args.log) and PID
/// (ib_write_bw.pids), serves its one test in 0.2 s and exits 0; a file `ib_write_bw-fail`
/// makes it fail at once as one whose port is taken, `ib_write_bw-hang` makes it wait forever
/// (as a server whose client never came).
///
/// Given a server's address (its last argument), it is perftest's client instead: it records
/// its arguments (ib_write_bw-client-args.log), marks pt-client-PORT for the fake rdmabw
/// server of that port, prints its table and exits 0; a file `ib_write_bw-client-fail` makes
/// it fail as a client that could not connect.
const IB_WRITE_BW: &str = r#"#!/bin/sh
dir=@DIR@
for last in "$@"; do :; done
case "$last" in [0-9]*.*)
  echo "$*" >>"$dir/ib_write_bw-client-args.log"
  prev=""; port=""
  for a in "$@"; do [ "$prev" = "-p" ] && port=$a; prev=$a; done
  [ -e "$dir/ib_write_bw-client-fail" ] && { echo " Couldn't connect to $last:$port" >&2; exit 1; }
  : >"$dir/pt-client-$port"
  echo " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
  exit 0 ;;
esac
echo "$*" >>"$dir/ib_write_bw-args.log"
echo $$ >>"$dir/ib_write_bw.pids"
[ -e "$dir/ib_write_bw-fail" ] && { echo " Couldn't listen to port 18515" >&2; exit 1; }
[ -e "$dir/ib_write_bw-hang" ] && exec sleep 600
sleep 0.2
echo " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
exit 0
"#;

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
    /// A fake with `rails` rails, all usable and ok.
    pub fn new(rails: u32) -> Fake {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = SCRIPT.replace("@DIR@", &dir.path().display().to_string());
        let bin = dir.path().join("rdmabw");
        std::fs::write(&bin, script).expect("writes");
        std::process::Command::new("chmod")
            .arg("755")
            .arg(&bin)
            .status()
            .expect("chmod");
        let perftest = dir.path().join("ib_write_bw");
        std::fs::write(
            &perftest,
            IB_WRITE_BW.replace("@DIR@", &dir.path().display().to_string()),
        )
        .expect("writes");
        std::process::Command::new("chmod")
            .arg("755")
            .arg(&perftest)
            .status()
            .expect("chmod");
        let f = Fake { dir };
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
        self.dir.path().join("rdmabw")
    }

    /// The fake perftest `ib_write_bw` beside it.
    pub fn ib_write_bw(&self) -> PathBuf {
        self.dir.path().join("ib_write_bw")
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.path().join(name), text).expect("writes");
    }

    /// A file of its folder, empty when absent.
    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    pub fn set_rails(&self, rails: Vec<Value>) {
        let doc = json!({
            "schema_version": 1, "rdmabw_version": "0.1.0", "host": "fake", "rails": rails, "not_rails": [],
        });
        self.write("rails.json", &doc.to_string());
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
        let path = self.dir.path().join("rails.json");
        let mut doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("reads")).expect("json");
        doc["rdmabw_version"] = json!(v);
        std::fs::write(path, doc.to_string()).expect("writes");
    }

    /// Make each of `nodes` (test cluster node names) report rail addresses of its own, so
    /// that behaviours and reports can be set per node. `rails` rails.
    pub fn per_node(&self, nodes: &[&str], rails: u32) {
        for (i, node) in nodes.iter().enumerate() {
            let host = 10 + i;
            let list: Vec<Value> = (0..rails)
                .map(|r| {
                    let mut v = rail(r, true);
                    let ip = format!("10.224.{r}.{host}");
                    self.write(&format!("node-at-{ip}"), node);
                    v["ipv4"] = json!(ip);
                    v
                })
                .collect();
            let doc = json!({
                "schema_version": 1, "rdmabw_version": "0.1.0", "host": node, "rails": list, "not_rails": [],
            });
            self.write(&format!("rails-{node}.json"), &doc.to_string());
        }
        self.write("per-node", "");
    }

    /// How the client behaves on `iface` in every pair `node` is in (see [`Fake::per_node`]).
    pub fn behave_on(&self, node: &str, iface: &str, b: Behave) {
        self.write(&format!("behave-{node}-{iface}"), b.word());
    }

    /// The report of `iface` in every pair `node` is in: `gbps` (see [`Fake::per_node`]).
    pub fn report_on(&self, node: &str, iface: &str, gbps: f64) {
        let rail: u32 = iface
            .trim_start_matches("net")
            .parse::<u32>()
            .map_or(0, |n| n.saturating_sub(1));
        self.write(
            &format!("report-{node}-{iface}.json"),
            &report(rail, gbps, None).to_string(),
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
        let rail: u32 = iface
            .trim_start_matches("net")
            .parse::<u32>()
            .map_or(0, |n| n.saturating_sub(1));
        let text = report(rail, gbps, None).to_string();
        self.write(&format!("report-{a}-{b}-{iface}.json"), &text);
        self.write(&format!("report-{b}-{a}-{iface}.json"), &text);
    }

    /// Undo [`Fake::behave_on`].
    pub fn clear_on(&self, node: &str, iface: &str) {
        let _ = std::fs::remove_file(self.dir.path().join(format!("behave-{node}-{iface}")));
    }

    pub fn behave(&self, iface: &str, b: Behave) {
        self.write(&format!("behave-{iface}"), b.word());
    }

    #[allow(dead_code)]
    pub fn client_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("client-args.log")).unwrap_or_default()
    }

    pub fn pid_in(&self, name: &str) -> Option<u32> {
        std::fs::read_to_string(self.dir.path().join(name))
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
