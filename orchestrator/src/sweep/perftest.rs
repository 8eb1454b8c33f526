//! perftest on one side of a sweep, so that a fleet can move to rdmabw one image at a time.
//!
//! `--server-tool ib_write_bw`: the server pod runs perftest's `ib_write_bw` server, one process
//! per rail and attempt (perftest serves one test and exits), and rdmabw's client speaks
//! perftest's exchange to it (`--peer perftest`).
//!
//! `--client-tool ib_write_bw`: the server pod runs a one-test `rdmabw server --peer perftest`
//! per rail and attempt, bound to the rail's address (not the daemon: the daemon serves only
//! clients that present the sweep's secret, which perftest's client cannot), and the client pod
//! runs perftest's `ib_write_bw` client against it. The row's figures are those the perftest
//! client sends its server after the run (perftest's result exchange), from the rdmabw server's
//! JSON report, whose `peer` names perftest and its version.
//!
//! How railsweep's timing maps onto ib_write_bw's: railsweep's `-D S` is the measured window.
//! perftest's `-D` is its whole test, margins inside.
//! - perftest's server: the rdmabw client measures the window exactly (`--window S`, its warm-up
//!   and cool-down outside), and a unidirectional RDMA WRITE server is passive (it waits for
//!   the client's end, then prints the figures the client sends it), so its `-D` times
//!   nothing: it gets `-D S` (S plus `--warmup` and `--cooldown` where given; whole seconds,
//!   as perftest takes them), which is the whole test an rdmabw client tells a perftest 6.28 in
//!   the parameters it negotiates. Bidirectional tests (`-b`),
//!   where the server times traffic of its own by its own `-D` and margins, are refused.
//! - perftest's client times the window itself: `-D S+2M -f M` measures S seconds between two
//!   margins of M (perftest's `-f`, whole seconds: `--warmup`/`--cooldown` where given, equal,
//!   else [`CLIENT_MARGIN_S`]). The rdmabw server, passive too, gets `--window S+2M`: its
//!   window times nothing, and it tells a perftest 6.28 client the same duration as the
//!   client's own `-D` in the parameters they negotiate.

use anyhow::{bail, Result};
use results::rdmabw::flags::{fmt_num, TestFlags};
use results::rdmabw::rails::RailRow;

/// The program at one end of every rail (`--server-tool`, `--client-tool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Tool {
    /// rdmabw: the server pod's one daemon, or the client pod's rdmabw client.
    #[default]
    #[value(name = "rdmabw")]
    Rdmabw,
    /// perftest's `ib_write_bw`.
    #[value(name = "ib_write_bw")]
    IbWriteBw,
}

impl Tool {
    /// The word a row's `client_tool`/`server_tool` holds for this program.
    pub fn row_word(self) -> &'static str {
        match self {
            Tool::Rdmabw => results::rdmabw::TOOL_RDMABW,
            Tool::IbWriteBw => results::rdmabw::TOOL_IB_WRITE_BW,
        }
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.row_word())
    }
}

/// What a sweep with `--server-tool ib_write_bw` cannot do, refused before any pod work with
/// the flag named: `Err` is a usage error (exit code 2).
pub fn check_server_tool(
    test: &TestFlags,
    duration_s: f64,
    gpu: bool,
    latency: bool,
) -> Result<()> {
    check_perftest_end(
        "--server-tool ib_write_bw",
        "perftest's server times its own direction by its own -D and margins, which railsweep's \
         measured window cannot match",
        test,
        duration_s,
        gpu,
        latency,
    )
}

/// What a sweep with `--client-tool ib_write_bw` cannot do, refused before any pod work with
/// the flag named: `Err` is a usage error (exit code 2). `server` is `--server-tool`.
pub fn check_client_tool(
    test: &TestFlags,
    duration_s: f64,
    gpu: bool,
    latency: bool,
    server: Tool,
) -> Result<()> {
    const WHY: &str = "--client-tool ib_write_bw";
    if server == Tool::IbWriteBw {
        bail!(
            "{WHY} with --server-tool ib_write_bw: rdmabw would run on neither side, and each \
             rail's figures come from rdmabw's report at one end; keep rdmabw at one end \
             (--server-tool rdmabw, the default, serves perftest's client)"
        );
    }
    check_perftest_end(
        WHY,
        "rdmabw's server would time its direction by its own window and perftest's client by \
         its -D and margins, which do not line up",
        test,
        duration_s,
        gpu,
        latency,
    )?;
    if test.queue.use_event {
        bail!(
            "-e/--use_event with {WHY}: perftest's ib_write_bw refuses -e for RDMA WRITE; leave \
             it out"
        );
    }
    let (w, c) = (test.margins.warmup, test.margins.cooldown);
    let margin = w.or(c);
    if margin != c.or(w) || margin.is_some_and(|m| m.fract() != 0.0) {
        bail!(
            "--warmup/--cooldown {}/{} with {WHY}: perftest's -f is one margin of whole seconds \
             before and after the window; give both the same whole number (--warmup 2 \
             --cooldown 2), or neither ({CLIENT_MARGIN_S} s)",
            w.map_or_else(|| "-".to_string(), fmt_num),
            c.map_or_else(|| "-".to_string(), fmt_num),
        );
    }
    Ok(())
}

