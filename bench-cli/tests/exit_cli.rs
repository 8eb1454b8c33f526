//! rdmabw's exit statuses where they are not a test's: a reader of standard output that goes
//! away (exit 0, nothing on stderr, as ripgrep), and a sysfs that cannot be read (a set-up
//! error, exit 2, in `devices` and in `rails` alike).

use std::fs;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

#[path = "support/cli.rs"]
mod cli;
use cli::{fixture, rdmabw, text};

/// Runs rdmabw with a standard output whose reader has already gone: every write to it fails
/// with EPIPE, as `rdmabw rails | head -1` does once head has exited. (A socket whose peer is
/// closed, rather than a pipe, so that no write can slip in before the reader is gone.)
fn with_reader_gone(args: &[&str]) -> Output {
    let (out, reader) = UnixStream::pair().unwrap_or_else(|e| panic!("socketpair: {e}"));
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .args(args)
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(out)))
        .stderr(Stdio::piped())
        .output()
        .unwrap_or_else(|e| panic!("running rdmabw: {e}"))
}

/// Runs rdmabw with a standard error whose reader has already gone (`rdmabw ... 2>&1 | head`
/// after head exited): logs are dropped, never a panic.
fn with_stderr_reader_gone(args: &[&str]) -> Output {
    let (err, reader) = UnixStream::pair().unwrap_or_else(|e| panic!("socketpair: {e}"));
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::os::fd::OwnedFd::from(err)))
        .output()
        .unwrap_or_else(|e| panic!("running rdmabw: {e}"))
}

/// A tree whose `sys/class/infiniband` cannot be listed: a file where the directory should be
/// (what a permission error is to a root user, who reads everything).
fn unreadable_sysfs(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("unreadable-sysfs-{name}"));
    let class = root.join("sys/class");
    fs::create_dir_all(&class).unwrap_or_else(|e| panic!("{}: {e}", class.display()));
    fs::write(class.join("infiniband"), "not a directory\n")
        .unwrap_or_else(|e| panic!("{}: {e}", class.display()));
    root
}

#[test]
fn a_reader_that_goes_away_is_exit_0_and_no_error() {
    let root = fixture("rails-hostnet");
    let root = root.to_string_lossy();
    for args in [
        vec!["rails", "--root", &root],
        vec!["rails", "--json", "--root", &root],
        vec!["devices", "--root", &root],
        vec!["devices", "--json", "--root", &root],
    ] {
        let out = with_reader_gone(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(out.stderr.is_empty(), "{args:?}: {}", text(&out.stderr));
    }
}

#[test]
fn an_unreadable_sysfs_is_a_setup_error_in_devices_and_rails() {
    for (cmd, name) in [("devices", "devices"), ("rails", "rails")] {
        let root = unreadable_sysfs(name);
        let root = root.to_string_lossy();
        for json in [false, true] {
            let mut args = vec![cmd, "--root", &root];
            if json {
                args.push("--json");
            }
            let out = rdmabw(&args);
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.starts_with("rdmabw: error: ") && err.contains("sys/class/infiniband"),
                "{args:?}: {err}"
            );
            // Machine output on stdout only: nothing there when there is nothing to list.
            assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
        }
    }
}

/// Issue 33: an error written to a closed standard error panicked (exit 101); the exit status is
/// the error's own.
#[test]
fn a_closed_stderr_keeps_the_exit_status() {
    let out = with_stderr_reader_gone(&["rails", "--root", "/nonexistent"]);
    assert_eq!(out.status.code(), Some(2), "stdout: {}", text(&out.stdout));
}

