//! perftest on one side of a sweep (`--server-tool ib_write_bw`): the server pod runs
//! perftest's `ib_write_bw` server, one process per rail and attempt (perftest serves one test
//! and exits), and rdmabw's client speaks perftest's exchange to it (`--peer perftest`), so that
//! a fleet can move to rdmabw one image at a time.
//!
//! How railsweep's timing maps onto ib_write_bw's: railsweep's `-D S` is the measured window,
//! which the rdmabw client measures exactly (`--window S`, its warm-up and cool-down outside).
//! perftest's `-D` is its whole test, margins inside; but a unidirectional RDMA WRITE server is
//! passive (it waits for the client's end, then prints the figures the client sends it), so its
//! `-D` times nothing: it gets `-D S` (whole seconds, as perftest takes them), which is what an
//! rdmabw client tells a perftest 6.28 in the parameters it negotiates. Bidirectional tests
//! (`-b`), where the server times traffic of its own by its own `-D` and margins, are refused.

use anyhow::{bail, Result};
use results::rdmabw::flags::TestFlags;
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
    const WHY: &str = "--server-tool ib_write_bw";
    if test.shape.bidirectional {
        bail!(
            "-b/--bidirectional with {WHY}: perftest's server times its own direction by its own \
             -D and margins, which railsweep's measured window cannot match; measure one \
             direction, or -b between rdmabw on both sides"
        );
    }
    if test.shape.data_validation {
        bail!(
            "--data_validation with {WHY}: rdmabw checks its own pattern, and perftest's \
             validation is another layout; leave it out"
        );
    }
    if gpu {
        bail!(
            "--gpu/--use_cuda with {WHY}: perftest's exchange says nothing of the peer's memory; \
             run GPU tests rdmabw to rdmabw"
        );
    }
    if latency {
        bail!(
            "--test bw,lat with {WHY}: the latency test would need perftest's ib_write_lat as \
             its server; measure the bandwidth alone (--test bw)"
        );
    }
    if duration_s < 1.0 || duration_s.fract() != 0.0 {
        bail!(
            "-D/--duration {duration_s} with {WHY}: perftest's -D takes whole seconds; give \
             -D 1 or more, whole"
        );
    }
    Ok(())
}

/// `--client-tool ib_write_bw`, refused (exit code 2): not done yet.
pub fn refuse_client_tool() -> Result<()> {
    bail!(
        "--client-tool ib_write_bw: not supported yet (perftest's client cannot present the \
         sweep's secret, and its figures would have to come from the rdmabw daemon's side); \
         sweep with rdmabw's client (--client-tool rdmabw, the default), against perftest's \
         server with --server-tool ib_write_bw if the server pod has only perftest"
    )
}

/// The port of `rail`'s ib_write_bw server: the sweep's port plus the rail number, so that
/// rails measured at once (`--parallel`) each have their own (perftest's server takes one
/// connection). `None` past 65535.
pub fn rail_port(base: u16, rail: u32) -> Option<u16> {
    u16::try_from(rail).ok().and_then(|r| base.checked_add(r))
}

/// `ib_write_bw -d DEV [-i PORT] -x GID -p TCP_PORT -F -D S [test flags]` for the server's end
/// `row` of a rail: perftest's server, serving one test. The test flags are those the two ends
/// must share (perftest's exchange carries none of them before 6.28): the size, the queue
/// pairs, the report unit, and the server's path settings (`--tclass`, `--sl`, `-m`); the
/// sender's tuning (`-t`, `-Q`, `-l`, `-I`, `-e`) and the thresholds are the client's alone.
/// `Err`: the rail has no RDMA device or GID index to name.
pub fn server_argv(
    bin: &str,
    row: &RailRow,
    port: u16,
    duration_s: f64,
    test: &TestFlags,
) -> std::result::Result<Vec<String>, String> {
    let (Some(dev), Some(gid)) = (row.device.as_ref(), row.gid_index) else {
        return Err(format!(
            "the server's rail {} has no RDMA device or GID index for ib_write_bw's -d and -x",
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
        "-D".into(),
        format!("{}", duration_s.round().max(1.0)),
        "--report_gbits".into(),
    ]);
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

/// The flags an rdmabw client adds against perftest's server: perftest's exchange only (it
/// never opens with rdmabw's), and the same report unit as the server's (the figures the client
/// sends it are in the client's unit).
pub const CLIENT_FLAGS: [&str; 3] = ["--peer", "perftest", "--report_gbits"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::row;
    use results::rdmabw::flags::{BwShapeFlags, PathFlags, QueueFlags, SizeFlags, ThresholdFlags};

    #[test]
    fn the_server_gets_the_rails_ends_and_the_shared_flags() {
        let r = row(2, "net3", "mlx5_2", "10.0.2.2");
        let test = TestFlags {
            message: SizeFlags { size: Some(65536) },
            shape: BwShapeFlags {
                qp: Some(2),
                ..BwShapeFlags::default()
            },
            path: PathFlags {
                tclass: Some(41),
                sl: Some(3),
                mtu: Some(4096),
            },
            queue: QueueFlags {
                cq_mod: Some(4),
                ..QueueFlags::default()
            },
            thresholds: ThresholdFlags {
                min_gbps: Some(90.0),
                ..ThresholdFlags::default()
            },
            ..TestFlags::default()
        };
        let v = server_argv("/usr/bin/ib_write_bw", &r, 18517, 5.0, &test).expect("argv");
        assert_eq!(
            v.join(" "),
            format!(
                "/usr/bin/ib_write_bw -d mlx5_2 -x {} -p 18517 -F -D 5 --report_gbits -s 65536 \
                 -q 2 --tclass=41 -S 3 -m 4096",
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
            (&ok, 2.5, false, false, "-D/--duration 2.5"),
            (&ok, 0.5, false, false, "-D/--duration 0.5"),
        ] {
            let e = check_server_tool(t, d, gpu, lat)
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
