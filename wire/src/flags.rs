//! The flags that rdmabw and railsweep both take, or that railsweep writes for rdmabw to read,
//! defined once so that the same spelling means the same thing in both (`railsweep run -b -Q 4`
//! runs `rdmabw client -b -Q 4`): clap arguments (with the `cli` feature), their value parsers
//! (the one place each range is checked: a value of these types is a valid one), and the argv
//! railsweep hands to rdmabw.
//!
//! The flags come in groups, by which tests take them, so that each command composes the
//! groups it takes and nothing else: [`SizeFlags`], [`PathFlags`], [`QueueFlags`] and
//! [`MarginFlags`] are every test's (bandwidth and latency); [`BwShapeFlags`] and
//! [`ThresholdFlags`] a bandwidth test's; [`LatencyFlags`] a latency test's. [`TestFlags`] is
//! what railsweep passes through to every `rdmabw client`, [`LatTest`] what it asks of `rdmabw
//! lat`, and [`RailFlags`] with [`ServerRailFlags`] the rail both name.
//!
//! [`LengthFlags`] (`-D`, `--window`, `-f`) is how long a timed test runs, with
//! [`whole_test`] the one reading of perftest's `-D`/`-f`. Spellings the two binaries share
//! mean the same thing in both (docs/railsweep.md, "One meaning per spelling"; the flag walk in
//! orchestrator/tests/flag_walk.rs holds them to it). The few railsweep does not take:
//! - `-a`/`--all`: rdmabw sweeps 2 B .. 8 MiB; railsweep refuses it (a row is one size).
//! - `-d`, `-i`, `-x`: rdmabw's name this side's rail; railsweep finds every rail itself and
//!   refuses them by name. It writes them, as [`RailFlags`], for each rail it runs.

mod parse;

pub use parse::{
    at_least_one_arg, fmt_num, gbps_arg, gid_index_arg, ib_port_arg, line_rate_pct_arg, mtu_arg,
    parse_size, positive_arg, seconds_arg, secs, service_level_arg, size_arg, traffic_class_arg,
    MTUS,
};

/// The message size when -s is not given: ib_write_bw's, rdmabw's and railsweep's.
pub const DEFAULT_SIZE_BYTES: u64 = 65536;

/// ib_write_lat's (and `rdmabw lat`'s) number of exchanges when `-n` is not given; railsweep's
/// latency test runs as many unless `--lat-iters` says.
pub const LAT_DEFAULT_ITERS: u64 = 1000;
/// ib_write_lat's least number of exchanges, which `rdmabw lat -n` and railsweep's
/// `--lat-iters` hold to.
pub const LAT_MIN_ITERS: u64 = 5;

/// `-s`: the message size, every test's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct SizeFlags {
    /// Message size: bytes, or 64K, 1M (ib_write_bw -s).
    ///
    /// K/M/G suffixes are powers of 2; 1 byte to 1G; default 65536 (ib_write_lat: 2).
    #[cfg_attr(
        feature = "cli",
        arg(short = 's', long = "size", value_name = "BYTES", value_parser = size_arg)
    )]
    pub size: Option<u64>,
}

/// The shape of a bandwidth test beyond its size: queue pairs, directions, validation. A
/// latency test is a ping-pong of one QP in one direction and takes none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct BwShapeFlags {
    /// Queue pairs (ib_write_bw -q; railsweep: per rail).
    ///
    /// At least 1; default 1.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'q', long = "qp", alias = "qps", value_name = "N", value_parser = at_least_one_arg)
    )]
    pub qp: Option<u32>,

    /// Both directions at once (ib_write_bw -b).
    ///
    /// Rows are the sum of both, as ib_write_bw's.
    #[cfg_attr(feature = "cli", arg(short = 'b', long = "bidirectional"))]
    pub bidirectional: bool,

    /// Check every byte the peer wrote (ib_write_bw).
    ///
    /// Once its writes are in: each QP and size writes its own pattern to a place of its own; a
    /// byte that differs fails the test (exit 1), naming its offset, the byte sent and the byte
    /// found (ib_write_bw --data_validation).
    #[cfg_attr(
        feature = "cli",
        arg(long = "data_validation", alias = "data-validation")
    )]
    pub data_validation: bool,
}

