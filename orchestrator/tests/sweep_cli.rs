//! `railsweep run` end to end on the built binary, with a fake rdmabw, through the local runner
//! on this machine's own namespace (`-`). The same sweep through the Kubernetes runner is in
//! `cluster/sweep_cluster.rs` (it needs the control plane; this binary runs in `scripts/test --quick`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use results::{read_path, MemoryKind, RailResult, RailStatus};
use support::fake::{alive, exists, local_run, rail, Behave, Fake};
use support::process::{self, assert_says, railsweep, text};

fn local_args<'a>(fake: &'a str, out: &'a str) -> Vec<&'a str> {
    let mut v = local_run(fake);
    v.extend([
        "--window",
        "1",
        "--tclass",
        "41",
        "--output-file",
        out,
        "--port",
        "18999",
    ]);
    v
}

/// The sweep's CSV in the fake's folder, and the fake's path and that CSV's as
/// [`local_args`] takes them.
fn paths(f: &Fake) -> (PathBuf, String, String) {
    let out = f.file("sweep.csv");
    let (bin, o) = (s(&f.path()), s(&out));
    (out, bin, o)
}

/// The rows of a sweep that ended 0 (its output shown otherwise): rails 0 to `rails` - 1.
/// railsweep over `f`'s rails into its sweep.csv, as [`local_args`] with `extra` flags: its
/// output, and the CSV's path.
fn sweep(f: &Fake, extra: &[&str]) -> (Output, PathBuf) {
    let (out, bin, o) = paths(f);
    let mut args = local_args(&bin, &o);
    args.extend(extra);
    (railsweep(&args), out)
}