/// Issue 33: `rails --root /nonexistent` listed no rails and exited 0.
#[test]
fn a_root_without_sys_is_a_usage_error_naming_the_flag() {
    for cmd in ["devices", "rails", "counters"] {
        let out = rdmabw(&[cmd, "--root", "/nonexistent"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("--root /nonexistent: no folder /nonexistent/sys there"),
            "{cmd}: {err}"
        );
        assert!(out.stdout.is_empty(), "{cmd}: {}", text(&out.stdout));
    }
}

/// Issue 33: `rdmabw counters` without a rail, or naming one that is not there, exited 1 (a
/// failed run) instead of 2 (a usage error).
#[test]
fn counters_without_a_rail_is_a_usage_error() {
    let root = fixture("hostnet");
    let root = root.to_string_lossy();
    for (extra, says) in [
        (&[][..], "name the rail: -d DEV"),
        (&["-d", "nope"][..], "-d nope: no such RDMA device here"),
        (&["--netdev", "nope"][..], "--netdev nope: "),
    ] {
        let mut args = vec!["counters", "--root", &root];
        args.extend(extra);
        let out = rdmabw(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn devices_lists_a_fixture_tree_without_opening_its_devices() {
    let root = fixture("rails-hostnet");
    let out = rdmabw(&["devices", "--json", "--root", &root.to_string_lossy()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)));
    let ports = v["ports"].as_array().cloned().unwrap_or_default();
    assert!(
        ports.iter().any(|p| p["device"] == "mlx5_5"),
        "{}",
        text(&out.stdout)
    );
    assert!(ports.iter().all(|p| p["active_mtu_bytes"].is_null()));
    assert!(v["verbs_error"].is_null());
}

#[test]
fn help_states_the_exit_statuses() {
    let out = rdmabw(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout).replace('\n', " ");
    for status in [
        "Exit status: 0 it worked",
        "goes away",
        "1 it ran but failed",
        "2 usage or set-up error",
        "sysfs unreadable",
        "130 interrupted",
    ] {
        assert!(help.contains(status), "{status}: {help}");
    }
}

#[test]
fn a_host_that_does_not_resolve_is_a_usage_error_at_once() {
    let t0 = std::time::Instant::now();
    let o = rdmabw(&["client", "-D", "1", "not..a..host"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("HOST not..a..host: the name does not resolve here"),
        "{err}"
    );
    // One retry after a second, not the connect timeout's 11 s of retries.
    assert!(t0.elapsed().as_secs_f64() < 5.0, "took {:?}", t0.elapsed());
}

/// Issue 31, finding 5: `--connect-timeout 1e300` panicked (exit 101) where it became a
/// `Duration`; every time flag now has an upper bound, named with the flag.
#[test]
fn times_beyond_a_week_are_usage_errors_naming_the_flag() {
    for (flag, value) in [
        ("--connect-timeout", "1e300"),
        ("--connect-timeout", "NaN"),
        ("-D", "1e300"),
        ("--window", "inf"),
        ("--warmup", "1e300"),
    ] {
        let mut args = vec!["client", "127.0.0.1", flag, value];
        if flag == "--warmup" {
            args.extend(["-D", "5"]);
        }
        let o = rdmabw(&args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(
            err.contains(flag) && err.contains("at most"),
            "{flag} {value}: {err}"
        );
    }
}

/// Issue 55: a flag a command does not compose is no flag of it: clap's "unexpected argument",
/// exit 2 (usage), before any work; an ib_write_lat flag that `rdmabw lat` lacks is refused by
/// name, exit 2 too; a bad value of a shared flag names the flag and its range, exit 2.
#[test]
fn a_flag_the_command_lacks_or_a_bad_value_exits_2() {
    for (args, says) in [
        (
            &["lat", "-q", "2", "127.0.0.1"][..],
            "unexpected argument '-q'",
        ),
        (
            &["lat", "--min-gbps", "5", "127.0.0.1"],
            "unexpected argument '--min-gbps'",
        ),
        (
            &["client", "--daemon", "127.0.0.1"],
            "unexpected argument '--daemon'",
        ),
        (
            &["server", "--server-netdev", "net1"],
            "unexpected argument '--server-netdev'",
        ),
        (
            &["lat", "--cpu_util", "127.0.0.1"],
            "--cpu_util: not supported by rdmabw lat",
        ),
        (&["client", "--tclass", "256", "127.0.0.1"], "0-255"),
    ] {
        let out = rdmabw(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", text(&out.stdout));
    }
}