/// The path's settings, every test's: what the packets carry on the rail (traffic class,
/// service level) and the path MTU. railsweep's latency test runs with the bandwidth test's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct PathFlags {
    /// Traffic class, 0-255: 41 for a lossless class.
    ///
    /// In the GRH: the IPv4 TOS byte on RoCE v2 (DSCP << 2 | ECN) [default: none; railsweep
    /// warns].
    #[cfg_attr(
        feature = "cli",
        arg(long = "tclass", value_name = "TC", value_parser = traffic_class_arg)
    )]
    pub tclass: Option<u8>,

    /// Service level, 0-15 (ib_write_bw --sl).
    ///
    /// The VLAN priority on RoCE.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'S', long = "sl", value_name = "SL", value_parser = service_level_arg)
    )]
    pub sl: Option<u8>,

    /// Path MTU, 256 to 4096 (ib_write_bw -m).
    ///
    /// 256, 512, 1024, 2048 or 4096; default: the smaller active MTU of both ports.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'm', long = "mtu", value_name = "BYTES", value_parser = mtu_arg)
    )]
    pub mtu: Option<u32>,
}

/// How the sender feeds its queue pairs, every test's (ib_write_bw's flags). Absent values are
/// rdmabw's (ib_write_bw's) defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct QueueFlags {
    /// Send queue depth (ib_write_bw -t), at least 1.
    #[cfg_attr(
        feature = "cli",
        arg(short = 't', long = "tx-depth", value_name = "N", value_parser = at_least_one_arg)
    )]
    pub tx_depth: Option<u32>,

    /// A completion every N writes (ib_write_bw -Q).
    ///
    /// At least 1; default as ib_write_bw: 1 for one size above 8 KiB, the post list's length
    /// with -l, else 100.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'Q', long = "cq-mod", value_name = "N", value_parser = at_least_one_arg)
    )]
    pub cq_mod: Option<u32>,

    /// Writes per post call (ib_write_bw -l), at least 1.
    #[cfg_attr(
        feature = "cli",
        arg(
            short = 'l',
            long = "post_list",
            alias = "post-list",
            value_name = "N",
            value_parser = at_least_one_arg
        )
    )]
    pub post_list: Option<u32>,

    /// Largest message sent inline (ib_write_bw -I).
    ///
    /// 0 for RDMA WRITE by default.
    #[cfg_attr(
        feature = "cli",
        arg(
            short = 'I',
            long = "inline_size",
            alias = "inline-size",
            value_name = "BYTES"
        )
    )]
    pub inline_size: Option<u32>,

    /// Sleep on completion events (ib_write_bw -e).
    ///
    /// Instead of polling (ib_write_bw refuses -e for RDMA WRITE): the sender sleeps on the CQ's
    /// completion channel between completions; without -Q, at least half the send queue per
    /// completion.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'e', long = "use_event", alias = "use-event")
    )]
    pub use_event: bool,
}

/// A bandwidth test's thresholds, in Gb/s or in percent of the line rate.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct ThresholdFlags {
    /// Exit 1 below this many Gb/s (above 0).
    ///
    /// The average bandwidth of the largest size (railsweep: the rail counts as below
    /// threshold).
    #[cfg_attr(
        feature = "cli",
        arg(long = "min-gbps", value_name = "GBPS", value_parser = gbps_arg)
    )]
    pub min_gbps: Option<f64>,

    /// Exit 1 below this percentage of the line rate.
    ///
    /// Above 0, at most 100. The average bandwidth of the largest size, against the smaller line rate of both ports
    /// (railsweep: the rail counts as below threshold).
    #[cfg_attr(
        feature = "cli",
        arg(long = "min-line-rate-pct", value_name = "PCT", value_parser = line_rate_pct_arg)
    )]
    pub min_line_rate_pct: Option<f64>,
}

/// The traffic before and after each measured window, every timed test's.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct MarginFlags {
    /// Seconds of traffic before each measured window.
    ///
    /// rdmabw's default: -f with -D; with --window, as railsweep runs it, or when -f is 0, 0.05,
    /// and 0.2 with -b.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "SECONDS", value_parser = seconds_arg)
    )]
    pub warmup: Option<f64>,

    /// Seconds of traffic after each measured window.
    ///
    /// rdmabw's default: -f with -D; with --window, as railsweep runs it, or when -f is 0, 0.25
    /// with -b and 0 otherwise: one direction's window closes with its queue still full.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "SECONDS", value_parser = seconds_arg)
    )]
    pub cooldown: Option<f64>,
}