/// A sweep as [`sweep`]'s, interrupted (SIGINT) once `ready` holds, which it must within 20 s
/// (else the test fails saying `never`): it exits 130. Its output, and the CSV's path.
fn sweep_interrupted(f: &Fake, ready: impl Fn() -> bool, never: &str) -> (Output, PathBuf) {
    let (out, bin, o) = paths(f);
    let child = process::start(&local_args(&bin, &o));
    let t0 = Instant::now();
    while !ready() {
        assert!(t0.elapsed() < Duration::from_secs(20), "{never}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, o) = process::interrupt(child, Duration::from_secs(15));
    assert_eq!(status, Some(130), "{}", text(&o.stderr));
    (o, out)
}

/// [`sweep`] with `extra` flags one rail at a time, then every rail at once (`--parallel`),
/// each after removing the files in `written` (the one before's): each must end 1 (a rail
/// failed), and `check` is given its stderr and its rows.
fn sweep_each_way(
    f: &Fake,
    extra: &[&str],
    written: &[&Path],
    mut check: impl FnMut(&str, Vec<RailResult>),
) {
    for parallel in [false, true] {
        for p in written {
            let _ = std::fs::remove_file(p);
        }
        let mut args = extra.to_vec();
        if parallel {
            args.push("--parallel");
        }
        let (r, out) = sweep(f, &args);
        let stderr = text(&r.stderr);
        assert_eq!(r.status.code(), Some(1), "parallel {parallel}: {stderr}");
        check(&stderr, read_path(&out).expect("csv reads"));
    }
}

fn ok_rows(r: &Output, out: &Path, rails: u32) -> Vec<RailResult> {
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(
        r.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let rows = read_path(out).expect("csv reads");
    let want: Vec<u32> = (0..rails).collect();
    assert_eq!(rows.iter().map(|r| r.rail).collect::<Vec<_>>(), want);
    rows
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn every_rail_gets_a_row_and_the_daemon_is_ended() {
    let f = Fake::new(4);
    let (r, out) = sweep(&f, &[]);
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    let rows = ok_rows(&r, &out, 4);
    assert!(rows.iter().all(|r| r.status == RailStatus::Ok));
    assert_eq!(rows[2].bw_avg_gbps, Some(96.2));
    assert_eq!(rows[0].client_gid_index, Some(3));
    assert_eq!(rows[0].server_gid_index, Some(5));
    assert_eq!(rows[0].traffic_class, Some(41));
    assert_eq!(
        rows[0].network_mode.as_str(),
        "sriov",
        "inferred from the rails' attachment"
    );
    assert!(
        stdout.contains("96.20") && stdout.contains("sriov: 4 rails"),
        "{stdout}"
    );
    // The client got each rail's interfaces and the server's rail address.
    let log = f.client_log();
    assert!(
        log.contains("-d mlx5_2 -x 3 --server-dev mlx5_2 --server-gid-index 3 -p 18999 --tclass 41 10.224.2.2"),
        "{log}"
    );
    // One daemon served every rail, listening on the server's rail addresses only, and it
    // is gone.
    let server_args = std::fs::read_to_string(f.file("server-args")).expect("daemon ran");
    assert_eq!(
        server_args.trim(),
        "server --daemon -p 18999 --secret-stdin --exit-on-stdin-eof \
         --bind 10.224.0.2,10.224.1.2,10.224.2.2,10.224.3.2"
    );
    // The daemon and the batch read one secret from their input, and no argument carries it.
    let secret = std::fs::read_to_string(f.file("server-secret")).expect("daemon's secret");
    let secret = secret.trim();
    assert!(
        secret.len() == 32 && secret.chars().all(|c| c.is_ascii_hexdigit()),
        "{secret:?}"
    );
    assert_eq!(f.read("secrets.log").trim(), secret);
    assert!(!log.contains(secret) && !server_args.contains(secret));
    let pid = f.pid_in("server.pid").expect("pid");
    assert!(!alive(pid), "the server daemon {pid} was ended");
    // By the end of its input (railsweep closed it), not by a signal.
    assert_eq!(f.read("server-end"), "eof\n", "{stderr}");
    assert!(!stderr.contains("did not stop"), "{stderr}");
    assert!(!stderr.contains("no --tclass"), "{stderr}");
    // One client process (`rdmabw batch`) ran the four tests, and it is gone too.
    let batches = f.pids("batch.pids");
    assert_eq!(batches.len(), 1, "{batches:?}");
    assert!(!alive(batches[0]), "the batch {} ended", batches[0]);
    assert_eq!(log.lines().count(), 4, "{log}");
}

#[test]
fn test_bw_lat_measures_each_rails_latency_after_its_bandwidth() {
    let f = Fake::new(3);
    f.lat_p99(None, "net2", 45.0);
    f.write("lat-fail-net3", "");
    let (r, out) = sweep(
        &f,
        &[
            "--test",
            "bw,lat",
            "--max-p99-us",
            "20",
            "--lat-iters",
            "200",
        ],
    );
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    // A rail above --max-p99-us and one whose latency failed: exit 1.
    assert_eq!(
        r.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let rows = read_path(&out).expect("csv reads");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].status, RailStatus::Ok);
    assert_eq!(
        (rows[0].lat_p50_us, rows[0].lat_p99_us, rows[0].lat_max_us),
        (Some(1.5), Some(4.0), Some(4.0))
    );
    assert_eq!(rows[1].status, RailStatus::BelowThreshold);
    assert_eq!(rows[1].bw_avg_gbps, Some(96.1), "the bandwidth stays");
    assert_eq!(rows[1].lat_p99_us, Some(45.0));
    assert_eq!(
        rows[1].error.as_deref(),
        Some("p99 latency 45.00 us is above --max-p99-us 20")
    );
    assert_eq!(rows[2].status, RailStatus::Failed);
    assert_eq!(rows[2].bw_avg_gbps, Some(96.2));
    let e = rows[2].error.clone().unwrap_or_default();
    assert!(
        e.starts_with("latency: ") && e.contains("no latency tests"),
        "{e}"
    );
    // The table has the latency column, the summary the p99 range.
    assert!(stdout.contains("lat p50/p99/max us"), "{stdout}");
    assert!(stdout.contains("1.50/4.00/4.00"), "{stdout}");
    assert!(stdout.contains("p99 latency 4.00 to 45.00 us"), "{stdout}");
    // Each rail ran its bandwidth test, then its latency test, through the one batch and
    // the one daemon; the latency test with the rail's ends and path settings only.
    let log = f.client_log();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6, "{log}");
    assert!(lines[0].starts_with("client --json --window 1 "), "{log}");
    assert_eq!(
        lines[1],
        "lat --json -d mlx5_0 -x 3 --server-dev mlx5_0 --server-gid-index 3 -p 18999 \
         --tclass 41 -n 200 --max-p99-us 20 10.224.0.2"
    );
    assert_eq!(f.pids("batch.pids").len(), 1);
    assert_eq!(f.read("server-end"), "eof\n", "{stderr}");
}

/// `--test bw,lat` with an rdmabw that does not announce `latency` (an older build): a set-up
/// error naming the pod, its version and the fix, before any rail; without lat the same rdmabw
/// is swept.
#[test]
fn test_bw_lat_refuses_an_rdmabw_without_the_latency_test() {
    let f = Fake::new(2);
    f.write("no-lat", "");
    f.set_version("0.1.0+0ld0ne");
    let (r, out) = sweep(&f, &["--test", "bw,lat"]);
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--test bw,lat: pod ")
            && stderr.contains("has rdmabw 0.1.0+0ld0ne, which does not announce the latency test")
            && stderr.contains("leave out --test bw,lat"),
        "{stderr}"
    );
    assert!(f.client_log().is_empty(), "no test ran");
    assert!(!exists(&out), "no rows");
    let (r, _) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
}

#[test]
fn latency_alone_or_its_flags_without_it_are_refused() {
    let f = Fake::new(1);
    for (extra, said) in [
        (
            &["--test", "lat"][..],
            "--test lat: railsweep measures the bandwidth",
        ),
        (
            &["--max-p99-us", "5"][..],
            "--max-p99-us judges the latency: give --test bw,lat",
        ),
        (&["--test", "bw,rtt"][..], "expected a list of bw and lat"),
        (
            &["--lat-iters", "200"][..],
            "--lat-iters sets the latency test's exchanges: give --test bw,lat",
        ),
        (
            &["--test", "bw,lat", "--lat-iters", "4"][..],
            "expected a number of exchanges, at least 5 (as ib_write_lat -n), got `4`",
        ),
    ] {
        let (r, _) = sweep(&f, extra);
        assert_eq!(r.status.code(), Some(2), "{extra:?}: {}", text(&r.stderr));
        assert!(
            text(&r.stderr).contains(said),
            "{extra:?}: {}",
            text(&r.stderr)
        );
    }
    assert!(f.client_log().is_empty());
}

/// A sweep of 3 rails with a fake rdmabw that lacks what `marker` names (an older build): all
/// rails still measured, and `said` said once on stderr. The fake and that stderr.
fn sweep_with_an_older_rdmabw(marker: &str, said: &str) -> (Fake, String) {
    let f = Fake::new(3);
    f.write(marker, "");
    let (r, out) = sweep(&f, &[]);
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let rows = read_path(&out).expect("csv reads");
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|r| r.status == RailStatus::Ok), "{rows:?}");
    assert_eq!(stderr.matches(said).count(), 1, "said once: {stderr}");
    (f, stderr)
}

#[test]
fn an_rdmabw_without_exit_on_stdin_eof_gets_a_daemon_stopped_by_signal() {
    let (f, _) = sweep_with_an_older_rdmabw("no-exit-flag", "has no --exit-on-stdin-eof");
    assert_eq!(
        f.read("server-args").trim(),
        "server --daemon -p 18999 --secret-stdin --bind 10.224.0.2,10.224.1.2,10.224.2.2"
    );
    let pid = f.pid_in("server.pid").expect("pid");
    assert!(!alive(pid), "the server daemon {pid} was stopped");
    assert_eq!(f.read("server-end"), "", "not by its input");
}