/// The refusals both perftest ends share, `flag` naming which (`--server-tool ib_write_bw`)
/// and `bidirectional` why `-b` cannot be.
fn check_perftest_end(
    flag: &str,
    bidirectional: &str,
    test: &TestFlags,
    duration_s: f64,
    gpu: bool,
    latency: bool,
) -> Result<()> {
    if test.shape.bidirectional {
        bail!(
            "-b/--bidirectional with {flag}: {bidirectional}; measure one direction, or -b \
             between rdmabw on both sides"
        );
    }
    if test.shape.data_validation {
        bail!(
            "--data_validation with {flag}: rdmabw checks its own pattern, and perftest's \
             validation is another layout; leave it out"
        );
    }
    if gpu {
        bail!(
            "--gpu/--use_cuda with {flag}: perftest's exchange says nothing of the peer's memory; \
             run GPU tests rdmabw to rdmabw"
        );
    }
    if latency {
        bail!(
            "--test bw,lat with {flag}: the latency test would need perftest's ib_write_lat at \
             that end; measure the bandwidth alone (--test bw)"
        );
    }
    if duration_s < 1.0 || duration_s.fract() != 0.0 {
        bail!(
            "a measured window of {duration_s} s (--window, or -D less its -f margins) with \
             {flag}: perftest measures whole seconds; give --window 1 or more, whole"
        );
    }
    Ok(())
}

/// perftest's `-f` (its margin before and after the measured window, whole seconds) when
/// `--warmup`/`--cooldown` do not say: long enough for the queues to fill before the window
/// opens, short enough to cost little per rail.
pub const CLIENT_MARGIN_S: u32 = 1;

/// perftest's timing for the measured window of `duration_s` seconds (whole, checked by
/// [`check_client_tool`]): its `-f` (the margin: `--warmup`, else `--cooldown`, else
/// [`CLIENT_MARGIN_S`]) and its `-D` (the whole test, the window and both margins).
pub fn client_timing(duration_s: f64, test: &TestFlags) -> (u32, u32) {
    let margin = test
        .margins
        .warmup
        .or(test.margins.cooldown)
        .map_or(CLIENT_MARGIN_S, |m| m.max(0.0) as u32);
    let window = duration_s.round().max(1.0) as u32;
    (margin, window.saturating_add(margin.saturating_mul(2)))
}

/// The port of `rail`'s one-test server (perftest's, or rdmabw's for perftest's client): the
/// sweep's port plus the rail number, so that rails measured at once (`--parallel`) each have
/// their own (a one-test server takes one client). `None` past 65535.
pub fn rail_port(base: u16, rail: u32) -> Option<u16> {
    u16::try_from(rail).ok().and_then(|r| base.checked_add(r))
}

/// `ib_write_bw -d DEV [-i PORT] -x GID -p TCP_PORT -F -D S --report_gbits [shared flags]` for
/// the server's end `row` of a rail: perftest's server, serving one test. The test flags are
/// those the two ends must share (as perftest's client gets them); the sender's tuning and the thresholds are
/// the client's alone. `Err`: the rail has no RDMA device or GID index to name.
pub fn server_argv(
    bin: &str,
    row: &RailRow,
    port: u16,
    duration_s: f64,
    test: &TestFlags,
) -> std::result::Result<Vec<String>, String> {
    // The rdmabw client's whole test: its window and the margins it was given (its own start
    // of 0.05 s rounds away), as it tells a perftest 6.28 server in their negotiation.
    let margins = test.margins.warmup.unwrap_or(0.0) + test.margins.cooldown.unwrap_or(0.0);
    let whole = format!("{}", (duration_s + margins).round().max(1.0));
    ib_write_bw_argv(bin, "server's", row, port, &["-D".into(), whole], test)
}