/// How long a timed test runs, as ib_write_bw and rdmabw take it: `-D` is the whole test with
/// the first and last `-f` seconds warm-up and cool-down, `--window` the measured seconds
/// alone (the warm-up before it, the cool-down after). railsweep takes the same flags for each
/// rail's test. The values are read raw; [`whole_test`] and each binary's checks judge them.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct LengthFlags {
    /// Seconds per test in all (ib_write_bw -D).
    ///
    /// As ib_write_bw: the first and last -f seconds (default a quarter of -D, in whole seconds)
    /// are warm-up and cool-down, the middle is measured.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'D', long = "duration", value_name = "SECONDS")
    )]
    pub duration: Option<f64>,

    /// Measure exactly this many seconds per test.
    ///
    /// With --warmup before and --cooldown after it (-D's perftest timing measures less than
    /// -D).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "SECONDS", conflicts_with = "duration")
    )]
    pub window: Option<f64>,

    /// Warm-up and cool-down inside -D (ib_write_bw -f).
    ///
    /// Seconds of each inside each -D test; default a quarter of -D, in whole seconds. With
    /// --window, the warm-up before and the cool-down after it.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'f', long = "margin", value_name = "SECONDS")
    )]
    pub margin: Option<f64>,
}

/// A timed test's seconds: warm-up, measured window, cool-down.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Seconds of traffic before the window.
    pub warmup_s: f64,
    /// The measured seconds.
    pub measured_s: f64,
    /// Seconds of traffic after the window.
    pub cooldown_s: f64,
}

/// rdmabw's own warm-up and cool-down around a window when no flag sets them, one direction
/// or both (`-b`).
pub fn short_margins(bidirectional: bool) -> (f64, f64) {
    // An RC queue pair writes at full rate from its first message: the first completion comes
    // one message and one round trip after the first post (a NIC: microseconds; the lab: about
    // 3 ms), and completions then follow at the link's rate. In the lab, six alternating rounds
    // of -D 3 with 0, 0.05 and 0.2 s of warm-up averaged 0.303, 0.305 and 0.296 Gb/s; without
    // warm-up the start shows in p1 (one of six runs: 0.04 Gb/s). 0.05 s leaves that start out.
    // Both directions: 0.2 s, so that the peer's traffic (started a moment apart) is flowing
    // when this side's window opens.
    // One direction: the window closes on this side's completions, with the queue still full,
    // so nothing after it changes the figure. Both directions: keep loading the link while the
    // peer's window (started a moment apart) closes.
    if bidirectional {
        (0.2, 0.25)
    } else {
        (0.05, 0.0)
    }
}

/// perftest's `-D total` with `-f margin` (`None`: a quarter of `total` in whole seconds, as
/// perftest computes it), `--warmup`/`--cooldown` where given taking the margin's place; a
/// margin of 0 (perftest's for `-D` 1 to 3) leaves `short` (warm-up, cool-down) inside the
/// test instead, rdmabw's short start. `Err`: nothing is left to measure, in words that name
/// the flags and the fix.
///
/// # Errors
///
/// The margins fill the whole test.
pub fn whole_test(
    total: f64,
    margin: Option<f64>,
    margins: &MarginFlags,
    short: (f64, f64),
) -> Result<Timing, String> {
    let margin = margin.unwrap_or((total / 4.0).floor());
    let (w, c) = if margin > 0.0 {
        (margin, margin)
    } else {
        short
    };
    let (w, c) = (margins.warmup.unwrap_or(w), margins.cooldown.unwrap_or(c));
    let measured = total - w - c;
    if measured <= 0.0 {
        return Err(format!(
            "-D {total} with {w} s of warm-up and {c} s of cool-down (-f/--warmup/--cooldown) \
             leaves nothing to measure: -D is the whole test, as in ib_write_bw; give a longer \
             -D, a smaller -f, or --window {total} to measure {total} s"
        ));
    }
    Ok(Timing {
        warmup_s: w,
        measured_s: measured,
        cooldown_s: c,
    })
}

/// The test parameters railsweep passes through to every `rdmabw client` it runs, as both
/// binaries' command lines take them: one definition, one type per flag, every value valid.
/// Absent values are rdmabw's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct TestFlags {
    /// `-s`.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub message: SizeFlags,
    /// `-q`, `-b`, `--data_validation`.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub shape: BwShapeFlags,
    /// `--tclass`, `--sl`, `-m`.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub path: PathFlags,
    /// `-t`, `-Q`, `-l`, `-I`, `-e`.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub queue: QueueFlags,
    /// `--min-gbps`, `--min-line-rate-pct`.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub thresholds: ThresholdFlags,
    /// `--warmup`, `--cooldown`.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub margins: MarginFlags,
}