#[test]
fn an_rdmabw_that_binds_one_address_gets_a_daemon_on_every_address() {
    let (f, _) = sweep_with_an_older_rdmabw("no-bind", "its daemon listens on every address");
    assert_eq!(
        f.read("server-args").trim(),
        "server --daemon -p 18999 --secret-stdin --exit-on-stdin-eof"
    );
}

#[test]
fn an_rdmabw_without_batch_gets_one_client_per_rail() {
    let (f, _) = sweep_with_an_older_rdmabw("no-batch", "has no `batch` command");
    let bin = s(&f.path());
    assert_eq!(f.client_log().lines().count(), 3);
    // Each client process read the daemon's secret from its input.
    let secret = f.read("server-secret");
    let secrets = f.read("secrets.log");
    assert_eq!(secrets.lines().count(), 3, "{secrets}");
    assert!(secrets.lines().all(|l| l == secret.trim()), "{secrets}");
    // A second sweep has a secret of its own.
    let o2 = s(&f.file("sweep2.csv"));
    let r = railsweep(&local_args(&bin, &o2));
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert_ne!(f.read("server-secret"), secret);
}

#[test]
fn metrics_file_has_a_sample_per_rail() {
    let f = Fake::new(3);
    let (out, prom) = (f.file("sweep.csv"), f.file("rails.prom"));
    let (bin, o, m) = (s(&f.path()), s(&out), s(&prom));
    let mut args = local_args(&bin, &o);
    args.extend(["--metrics", &m]);
    let r = railsweep(&args);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let text = std::fs::read_to_string(&prom).expect("metrics written");
    let oks: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("railbench_rail_ok{"))
        .collect();
    assert_eq!(oks.len(), 3, "{text}");
    assert!(oks.iter().all(|l| l.ends_with(" 1.0")), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert_says(&r.stderr, "metrics in ");
}

#[test]
fn nothing_to_measure_is_a_set_up_error_naming_the_probe() {
    // Issue 33: pods without rails gave an empty table and exit 0.
    let f = Fake::new(0);
    let (r, _) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
    assert_says(
        &r.stderr,
        "nothing to measure: pod - has no rail, pod - has no rail",
    );
    assert_says(&r.stderr, "rdmabw probe");
}