/// `ib_write_bw -d DEV [-i PORT] -x GID -p TCP_PORT -F -D S+2M -f M --report_gbits [shared
/// flags] [-t N] [-Q N] [-l N] [-I N] ADDR` for the client's end `row` of a rail, against the
/// one-test rdmabw server on `server`'s address (see [`client_timing`]). The sender's tuning
/// (`-t`, `-Q`, `-l`, `-I`) is the client's; the thresholds are the rdmabw server's, which
/// judges the figures the client sends it. `Err`: a rail end has nothing to name.
pub fn client_argv(
    bin: &str,
    row: &RailRow,
    server: &RailRow,
    port: u16,
    duration_s: f64,
    test: &TestFlags,
) -> std::result::Result<Vec<String>, String> {
    let Some(addr) = server.ipv4.clone() else {
        return Err(format!(
            "the server's rail {} has no IPv4 address for ib_write_bw to connect to",
            server.iface
        ));
    };
    let (margin, whole) = client_timing(duration_s, test);
    let timing = [
        "-D".to_string(),
        whole.to_string(),
        "-f".to_string(),
        margin.to_string(),
    ];
    let mut v = ib_write_bw_argv(bin, "client's", row, port, &timing, test)?;
    let t = &test.queue;
    for (flag, value) in [
        ("-t", t.tx_depth),
        ("-Q", t.cq_mod),
        ("-l", t.post_list),
        ("-I", t.inline_size),
    ] {
        if let Some(x) = value {
            v.extend([flag.into(), x.to_string()]);
        }
    }
    v.push(addr);
    Ok(v)
}

/// What both perftest ends' command lines start with: `BIN -d DEV [-i PORT] -x GID -p
/// TCP_PORT -F TIMING --report_gbits` and the flags the two ends must share (perftest's
/// exchange carries none of them before 6.28): the size, the queue pairs and the path settings
/// (`--tclass`, `-S`, `-m`). `whose`: the end, for the error of a rail without a device or GID.
fn ib_write_bw_argv(
    bin: &str,
    whose: &str,
    row: &RailRow,
    port: u16,
    timing: &[String],
    test: &TestFlags,
) -> std::result::Result<Vec<String>, String> {
    let (Some(dev), Some(gid)) = (row.device.as_ref(), row.gid_index) else {
        return Err(format!(
            "the {whose} rail {} has no RDMA device or GID index for ib_write_bw's -d and -x",
            row.iface
        ));
    };
    let mut v: Vec<String> = vec![bin.into(), "-d".into(), dev.clone()];
    if let Some(p) = row.port.filter(|p| *p != 1) {
        v.extend(["-i".into(), p.to_string()]);
    }
    v.extend([
        "-x".into(),
        gid.to_string(),
        "-p".into(),
        port.to_string(),
        "-F".into(),
    ]);
    v.extend(timing.iter().cloned());
    v.push("--report_gbits".into());
    if let Some(s) = test.message.size {
        v.extend(["-s".into(), s.to_string()]);
    }
    if let Some(q) = test.shape.qp {
        v.extend(["-q".into(), q.to_string()]);
    }
    if let Some(tc) = test.path.tclass {
        v.push(format!("--tclass={tc}"));
    }
    if let Some(sl) = test.path.sl {
        v.extend(["-S".into(), sl.to_string()]);
    }
    if let Some(m) = test.path.mtu {
        v.extend(["-m".into(), m.to_string()]);
    }
    Ok(v)
}