/// The latency flags railsweep and `rdmabw lat` both take, defined once.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct LatencyFlags {
    /// Exit 1 above this p99 latency, usec.
    ///
    /// The p99 (one-way, from the histogram) of any size (railsweep, with `--test bw,lat`: the
    /// rail counts as below threshold).
    #[cfg_attr(
        feature = "cli",
        arg(long = "max-p99-us", value_name = "USEC", value_parser = positive_arg)
    )]
    pub max_p99_us: Option<f64>,
}

/// This side's rail, as rdmabw's flags name it (ib_write_bw's `-d`, `-i`, `-x`, and rdmabw's
/// `--netdev`). railsweep writes it for each rail it runs, from the pod's rail report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct RailFlags {
    /// RDMA device (ib_write_bw -d).
    ///
    /// Default: the one that carries --netdev, else the first with a usable GID here.
    #[cfg_attr(feature = "cli", arg(short = 'd', long = "ib-dev", value_name = "DEV"))]
    pub ib_dev: Option<String>,

    /// Port of the device (ib_write_bw -i), from 1.
    ///
    /// Default: the port of --netdev, else the first usable.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'i', long = "ib-port", value_name = "PORT", value_parser = ib_port_arg)
    )]
    pub ib_port: Option<u8>,

    /// GID index (ib_write_bw -x).
    ///
    /// Default: the RoCE v2 IPv4 GID of an interface of this network namespace (of --netdev when
    /// given).
    #[cfg_attr(
        feature = "cli",
        arg(short = 'x', long = "gid-index", value_name = "INDEX", value_parser = gid_index_arg)
    )]
    pub gid_index: Option<u32>,

    /// The rail by its interface (picks device and GID).
    #[cfg_attr(feature = "cli", arg(long, value_name = "IFACE"))]
    pub netdev: Option<String>,
}

/// A client's request for the server's end of the rail (rdmabw's own flags).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct ServerRailFlags {
    /// Client: the server's device.
    #[cfg_attr(feature = "cli", arg(long = "server-dev", value_name = "DEV"))]
    pub server_dev: Option<String>,

    /// Client: the server's interface.
    ///
    /// It picks the server's device and GID.
    #[cfg_attr(feature = "cli", arg(long = "server-netdev", value_name = "IFACE"))]
    pub server_netdev: Option<String>,

    /// Client: the server's GID index.
    #[cfg_attr(
        feature = "cli",
        arg(long = "server-gid-index", value_name = "INDEX", value_parser = gid_index_arg)
    )]
    pub server_gid_index: Option<u32>,
}

/// What railsweep asks of `rdmabw lat` on a rail (`--test bw,lat`): ib_write_lat's test (2 B,
/// in host memory) with the rail's path settings, `-n` exchanges where `--lat-iters` says, and
/// the limit. The bandwidth flags (queue pairs, thresholds, GPU) are not a ping-pong's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatTest {
    /// `--tclass`, `--sl`, `-m`: the bandwidth test's.
    pub path: PathFlags,
    /// `-n`: the exchanges, at least [`LAT_MIN_ITERS`]; `None`: [`LAT_DEFAULT_ITERS`].
    pub iters: Option<u64>,
    /// `--max-p99-us`.
    pub limits: LatencyFlags,
}

/// Pushes `flag value` onto `v` when there is a value.
fn opt(v: &mut Vec<String>, flag: &str, value: Option<String>) {
    if let Some(value) = value {
        v.extend([flag.to_string(), value]);
    }
}

impl TestFlags {
    /// The flags as rdmabw's command line takes them, only those given: [`Self::shape_argv`]
    /// and then [`Self::tuning_argv`].
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = self.shape_argv();
        v.extend(self.tuning_argv());
        v
    }

    /// The test's shape, `-s` and `-q`, which lead railsweep's commands (the rail's selection
    /// follows them, then the rest).
    pub fn shape_argv(&self) -> Vec<String> {
        let mut v = self.message.to_argv();
        opt(&mut v, "-q", self.shape.qp.map(|q| q.to_string()));
        v
    }

    /// Every flag but the shape: traffic class, transport, MTU, thresholds, warm-up, cool-down.
    pub fn tuning_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "--tclass", self.path.tclass.map(|t| t.to_string()));
        if self.shape.bidirectional {
            v.push("-b".to_string());
        }
        opt(&mut v, "--sl", self.path.sl.map(|x| x.to_string()));
        v.extend(self.queue.argv_but_event());
        if self.shape.data_validation {
            v.push("--data_validation".to_string());
        }
        if self.queue.use_event {
            v.push("-e".to_string());
        }
        opt(&mut v, "-m", self.path.mtu.map(|m| m.to_string()));
        v.extend(self.thresholds.to_argv());
        v.extend(self.margins.to_argv());
        v
    }

    /// The message size, given or the default.
    pub fn size_bytes(&self) -> u64 {
        self.message.size.unwrap_or(DEFAULT_SIZE_BYTES)
    }

    /// The queue pairs, given or the default (1).
    pub fn qps(&self) -> u32 {
        self.shape.qp.unwrap_or(1)
    }
}