#[test]
fn a_dry_run_refuses_the_test_flags_a_run_refuses() {
    let r = railsweep(&[
        "run",
        "--dry-run",
        "--mode",
        "hostnetwork",
        "--nodes",
        "a,b",
        "-m",
        "1500",
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
    assert_says(
        &r.stderr,
        "'1500' for '--mtu <BYTES>': expected 256, 512, 1024, 2048 or 4096",
    );
}

/// Issue 33: a perftest command line pasted into railsweep: its harmless flags are taken, its
/// rail flags are refused by name with what to use.
#[test]
fn perftests_flags_are_taken_or_refused_by_name() {
    let f = Fake::new(1);
    let (r, _) = sweep(&f, &["-F", "--report_gbits"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    for (flag, says) in [
        ("-x", "-x/--gid-index: "),
        ("-d", "-d/--ib-dev: "),
        ("-i", "-i/--ib-port: "),
    ] {
        let (r, _) = sweep(&f, &[flag, "3"]);
        assert_eq!(r.status.code(), Some(2), "{flag}: {}", text(&r.stderr));
        assert_says(&r.stderr, says);
        assert_says(&r.stderr, "--rails 0,3");
    }
}

#[test]
fn no_tclass_warns() {
    let f = Fake::new(1);
    let (_, bin, o) = paths(&f);
    let mut args = local_args(&bin, &o);
    args.retain(|a| *a != "--tclass" && *a != "41");
    let r = railsweep(&args);
    assert_eq!(r.status.code(), Some(0));
    assert_says(&r.stderr, "warning: no --tclass");
}

#[test]
fn a_failed_rail_is_recorded_and_the_others_are_measured() {
    let f = Fake::new(4);
    f.set_rails(vec![
        rail(0, true),
        rail(1, true),
        rail(2, false),
        rail(3, true),
    ]);
    f.behave("net4", Behave::Crash);
    f.behave("net2", Behave::Fail);
    let (r, out) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let rows = read_path(&out).expect("csv reads");
    let st: Vec<RailStatus> = rows.iter().map(|r| r.status).collect();
    assert_eq!(
        st,
        vec![
            RailStatus::Ok,
            RailStatus::Failed,
            RailStatus::Failed,
            RailStatus::Failed
        ]
    );
    let err = |i: usize| rows[i].error.clone().unwrap_or_default();
    assert!(err(1).contains("device busy"), "{}", err(1));
    assert!(
        err(2).contains("not usable") && err(2).contains("port state DOWN"),
        "{}",
        err(2)
    );
    assert!(err(3).contains("connection refused"), "{}", err(3));
    assert!(
        !f.client_log().contains("-d mlx5_2 "),
        "the unusable rail was not run"
    );
    assert_says(&r.stdout, "rail 2 failed: ");
}

/// Issue 56: a rail whose interface is down in the pod cost the whole settle wait (8 s) for a
/// GID that cannot come. rdmabw's rails report says the interface is down (`operstate`): the
/// rail fails at once, in the node's set-up, its evidence naming the interface; the other rail
/// is measured.
#[test]
fn a_rail_whose_interface_is_down_fails_at_once_in_the_nodes_set_up() {
    let f = Fake::new(2);
    let mut down = rail(1, false);
    down["gid_index"] = serde_json::Value::Null;
    down["operstate"] = serde_json::json!("down");
    down["reason"] = serde_json::json!(
        "interface net2 is down (operstate down); no RoCE v2 GID of net2's address 10.224.1.2 on mlx5_1 port 1 in this namespace"
    );
    f.set_rails(vec![rail(0, true), down]);
    let t0 = Instant::now();
    let (r, out) = sweep(&f, &[]);
    let took = t0.elapsed();
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("not up yet"), "it waited:\n{stderr}");
    assert!(
        took < Duration::from_secs(6),
        "took {took:?}, the settle wait is 8 s:\n{stderr}"
    );
    let rows = read_path(&out).expect("csv reads");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].status, RailStatus::Ok);
    let one = &rows[1];
    assert_eq!(one.status, RailStatus::Failed);
    assert_eq!(one.layer, Some(results::Layer::NodeSetup), "{one:?}");
    let evidence = one.evidence.clone().unwrap_or_default();
    assert!(evidence.contains("interface net2 is down"), "{evidence}");
    assert!(
        !f.client_log().contains("-d mlx5_1 "),
        "the rail that is down was not run"
    );
}

#[test]
fn a_window_without_a_completed_write_is_no_measurement() {
    let f = Fake::new(2);
    f.write(
        "report-net2.json",
        &support::fake::report_iters(1, 0.0, None, 0).to_string(),
    );
    let (r, out) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let rows = read_path(&out).expect("csv reads");
    assert_eq!(rows[1].status, RailStatus::Failed);
    assert!(
        rows[1]
            .error
            .as_deref()
            .unwrap_or("")
            .contains("0 iterations"),
        "{:?}",
        rows[1].error
    );
    assert_says(&r.stdout, "rail 1 failed: ");
}

#[test]
fn a_hanging_rail_ends_at_its_deadline() {
    let f = Fake::new(3);
    f.behave("net2", Behave::Hang);
    let t0 = Instant::now();
    let (r, out) = sweep(&f, &["--deadline-slack", "1"]);
    let took = t0.elapsed();
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    assert!(took < Duration::from_secs(8), "took {took:?}");
    let rows = read_path(&out).expect("csv reads");
    assert_eq!(rows.len(), 3);
    let e = rows[1].error.clone().unwrap_or_default();
    assert!(e.contains("deadline of 2 s"), "{e}");
    assert_eq!(rows[2].status, RailStatus::Ok, "the sweep went on");
    let pid = f.pid_in("hang-net2.pid").expect("hung client pid");
    assert!(!alive(pid), "the hung client {pid} was stopped");
    // The batch that hung was stopped; a new one took the next rail.
    let batches = f.pids("batch.pids");
    assert_eq!(batches.len(), 2, "{batches:?}");
    assert_eq!(batches[0], pid);
    assert!(batches.iter().all(|p| !alive(*p)), "{batches:?}");
}

#[test]
fn a_server_killed_mid_sweep_is_reported_and_restarted() {
    let f = Fake::new(3);
    f.behave("net2", Behave::KillServer);
    let first_daemon = || f.pid_in("server.pid");
    let (r, out) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let rows = read_path(&out).expect("reads");
    let e = rows[1].error.clone().unwrap_or_default();
    assert!(
        e.contains("no heartbeat") && e.contains("server daemon") && e.contains("had ended"),
        "{e}"
    );
    assert_eq!(
        rows[2].status,
        RailStatus::Ok,
        "a new daemon served the next rail"
    );
    assert!(text(&r.stderr).contains("starting it again") || e.contains("had ended"));
    assert!(!alive(first_daemon().expect("pid")));
}

#[test]
fn retries_run_a_failed_rail_again() {
    let f = Fake::new(2);
    f.behave("net1", Behave::Once);
    let (r, _) = sweep(&f, &["--retries", "1"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert_eq!(f.client_log().matches("-d mlx5_0 ").count(), 2);
    assert_says(&r.stderr, "attempt 2 of 2");
}

#[test]
fn resume_measures_only_the_missing_rails() {
    let f = Fake::new(4);
    assert_eq!(sweep(&f, &["--rails", "0,1"]).0.status.code(), Some(0));
    // Without --resume an existing file is refused.
    let (again, _) = sweep(&f, &[]);
    assert_eq!(again.status.code(), Some(2));
    assert_says(&again.stderr, "--resume");

    std::fs::remove_file(f.file("client-args.log")).expect("rm");
    let (out, bin, o) = paths(&f);
    let mut args = local_args(&bin, &o);
    let pos = args
        .iter()
        .position(|a| *a == "--output-file")
        .expect("--output-file");
    args[pos] = "--resume";
    let r = railsweep(&args);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let log = f.client_log();
    assert!(
        !log.contains("mlx5_0 ") && !log.contains("mlx5_1 "),
        "{log}"
    );
    assert!(log.contains("mlx5_2 ") && log.contains("mlx5_3 "), "{log}");
    let rows = read_path(&out).expect("reads");
    assert_eq!(
        rows.iter().map(|r| r.rail).collect::<Vec<_>>(),
        vec![0, 1, 2, 3]
    );
    assert!(
        rows.iter().all(|r| r.run_id == rows[0].run_id),
        "one run id"
    );
    assert!(
        text(&r.stdout).contains("4 rails"),
        "the table covers the whole run"
    );
}

#[test]
fn parallel_runs_all_rails_at_once_and_sums_them() {
    let f = Fake::new(4);
    for i in 1..=4 {
        f.behave(&format!("net{i}"), Behave::Slow);
    }
    let t0 = Instant::now();
    let (r, out) = sweep(&f, &["--parallel"]);
    let took = t0.elapsed();
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert!(
        took < Duration::from_secs(4),
        "4 rails of 1 s at once took {took:?}"
    );
    let stdout = text(&r.stdout);
    assert!(
        stdout.contains("sum") && stdout.contains("384.60"),
        "{stdout}"
    );
    // stdout is a pipe: the table is plain, its columns apart by spaces, no box characters.
    assert!(!stdout.contains(['│', '┆', '─']), "{stdout}");
    assert!(
        stdout.lines().any(|l| l
            .split_whitespace()
            .collect::<Vec<_>>()
            .starts_with(&["sum", "4", "rails", "at", "once", "384.60"])),
        "{stdout}"
    );
    assert_eq!(read_path(&out).expect("reads").len(), 4);
}

#[test]
fn missing_or_foreign_rdmabw_is_a_setup_error() {
    let f = Fake::new(1);
    let out = f.file("sweep.csv");
    let o = s(&out);
    let r = railsweep(&local_args("/nonexistent/rdmabw", &o));
    assert_eq!(r.status.code(), Some(2));
    assert_says(&r.stderr, "--inject");
    assert!(
        !out.exists(),
        "no results file for a sweep that never started"
    );

    f.set_version("9.0.0");
    let (r, _) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(2));
    assert_says(&r.stderr, "rdmabw 9.0.0");

    // An rdmabw without `rails` (or whose rails fails): --version tells which it is.
    f.set_version("0.1.0");
    f.write("rails.json", "not json");
    let (r, _) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(2));
    assert_says(&r.stderr, "not a rails report");
}

#[test]
fn ctrl_c_ends_remote_processes_and_keeps_rows() {
    let f = Fake::new(3);
    f.behave("net2", Behave::Hang);
    // Interrupted once the hanging rail has started.
    let (o, out) = sweep_interrupted(
        &f,
        || f.pid_in("hang-net2.pid").is_some(),
        "rail 1 never started",
    );
    let rows = read_path(&out).expect("reads");
    assert_eq!(rows.len(), 1, "rail 0 kept, rail 1 not recorded");
    let hang = f.pid_in("hang-net2.pid").expect("pid");
    let daemon = f.pid_in("server.pid").expect("pid");
    assert!(!alive(hang) && !alive(daemon), "client and daemon ended");
    assert_says(&o.stderr, "--resume");
}

/// `run --nodes` with an --output that exists: refused before anything reaches the API server
/// (it was refused once both pods were up, after a minute of pod start on a real node).
#[test]
fn run_nodes_refuses_an_existing_output_before_any_pod() {
    let f = Fake::new(1);
    let out = f.file("taken.csv");
    std::fs::write(&out, "not ours\n").expect("writes");
    // An API server that is not there: reaching it would be a different error.
    let kc = f.file("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n\
         users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    )
    .expect("writes");
    let r = railsweep(&[
        "run",
        "--kubeconfig",
        &s(&kc),
        "--mode",
        "hostnetwork",
        "--nodes",
        "a,b",
        "--output-file",
        &s(&out),
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
    assert_says(&r.stderr, "taken.csv exists; give another --output");
    assert_eq!(std::fs::read_to_string(&out).expect("reads"), "not ours\n");
}

/// Ctrl-C after the last rail's row, while the daemon ends, still interrupted the run: exit
/// 130 (it was 1 or 0, as the rows said), every row kept, and railsweep says they are complete.
#[test]
fn ctrl_c_after_the_last_row_exits_130_with_every_row() {
    let f = Fake::new(2);
    f.write("server-linger", "5");
    let (o, out) = sweep_interrupted(
        &f,
        || f.file("server-end").exists(),
        "the daemon's input never ended",
    );
    assert_eq!(read_path(&out).expect("reads").len(), 2, "both rails kept");
    assert_says(&o.stderr, "interrupted after every rail was measured");
    assert!(!text(&o.stderr).contains("--resume"), "{}", text(&o.stderr));
}

/// Issue 31, finding 5: numbers no `Duration` holds panicked (exit 101), `--pod-timeout`'s
/// after the pods were created. Now clap refuses them first, naming the flag and the range.
#[test]
fn durations_beyond_a_week_or_not_numbers_are_usage_errors() {
    for (flag, value) in [
        ("--deadline-slack", "1e300"),
        ("--deadline-slack", "NaN"),
        ("--duration", "inf"),
        ("--warmup", "1e300"),
        ("--pod-timeout", "1e300"),
        ("--pod-timeout", "NaN"),
    ] {
        let mut args = local_run("rdmabw");
        if flag == "--pod-timeout" {
            args = vec!["run", "--nodes", "node-a,node-b", "--dry-run"];
        }
        args.extend([flag, value]);
        let r = railsweep(&args);
        let stderr = text(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains("a week"),
            "{flag} {value}: {stderr}"
        );
    }
}

/// Issue 31, finding 4: a node name with a newline wrote a whole pod document into the
/// dry run's YAML. Now it is refused as a Kubernetes name, and nothing is printed.
#[test]
fn a_node_name_that_is_not_a_kubernetes_name_writes_no_yaml() {
    for nodes in [
        "node-a\n---\napiVersion: v1\nkind: Pod,node-b",
        "node-a,Node_B",
        "node-a,node-b\n# x",
    ] {
        let r = railsweep(&[
            "run",
            "--dry-run",
            "--mode",
            "hostnetwork",
            "-o",
            "yaml",
            "--nodes",
            nodes,
        ]);
        let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
        assert_eq!(r.status.code(), Some(2), "{nodes:?}: {stderr}");
        assert!(stdout.is_empty(), "{nodes:?}: {stdout}");
        assert!(
            stderr.contains("not a Kubernetes name"),
            "{nodes:?}: {stderr}"
        );
    }
    let r = railsweep(&[
        "run",
        "--dry-run",
        "--mode",
        "hostnetwork",
        "-n",
        "ns\nkind: Pod",
        "--nodes",
        "a,b",
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
}

/// A rail measured with GPU memory is recorded as such by railsweep, as rdmabw's own CSV
/// records it: the report's memory, not a name matched back to host memory.
#[test]
fn a_cuda_report_becomes_a_cuda_row() {
    let f = Fake::new(2);
    let mut rep = support::fake::report(0, 90.0, None);
    rep["memory"] = serde_json::json!("cuda-dmabuf");
    f.write("report-net1.json", &rep.to_string());
    let mut rep = support::fake::report(1, 90.0, None);
    rep["memory"] = serde_json::json!("cuda");
    f.write("report-net2.json", &rep.to_string());
    let (r, out) = sweep(&f, &[]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let rows = read_path(&out).expect("csv reads");
    let memory: Vec<MemoryKind> = rows.iter().map(|r| r.memory).collect();
    assert_eq!(memory, [MemoryKind::CudaDmabuf, MemoryKind::Cuda]);
}

/// Issue 53, finding 1: a pod whose report had one value out of range (`bw_peak_gbps: -1`)
/// ended the sweep with exit 2, the CSV holding its header only, every other rail's row and
/// the metrics gone. That rail is failed, naming the value; the others are measured and
/// written, and so are the metrics (exit 1: a rail failed). The same for a latency report.
#[test]
fn one_report_with_a_value_out_of_range_fails_its_rail_only() {
    let f = Fake::new(4);
    let mut bad = support::fake::report(1, 96.1, None);
    bad["results"][0]["bw_peak_gbps"] = serde_json::json!(-1.0);
    f.write("report-net2.json", &bad.to_string());
    f.lat_p99(None, "net4", -3.0);
    let (out, prom, json) = (
        f.file("sweep.csv"),
        f.file("rails.prom"),
        f.file("sweep.json"),
    );
    let (m, j) = (s(&prom), s(&json));
    let flags = ["--metrics", &m, "--out_json_file", &j, "--test", "bw,lat"];
    sweep_each_way(&f, &flags, &[&out, &prom, &json], |stderr, rows| {
        let mut rails: Vec<u32> = rows.iter().map(|r| r.rail).collect();
        rails.sort_unstable();
        assert_eq!(rails, [0, 1, 2, 3], "{stderr}");
        let rail = |n: u32| rows.iter().find(|r| r.rail == n).expect("the rail");
        for n in [0, 2] {
            assert_eq!(rail(n).status, RailStatus::Ok, "rail {n}");
        }
        let one = rail(1);
        assert_eq!(one.status, RailStatus::Failed);
        assert_eq!(one.bw_peak_gbps, None, "no figure of the bad report kept");
        let why = one.error.as_deref().unwrap_or_default();
        assert!(why.contains("bw_peak_gbps") && why.contains("-1"), "{why}");
        assert!(why.len() < 300, "{why}");
        // The latency report with p99 -3: rail 3 failed, its bandwidth kept.
        let three = rail(3);
        assert_eq!(three.status, RailStatus::Failed);
        assert!(three.bw_avg_gbps.is_some());
        let why = three.error.as_deref().unwrap_or_default();
        assert!(why.contains("p99_us") && why.contains("-3"), "{why}");
        assert_eq!(read_path(&json).expect("json reads"), rows);
        let metrics = std::fs::read_to_string(&prom).expect("metrics written");
        assert_eq!(
            metrics
                .lines()
                .filter(|l| l.starts_with("railbench_rail_ok{"))
                .count(),
            4,
            "{metrics}"
        );
    });
}

/// Issue 53, finding 5 (the logs): a pod's error text with a newline and escape sequences
/// printed as it was, so that a pod could forge railsweep's own log lines (a rail "ok") or
/// recolour the terminal. Its text stays on its rail's line, the escapes written out.
#[test]
fn a_pods_error_text_forges_no_log_line() {
    let f = Fake::new(2);
    let forged = "busy\nrailsweep: rail 1 (forged): 99.00 Gb/s ok\r\u{1b}[2K\u{1b}[32mok";
    f.write(
        "report-fail.json",
        &support::fake::report(0, 0.0, Some(forged)).to_string(),
    );
    f.behave("net1", Behave::Fail);
    let (r, _) = sweep(&f, &["--retries", "1"]);
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\r'),
        "{stderr:?}"
    );
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with("railsweep: rail 1 (forged)")),
        "{stderr}"
    );
    assert_says(&r.stderr, "busy\\nrailsweep: rail 1 (forged)");
}

/// Issue 53, finding 2: railsweep kept a client's output whole (one line without a newline
/// took it to 2.2 GB). A line over the limit fails its test, naming it, through the batch and
/// through a client process of its own (`--parallel`); the other rails are measured.
#[test]
fn a_line_over_the_limit_fails_its_rail_naming_it() {
    let f = Fake::new(3);
    f.behave("net2", Behave::Flood);
    sweep_each_way(&f, &[], &[&f.file("sweep.csv")], |stderr, rows| {
        assert_eq!(rows.len(), 3, "{stderr}");
        for row in &rows {
            if row.rail == 1 {
                assert_eq!(row.status, RailStatus::Failed);
                let why = row.error.as_deref().unwrap_or_default();
                assert!(why.contains("a line longer than 1024 KiB"), "{why}");
            } else {
                assert_eq!(row.status, RailStatus::Ok, "rail {}", row.rail);
            }
        }
    });
}

/// Issue 53, finding 6: `run -p 0` was taken (the daemon on a port the kernel picks, which no
/// client is told). It is refused naming the flag, exit 2, before anything runs.
#[test]
fn port_0_is_refused_naming_the_flag() {
    let f = Fake::new(1);
    let (out, bin, o) = paths(&f);
    let mut args = local_args(&bin, &o);
    let at = args.iter().position(|a| *a == "18999").expect("the port");
    for flag in ["--port", "-p"] {
        args[at - 1] = flag;
        args[at] = "0";
        let r = railsweep(&args);
        assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
        assert_says(&r.stderr, "--port");
        assert_says(&r.stderr, "from 1 to 65535");
        assert!(!out.exists() && f.read("client-args.log").is_empty());
    }
}

/// [`local_args`] with perftest's ib_write_bw at one end: `--server-tool` (perftest's server in
/// the server pod) or `--client-tool`.
fn perftest_at<'a>(end: &'a str, fake: &'a str, out: &'a str, ib: &'a str) -> Vec<&'a str> {
    let mut args = local_args(fake, out);
    args.extend([end, "ib_write_bw", "--ib-write-bw", ib]);
    args
}

/// railsweep over `f`'s rails into its sweep.csv, as [`perftest_at`] with `extra` flags: its
/// output, and the CSV's path.
fn perftest_sweep(f: &Fake, end: &str, extra: &[&str]) -> (Output, PathBuf) {
    let (out, bin, o) = paths(f);
    let pt = s(&f.ib_write_bw());
    let mut args = perftest_at(end, &bin, &o, &pt);
    args.extend(extra);
    (railsweep(&args), out)
}

/// What a sweep with perftest at one end leaves: no rdmabw daemon, no batch, no secret handed
/// to anyone, and every server that `f` recorded in `servers` ended.
fn perftest_left_nothing(f: &Fake, servers: &str) {
    assert!(!f.file("server-args").exists(), "no rdmabw daemon");
    assert!(f.pids("batch.pids").is_empty());
    assert_eq!(f.read("secrets.log"), "");
    for pid in f.pids(servers) {
        assert!(!alive(pid), "the server {pid} of {servers} ended");
    }
}

/// The one server that `f` recorded in `pids` (perftest's, or rdmabw's for perftest's client)
/// was stopped once its client was gone.
fn forsaken_server_stopped(f: &Fake, pids: &str) {
    let pids = f.pids(pids);
    assert_eq!(pids.len(), 1);
    assert!(
        !alive(pids[0]),
        "the forsaken server {} was stopped",
        pids[0]
    );
}

/// `--server-tool ib_write_bw`: no rdmabw daemon; per rail, perftest's server on port -p +
/// rail with the rail's device and GID and the flags both ends share, and rdmabw's client
/// against it speaking perftest's exchange (no secret to present); the rows say which tool
/// served, and every server is gone at the end.
#[test]
fn server_tool_ib_write_bw_serves_each_rail_with_perftest() {
    let f = Fake::new(3);
    let (r, out) = perftest_sweep(&f, "--server-tool", &["-s", "4096", "-q", "2"]);
    let rows = ok_rows(&r, &out, 3);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.status, RailStatus::Ok, "{row:?}");
        assert_eq!(row.server_tool.as_deref(), Some("ib_write_bw"));
        assert_eq!(row.client_tool.as_deref(), Some("rdmabw"));
        // perftest names neither its device nor its GID index: the server pod's rails do.
        assert_eq!(row.server_rdma_device, format!("mlx5_{i}"));
        assert_eq!(row.server_gid_index, Some(3));
    }
    let servers = f.read("ib_write_bw-args.log");
    assert_eq!(
        servers.lines().collect::<Vec<_>>(),
        (0..3)
            .map(|i| format!(
                "-d mlx5_{i} -x 3 -p {} -F -D 1 --report_gbits -s 4096 -q 2 --tclass=41",
                18999 + i
            ))
            .collect::<Vec<_>>()
    );
    let log = f.client_log();
    assert!(
        log.contains(
            "--server-gid-index 3 -p 19001 --tclass 41 --peer perftest --report_gbits 10.224.2.2"
        ),
        "{log}"
    );
    assert_eq!(log.lines().count(), 3, "a client process per rail: {log}");
    perftest_left_nothing(&f, "ib_write_bw.pids");
    assert!(!log.contains("--secret-stdin"), "{log}");
    assert_says(&r.stderr, "serves each rail with perftest's ib_write_bw");
}

/// A rail whose perftest server fails says so in its error, with the server's own words; a
/// server whose client never came is stopped, not left behind.
#[test]
fn a_failing_or_forsaken_perftest_server_is_named_and_ended() {
    let f = Fake::new(1);
    f.write("ib_write_bw-fail", "");
    f.write("behave-net1", "crash");
    let (r, out) = perftest_sweep(&f, "--server-tool", &[]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let rows = read_path(&out).expect("csv reads");
    let e = rows[0].error.clone().unwrap_or_default();
    assert_eq!(rows[0].status, RailStatus::Failed);
    assert!(
        e.contains("connection refused")
            && e.contains("ib_write_bw in pod")
            && e.contains("Couldn't listen"),
        "{e}"
    );
    assert_eq!(rows[0].server_tool.as_deref(), Some("ib_write_bw"));

    let f = Fake::new(1);
    f.write("ib_write_bw-hang", "");
    let (r, out) = perftest_sweep(&f, "--server-tool", &[]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert_eq!(read_path(&out).expect("csv")[0].status, RailStatus::Ok);
    forsaken_server_stopped(&f, "ib_write_bw.pids");
}

/// `--client-tool ib_write_bw`: no daemon, no batch, no secret; per rail a one-test rdmabw
/// server for perftest's clients on the server rail's address and port -p + rail, then
/// perftest's client against it with the window in its margins; the rows hold the figures the
/// server's report got from the client, say which program ran each end, and every server is
/// gone at the end.
#[test]
fn client_tool_ib_write_bw_measures_each_rail_against_a_one_test_rdmabw_server() {
    let f = Fake::new(3);
    let (r, out) = perftest_sweep(
        &f,
        "--client-tool",
        &["-s", "4096", "-q", "2", "--min-gbps", "10"],
    );
    let rows = ok_rows(&r, &out, 3);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.status, RailStatus::Ok, "{row:?}");
        assert_eq!(row.client_tool.as_deref(), Some("ib_write_bw"));
        assert_eq!(row.server_tool.as_deref(), Some("rdmabw"));
        assert_eq!(row.bw_avg_gbps, Some(96.0 + i as f64 / 10.0));
        assert_eq!(
            row.duration_s,
            Some(1.0),
            "railsweep's window, perftest's -D less its margins"
        );
        assert_eq!(row.bw_p50_gbps, None, "perftest sends no samples");
        assert_eq!(row.threshold_gbps, Some(10.0));
    }
    let servers = f.read("pt-server-args.log");
    assert_eq!(
        servers.lines().collect::<Vec<_>>(),
        (0..3)
            .map(|i| format!(
                "server --json --peer perftest --bind 10.224.{i}.2 -p {} -d mlx5_{i} -x 3 \
                 --window 3 --report_gbits -s 4096 -q 2 --tclass 41 --min-gbps 10",
                18999 + i
            ))
            .collect::<Vec<_>>()
    );
    let clients = f.read("ib_write_bw-client-args.log");
    assert_eq!(
        clients.lines().collect::<Vec<_>>(),
        (0..3)
            .map(|i| format!(
                "-d mlx5_{i} -x 3 -p {} -F -D 3 -f 1 --report_gbits -s 4096 -q 2 --tclass=41 \
                 10.224.{i}.2",
                18999 + i
            ))
            .collect::<Vec<_>>()
    );
    perftest_left_nothing(&f, "pt-server.pids");
    assert!(f.client_log().is_empty(), "no rdmabw client");
    assert_says(
        &r.stderr,
        "runs perftest's ib_write_bw as each rail's client",
    );
}

/// A perftest client that fails fails its rail with its own last words, and its forsaken
/// server is stopped; a server that cannot listen fails its rail with its words, and no client
/// is started.
#[test]
fn a_failing_perftest_client_or_rdmabw_server_is_named_and_nothing_is_left() {
    let f = Fake::new(1);
    f.write("ib_write_bw-client-fail", "");
    let t0 = Instant::now();
    let (r, out) = perftest_sweep(&f, "--client-tool", &[]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let rows = read_path(&out).expect("csv reads");
    let e = rows[0].error.clone().unwrap_or_default();
    assert_eq!(rows[0].status, RailStatus::Failed);
    assert!(
        e.contains("ib_write_bw in pod - ended with exit code 1 and said: Couldn't connect to 10.224.0.2:18999")
            && e.contains("rdmabw's server in pod -"),
        "{e}"
    );
    assert_eq!(rows[0].client_tool.as_deref(), Some("ib_write_bw"));
    forsaken_server_stopped(&f, "pt-server.pids");
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());

    let f = Fake::new(1);
    f.write("pt-server-fail", "");
    let (r, out) = perftest_sweep(&f, "--client-tool", &[]);
    assert_eq!(r.status.code(), Some(1), "{}", text(&r.stderr));
    let e = read_path(&out).expect("csv")[0]
        .error
        .clone()
        .unwrap_or_default();
    assert!(
        e.contains("rdmabw's server in pod - ended before it listened")
            && e.contains("address in use"),
        "{e}"
    );
    assert!(
        !f.file("ib_write_bw-client-args.log").exists(),
        "no client started"
    );
}

/// What perftest's server cannot take is refused before any pod work, naming the flag (exit
/// 2); so is what perftest's client cannot do, and perftest at both ends.
#[test]
fn flags_perftest_cannot_serve_are_refused_naming_the_flag() {
    let f = Fake::new(1);
    let (out, bin, o) = paths(&f);
    let pt = s(&f.ib_write_bw());
    for (extra, says) in [
        (
            &["-b"][..],
            "-b/--bidirectional with --server-tool ib_write_bw",
        ),
        (
            &["--data_validation"][..],
            "--data_validation with --server-tool ib_write_bw",
        ),
        (
            &["--test", "bw,lat"][..],
            "--test bw,lat with --server-tool ib_write_bw",
        ),
        (
            &["--window", "1.5"][..],
            "a measured window of 1.5 s (--window, or -D less its -f margins) with --server-tool ib_write_bw",
        ),
        (
            &["--use_cuda", "0"][..],
            "--gpu/--use_cuda with --server-tool ib_write_bw",
        ),
    ] {
        let mut args = perftest_at("--server-tool", &bin, &o, &pt);
        match args.iter().position(|a| *a == extra[0]) {
            // --window is in the arguments already: its value changes.
            Some(i) => args[i + 1] = extra[1],
            None => args.extend(extra),
        }
        let r = railsweep(&args);
        assert_eq!(r.status.code(), Some(2), "{extra:?}: {}", text(&r.stderr));
        assert_says(&r.stderr, says);
    }
    // perftest at both ends: rdmabw at neither.
    let (r, _) = perftest_sweep(&f, "--server-tool", &["--client-tool", "ib_write_bw"]);
    assert_eq!(r.status.code(), Some(2));
    assert_says(
        &r.stderr,
        "--client-tool ib_write_bw with --server-tool ib_write_bw: rdmabw would run on neither side",
    );
    // What perftest's client cannot do.
    for (extra, says) in [
        (&["-e"][..], "-e/--use_event with --client-tool ib_write_bw"),
        (
            &["--warmup", "1", "--cooldown", "2"][..],
            "--warmup/--cooldown 1/2 with --client-tool ib_write_bw",
        ),
        (
            &["-b"][..],
            "-b/--bidirectional with --client-tool ib_write_bw",
        ),
    ] {
        let (r, _) = perftest_sweep(&f, "--client-tool", extra);
        assert_eq!(r.status.code(), Some(2), "{extra:?}: {}", text(&r.stderr));
        assert_says(&r.stderr, says);
    }
    assert!(!out.exists(), "nothing measured");
    assert!(!f.file("ib_write_bw-args.log").exists());
}