/// `rdmabw server --json --peer perftest --bind ADDR -p TCP_PORT -d DEV [-i PORT] -x GID
/// --window S+2M --report_gbits [shared flags] [thresholds]` for the server's end `row` of a
/// rail whose client is perftest's (see [`client_timing`]): one test, perftest's clients only,
/// on the rail's address alone, its JSON report (the client's figures, in the client's unit)
/// on stdout. No secret: perftest's client cannot present one; the server listens on the
/// rail's address alone, for one test, during this attempt only. The shared flags are those
/// perftest's client gets; the thresholds judge the figures the client sends.
pub fn rdmabw_server_argv(
    bin: &str,
    row: &RailRow,
    port: u16,
    duration_s: f64,
    test: &TestFlags,
) -> std::result::Result<Vec<String>, String> {
    let (Some(dev), Some(gid), Some(addr)) =
        (row.device.as_ref(), row.gid_index, row.ipv4.as_ref())
    else {
        return Err(format!(
            "the server's rail {} has no RDMA device, GID index or IPv4 address for rdmabw's \
             server (-d, -x, --bind)",
            row.iface
        ));
    };
    let (_, whole) = client_timing(duration_s, test);
    let mut v: Vec<String> = vec![
        bin.into(),
        "server".into(),
        "--json".into(),
        "--peer".into(),
        "perftest".into(),
        "--bind".into(),
        addr.clone(),
        "-p".into(),
        port.to_string(),
        "-d".into(),
        dev.clone(),
    ];
    if let Some(p) = row.port.filter(|p| *p != 1) {
        v.extend(["-i".into(), p.to_string()]);
    }
    v.extend(["-x".into(), gid.to_string()]);
    v.extend([
        "--window".into(),
        whole.to_string(),
        "--report_gbits".into(),
    ]);
    v.extend(test.shape_argv());
    let shared = TestFlags {
        path: test.path.clone(),
        thresholds: test.thresholds.clone(),
        ..TestFlags::default()
    };
    v.extend(shared.tuning_argv());
    Ok(v)
}