impl SizeFlags {
    /// `-s BYTES` when given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "-s", self.size.map(|s| s.to_string()));
        v
    }
}

impl PathFlags {
    /// The flags as rdmabw's command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "--tclass", self.tclass.map(|t| t.to_string()));
        opt(&mut v, "--sl", self.sl.map(|x| x.to_string()));
        opt(&mut v, "-m", self.mtu.map(|m| m.to_string()));
        v
    }
}

impl QueueFlags {
    /// The flags as rdmabw's command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = self.argv_but_event();
        if self.use_event {
            v.push("-e".to_string());
        }
        v
    }

    fn argv_but_event(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "-t", self.tx_depth.map(|x| x.to_string()));
        opt(&mut v, "-Q", self.cq_mod.map(|x| x.to_string()));
        opt(&mut v, "-l", self.post_list.map(|x| x.to_string()));
        opt(&mut v, "-I", self.inline_size.map(|x| x.to_string()));
        v
    }
}

impl ThresholdFlags {
    /// The flags as rdmabw's command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "--min-gbps", self.min_gbps.map(fmt_num));
        opt(
            &mut v,
            "--min-line-rate-pct",
            self.min_line_rate_pct.map(fmt_num),
        );
        v
    }
}

impl MarginFlags {
    /// The flags as rdmabw's command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "--warmup", self.warmup.map(fmt_num));
        opt(&mut v, "--cooldown", self.cooldown.map(fmt_num));
        v
    }
}

impl LatencyFlags {
    /// The flags as `rdmabw lat`'s command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "--max-p99-us", self.max_p99_us.map(fmt_num));
        v
    }
}

impl RailFlags {
    /// The flags as rdmabw's command line takes them, only those given: `-d DEV -x INDEX
    /// [-i PORT]`, `--netdev IFACE`.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "-d", self.ib_dev.clone());
        opt(&mut v, "-x", self.gid_index.map(|g| g.to_string()));
        opt(&mut v, "-i", self.ib_port.map(|p| p.to_string()));
        opt(&mut v, "--netdev", self.netdev.clone());
        v
    }
}

impl ServerRailFlags {
    /// The flags as rdmabw's command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        opt(&mut v, "--server-dev", self.server_dev.clone());
        opt(
            &mut v,
            "--server-gid-index",
            self.server_gid_index.map(|g| g.to_string()),
        );
        opt(&mut v, "--server-netdev", self.server_netdev.clone());
        v
    }
}

impl LatTest {
    /// The flags as `rdmabw lat`'s command line takes them, only those given (the rail and the
    /// host are the caller's).
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = self.path.to_argv();
        opt(&mut v, "-n", self.iters.map(|n| n.to_string()));
        v.extend(self.limits.to_argv());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_given_flags_are_passed() {
        assert!(TestFlags::default().to_argv().is_empty());
        assert!(LatTest::default().to_argv().is_empty());
        assert!(RailFlags::default().to_argv().is_empty());
        let f = TestFlags {
            shape: BwShapeFlags {
                bidirectional: true,
                ..BwShapeFlags::default()
            },
            path: PathFlags {
                sl: Some(3),
                ..PathFlags::default()
            },
            queue: QueueFlags {
                cq_mod: Some(4),
                ..QueueFlags::default()
            },
            ..TestFlags::default()
        };
        assert_eq!(f.to_argv().join(" "), "-b --sl 3 -Q 4");
        let mut v = f.clone();
        v.shape.data_validation = true;
        assert_eq!(v.to_argv().join(" "), "-b --sl 3 -Q 4 --data_validation");
        let e = QueueFlags {
            use_event: true,
            cq_mod: Some(64),
            ..QueueFlags::default()
        };
        assert_eq!(e.to_argv().join(" "), "-Q 64 -e");
        let lat = LatTest {
            path: PathFlags {
                tclass: Some(41),
                mtu: Some(1024),
                ..PathFlags::default()
            },
            iters: Some(20),
            limits: LatencyFlags {
                max_p99_us: Some(7.5),
            },
        };
        assert_eq!(
            lat.to_argv().join(" "),
            "--tclass 41 -m 1024 -n 20 --max-p99-us 7.5"
        );
    }
}