/// The flags an rdmabw client adds against perftest's server: perftest's exchange only (it
/// never opens with rdmabw's), and the same report unit as the server's (the figures the client
/// sends it are in the client's unit).
pub const CLIENT_FLAGS: [&str; 3] = ["--peer", "perftest", "--report_gbits"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::row;
    use results::rdmabw::flags::{
        BwShapeFlags, MarginFlags, PathFlags, QueueFlags, SizeFlags, ThresholdFlags,
    };

    #[test]
    fn the_server_gets_the_rails_ends_and_the_shared_flags() {
        let r = row(2, "net3", "mlx5_2", "10.0.2.2");
        // The sender's tuning (-t, -Q, -l, -I) is the client's alone.
        let test = every_flag();
        let v = server_argv("/usr/bin/ib_write_bw", &r, 18517, 5.0, &test).expect("argv");
        assert_eq!(
            v.join(" "),
            format!(
                "/usr/bin/ib_write_bw -d mlx5_2 -x {} -p 18517 -F -D 5 --report_gbits -s 4096 \
                 -q 2 --tclass=41 -S 3 -m 1024",
                r.gid_index.expect("gid")
            )
        );
        let mut no_gid = r.clone();
        no_gid.gid_index = None;
        let e = server_argv("ib_write_bw", &no_gid, 1, 5.0, &test).expect_err("no gid");
        assert!(e.contains("net3") && e.contains("-x"), "{e}");
        let mut port2 = r;
        port2.port = Some(2);
        assert!(server_argv("ib_write_bw", &port2, 1, 5.0, &test)
            .expect("argv")
            .join(" ")
            .contains("-d mlx5_2 -i 2 -x"));
        // The client's margins are inside perftest's -D, the whole test a 6.28 negotiates.
        let mut margins = test.clone();
        margins.margins.warmup = Some(1.0);
        margins.margins.cooldown = Some(1.5);
        assert!(server_argv("ib_write_bw", &port2, 1, 5.0, &margins)
            .expect("argv")
            .join(" ")
            .contains(" -D 8 "));
    }

    #[test]
    fn what_perftest_cannot_serve_is_refused_naming_the_flag() {
        let ok = TestFlags::default();
        assert!(check_server_tool(&ok, 5.0, false, false).is_ok());
        let mut b = ok.clone();
        b.shape.bidirectional = true;
        let mut dv = ok.clone();
        dv.shape.data_validation = true;
        for (t, d, gpu, lat, flag) in [
            (&b, 5.0, false, false, "-b/--bidirectional"),
            (&dv, 5.0, false, false, "--data_validation"),
            (&ok, 5.0, true, false, "--gpu/--use_cuda"),
            (&ok, 5.0, false, true, "--test bw,lat"),
            (&ok, 2.5, false, false, "a measured window of 2.5 s"),
            (&ok, 0.5, false, false, "a measured window of 0.5 s"),
        ] {
            let e = check_server_tool(t, d, gpu, lat)
                .expect_err(flag)
                .to_string();
            assert!(e.starts_with(flag), "{flag}: {e}");
        }
    }

    /// The test of the client-tool tests: every flag one of the two argvs takes.
    fn every_flag() -> TestFlags {
        TestFlags {
            message: SizeFlags { size: Some(4096) },
            shape: BwShapeFlags {
                qp: Some(2),
                ..BwShapeFlags::default()
            },
            path: PathFlags {
                tclass: Some(41),
                sl: Some(3),
                mtu: Some(1024),
            },
            queue: QueueFlags {
                tx_depth: Some(256),
                cq_mod: Some(4),
                post_list: Some(8),
                inline_size: Some(64),
                ..QueueFlags::default()
            },
            thresholds: ThresholdFlags {
                min_gbps: Some(90.0),
                min_line_rate_pct: Some(50.5),
            },
            ..TestFlags::default()
        }
    }

    #[test]
    fn perftests_client_gets_its_rails_end_the_window_in_margins_and_the_servers_address() {
        let c = row(2, "net3", "mlx5_2", "10.0.2.1");
        let s = row(2, "net3", "mlx5_6", "10.0.2.2");
        let test = every_flag();
        let v = client_argv("/usr/bin/ib_write_bw", &c, &s, 18517, 5.0, &test).expect("argv");
        // -D 5 measured between margins of 1 s: perftest's -D 7 -f 1. The shared flags as the
        // server's argv has them; then the sender's tuning; no threshold (the server judges).
        assert_eq!(
            v.join(" "),
            "/usr/bin/ib_write_bw -d mlx5_2 -x 1 -p 18517 -F -D 7 -f 1 --report_gbits -s 4096 \
             -q 2 --tclass=41 -S 3 -m 1024 -t 256 -Q 4 -l 8 -I 64 10.0.2.2"
        );
        let shared = |v: &[String]| {
            let at = v.iter().position(|a| a == "--report_gbits").expect("unit");
            v[at..at + 10].join(" ")
        };
        let server = server_argv("ib_write_bw", &s, 18517, 5.0, &test).expect("argv");
        assert_eq!(
            shared(&v),
            shared(&server),
            "one definition of the shared flags"
        );
        // --warmup/--cooldown of whole seconds are perftest's -f.
        let m3 = TestFlags {
            margins: MarginFlags {
                warmup: Some(3.0),
                cooldown: Some(3.0),
            },
            ..TestFlags::default()
        };
        let v = client_argv("ib_write_bw", &c, &s, 1, 2.0, &m3).expect("argv");
        assert!(
            v.join(" ").contains("-F -D 8 -f 3 --report_gbits 10.0.2.2"),
            "{v:?}"
        );
        let mut port2 = c.clone();
        port2.port = Some(2);
        assert!(client_argv("ib_write_bw", &port2, &s, 1, 5.0, &m3)
            .expect("argv")
            .join(" ")
            .starts_with("ib_write_bw -d mlx5_2 -i 2 -x 1 -p"));
        let mut no_dev = c.clone();
        no_dev.device = None;
        let e = client_argv("ib_write_bw", &no_dev, &s, 1, 5.0, &m3).expect_err("no device");
        assert!(e.contains("client's rail net3") && e.contains("-d"), "{e}");
        let mut no_ip = s.clone();
        no_ip.ipv4 = None;
        let e = client_argv("ib_write_bw", &c, &no_ip, 1, 5.0, &m3).expect_err("no address");
        assert!(
            e.contains("server's rail net3") && e.contains("IPv4"),
            "{e}"
        );
    }

    #[test]
    fn rdmabws_server_for_perftests_client_serves_one_test_on_the_rails_address() {
        let s = row(2, "net3", "mlx5_6", "10.0.2.2");
        let v = rdmabw_server_argv("/tmp/rdmabw", &s, 18517, 5.0, &every_flag()).expect("argv");
        // The whole of perftest's test as its window (what a 6.28 client negotiates), the
        // client's unit, the shared flags and the thresholds; not the sender's tuning.
        assert_eq!(
            v.join(" "),
            "/tmp/rdmabw server --json --peer perftest --bind 10.0.2.2 -p 18517 -d mlx5_6 -x 1 \
             --window 7 --report_gbits -s 4096 -q 2 --tclass 41 --sl 3 -m 1024 --min-gbps 90 \
             --min-line-rate-pct 50.5"
        );
        assert!(!v.iter().any(|a| a == "--daemon" || a == "--secret-stdin"));
        let mut port2 = s.clone();
        port2.port = Some(2);
        assert!(
            rdmabw_server_argv("rdmabw", &port2, 1, 5.0, &TestFlags::default())
                .expect("argv")
                .join(" ")
                .contains("-d mlx5_6 -i 2 -x 1 --window 7 --report_gbits"),
        );
        for take in [0, 1, 2] {
            let mut r = s.clone();
            match take {
                0 => r.device = None,
                1 => r.gid_index = None,
                _ => r.ipv4 = None,
            }
            let e = rdmabw_server_argv("rdmabw", &r, 1, 5.0, &TestFlags::default())
                .expect_err("nothing to name");
            assert!(e.contains("net3") && e.contains("--bind"), "{e}");
        }
    }

    #[test]
    fn perftests_timing_is_the_window_in_whole_margins() {
        let mut t = TestFlags::default();
        assert_eq!(
            client_timing(5.0, &t),
            (CLIENT_MARGIN_S, 5 + 2 * CLIENT_MARGIN_S)
        );
        t.margins.warmup = Some(0.0);
        t.margins.cooldown = Some(0.0);
        assert_eq!(client_timing(1.0, &t), (0, 1));
        t.margins.warmup = None;
        t.margins.cooldown = Some(2.0);
        assert_eq!(client_timing(3.0, &t), (2, 7));
    }

    #[test]
    fn what_perftests_client_cannot_do_is_refused_naming_the_flag() {
        let ok = TestFlags::default();
        let rdmabw = Tool::Rdmabw;
        assert!(check_client_tool(&ok, 5.0, false, false, rdmabw).is_ok());
        let mut margins = ok.clone();
        margins.margins.warmup = Some(2.0);
        margins.margins.cooldown = Some(2.0);
        assert!(check_client_tool(&margins, 5.0, false, false, rdmabw).is_ok());
        let mut b = ok.clone();
        b.shape.bidirectional = true;
        let mut dv = ok.clone();
        dv.shape.data_validation = true;
        let mut ev = ok.clone();
        ev.queue.use_event = true;
        let mut uneven = ok.clone();
        uneven.margins.warmup = Some(1.0);
        uneven.margins.cooldown = Some(2.0);
        let mut half = ok.clone();
        half.margins.warmup = Some(0.5);
        let mut one_side = ok.clone();
        one_side.margins.cooldown = Some(1.0);
        assert!(check_client_tool(&one_side, 5.0, false, false, rdmabw).is_ok());
        for (t, d, gpu, lat, server, flag) in [
            (
                &ok,
                5.0,
                false,
                false,
                Tool::IbWriteBw,
                "--client-tool ib_write_bw with --server-tool ib_write_bw",
            ),
            (
                &b,
                5.0,
                false,
                false,
                rdmabw,
                "-b/--bidirectional with --client-tool",
            ),
            (
                &dv,
                5.0,
                false,
                false,
                rdmabw,
                "--data_validation with --client-tool",
            ),
            (
                &ok,
                5.0,
                true,
                false,
                rdmabw,
                "--gpu/--use_cuda with --client-tool",
            ),
            (
                &ok,
                5.0,
                false,
                true,
                rdmabw,
                "--test bw,lat with --client-tool",
            ),
            (
                &ok,
                2.5,
                false,
                false,
                rdmabw,
                "a measured window of 2.5 s (--window, or -D less its -f margins) with --client-tool",
            ),
            (
                &ok,
                0.0,
                false,
                false,
                rdmabw,
                "a measured window of 0 s (--window, or -D less its -f margins) with --client-tool",
            ),
            (
                &ev,
                5.0,
                false,
                false,
                rdmabw,
                "-e/--use_event with --client-tool",
            ),
            (
                &uneven,
                5.0,
                false,
                false,
                rdmabw,
                "--warmup/--cooldown 1/2 with --client-tool",
            ),
            (
                &half,
                5.0,
                false,
                false,
                rdmabw,
                "--warmup/--cooldown 0.5/- with --client-tool",
            ),
        ] {
            let e = check_client_tool(t, d, gpu, lat, server)
                .expect_err(flag)
                .to_string();
            assert!(e.starts_with(flag), "{flag}: {e}");
        }
    }

    #[test]
    fn each_rail_has_its_own_port() {
        assert_eq!(rail_port(18515, 0), Some(18515));
        assert_eq!(rail_port(18515, 3), Some(18518));
        assert_eq!(rail_port(65535, 1), None);
        assert_eq!(rail_port(1, 70_000), None);
    }
}
