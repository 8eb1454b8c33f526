//! The test parameters that rdmabw and railsweep both take, defined once so that the same
//! spelling means the same thing in both (`railsweep run -b -Q 4` runs `rdmabw client -b -Q 4`):
//! clap arguments (with the `cli` feature), and the argv railsweep hands to rdmabw.
//!
//! [`TestFlags`] is every flag railsweep passes through to `rdmabw client`, [`TransportFlags`]
//! among them. Each binary resolves them into its own validated configuration (the range checks
//! that differ, such as railsweep refusing `--min-gbps 0`, are there). Flags that both binaries
//! spell alike but read differently stay out of it, each in its own binary:
//! - `-D`/`--duration`: rdmabw's is ib_write_bw's whole test, the margins inside it; railsweep's
//!   is the measured seconds (it hands rdmabw `--window`).
//! - `-f`/`--margin`: rdmabw's is ib_write_bw's warm-up and cool-down; railsweep's is the time a
//!   rail may take beyond `-D` before railsweep stops it.
//! - `-a`/`--all`: rdmabw sweeps 2 B .. 8 MiB; railsweep refuses it (a row is one size).
//! - `--use_cuda`: rdmabw's puts this side's buffer in a GPU; railsweep's puts both sides'.
//! - `-p`/`--port`: railsweep's is also its daemon's port (not a test parameter).

/// Message sizes as ib_write_bw writes them: bytes, or with a K, M or G suffix (powers of 2,
/// `64K` = 65536; `KB`/`KiB`, `MB`/`MiB`, `GB`/`GiB` the same).
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// The queue pairs' transport settings, ib_write_bw's flags: what railsweep passes through to
/// every rdmabw client it runs. Absent values are rdmabw's (ib_write_bw's) defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct TransportFlags {
    /// Both directions at once (ib_write_bw -b).
    ///
    /// Rows are the sum of both, as ib_write_bw's.
    #[cfg_attr(feature = "cli", arg(short = 'b', long = "bidirectional"))]
    pub bidirectional: bool,

    /// Service level, 0-15 (ib_write_bw --sl).
    ///
    /// The VLAN priority on RoCE.
    #[cfg_attr(feature = "cli", arg(short = 'S', long = "sl", value_name = "SL"))]
    pub sl: Option<u8>,

    /// Send queue depth (ib_write_bw -t).
    #[cfg_attr(feature = "cli", arg(short = 't', long = "tx-depth", value_name = "N"))]
    pub tx_depth: Option<u32>,

    /// A completion every N writes (ib_write_bw -Q).
    ///
    /// Default as ib_write_bw: 1 for one size above 8 KiB, the post list's length with -l, else
    /// 100.
    #[cfg_attr(feature = "cli", arg(short = 'Q', long = "cq-mod", value_name = "N"))]
    pub cq_mod: Option<u32>,

    /// Writes per post call (ib_write_bw -l).
    #[cfg_attr(
        feature = "cli",
        arg(short = 'l', long = "post_list", alias = "post-list", value_name = "N")
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

/// The test parameters railsweep passes through to every `rdmabw client` it runs (message
/// size, queue pairs, traffic class, transport, MTU, thresholds, warm-up and cool-down), as
/// both binaries' command lines take them: one definition, one type per flag. Absent values
/// are rdmabw's defaults. Only the types are checked here; each binary checks the ranges.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
pub struct TestFlags {
    /// Message size: bytes, or 64K, 1M (ib_write_bw -s).
    ///
    /// K/M/G suffixes are powers of 2; default 65536.
    #[cfg_attr(
        feature = "cli",
        arg(short = 's', long = "size", value_name = "BYTES", value_parser = size_arg)
    )]
    pub size: Option<u64>,

    /// Queue pairs (ib_write_bw -q; railsweep: per rail).
    ///
    /// Default 1.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'q', long = "qp", alias = "qps", value_name = "N")
    )]
    pub qp: Option<u32>,

    /// Traffic class, 0-255: 41 for a lossless class.
    ///
    /// In the GRH: the IPv4 TOS byte on RoCE v2 (DSCP << 2 | ECN) [default: none; railsweep
    /// warns].
    #[cfg_attr(feature = "cli", arg(long = "tclass", value_name = "TC"))]
    pub tclass: Option<u16>,

    /// The transport settings (-b, --sl, -t, -Q, -l, -I, -e, --data_validation).
    #[cfg_attr(feature = "cli", command(flatten))]
    pub transport: TransportFlags,

    /// Path MTU, 256 to 4096 (ib_write_bw -m).
    ///
    /// 256, 512, 1024, 2048 or 4096; default: the smaller active MTU of both ports.
    #[cfg_attr(feature = "cli", arg(short = 'm', long = "mtu", value_name = "BYTES"))]
    pub mtu: Option<u32>,

    /// Exit 1 below this many Gb/s.
    ///
    /// The average bandwidth of the largest size (railsweep: the rail counts as below
    /// threshold).
    #[cfg_attr(feature = "cli", arg(long = "min-gbps", value_name = "GBPS"))]
    pub min_gbps: Option<f64>,

    /// Exit 1 below this percentage of the line rate.
    ///
    /// The average bandwidth of the largest size, against the smaller line rate of both ports
    /// (railsweep: the rail counts as below threshold).
    #[cfg_attr(feature = "cli", arg(long = "min-line-rate-pct", value_name = "PCT"))]
    pub min_line_rate_pct: Option<f64>,

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

/// ib_write_lat's (and `rdmabw lat`'s) number of exchanges when `-n` is not given; railsweep's
/// latency test runs as many unless `--lat-iters` says.
pub const LAT_DEFAULT_ITERS: u64 = 1000;
/// ib_write_lat's least number of exchanges, which `rdmabw lat -n` and railsweep's
/// `--lat-iters` hold to.
pub const LAT_MIN_ITERS: u64 = 5;

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

/// `--max-p99-us`'s value parser: a finite number above 0.
#[cfg(feature = "cli")]
fn positive_arg(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number, got `{s}`")),
    }
}

/// The message size when -s is not given: ib_write_bw's, rdmabw's and railsweep's.
pub const DEFAULT_SIZE_BYTES: u64 = 65536;

/// `-s`'s value parser: [`parse_size`], naming what it takes.
#[cfg(feature = "cli")]
fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).ok_or_else(|| format!("expected bytes, or K, M or G (64K, 1M), got `{s}`"))
}

/// `--warmup`'s and `--cooldown`'s value parser: seconds, 0 to a week
/// ([`crate::params::MAX_SECONDS`]), which every `Duration` holds.
#[cfg(feature = "cli")]
fn seconds_arg(s: &str) -> Result<f64, String> {
    use crate::params::MAX_SECONDS;
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=MAX_SECONDS).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a non-negative number of seconds, at most {MAX_SECONDS} (a week), got `{s}`"
        )),
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
        let mut v = Vec::new();
        if let Some(s) = self.size {
            v.extend(["-s".to_string(), s.to_string()]);
        }
        if let Some(q) = self.qp {
            v.extend(["-q".to_string(), q.to_string()]);
        }
        v
    }

    /// Every flag but the shape: traffic class, transport, MTU, thresholds, warm-up, cool-down.
    pub fn tuning_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(tc) = self.tclass {
            v.extend(["--tclass".to_string(), tc.to_string()]);
        }
        v.extend(self.transport.to_argv());
        let mut opt = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                v.extend([flag.to_string(), value]);
            }
        };
        opt("-m", self.mtu.map(|m| m.to_string()));
        opt("--min-gbps", self.min_gbps.map(fmt_num));
        opt("--min-line-rate-pct", self.min_line_rate_pct.map(fmt_num));
        opt("--warmup", self.warmup.map(fmt_num));
        opt("--cooldown", self.cooldown.map(fmt_num));
        v
    }
}

/// A number as a flag's value: whole numbers without a fraction (`3`, not `3.0`), the others
/// as Rust prints them, which parse back to the same `f64`.
pub fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

impl LatencyFlags {
    /// The flags as `rdmabw lat`'s command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        self.max_p99_us
            .map(|m| vec!["--max-p99-us".to_string(), fmt_num(m)])
            .unwrap_or_default()
    }
}

impl TransportFlags {
    /// The flags as rdmabw's command line takes them, only those given.
    pub fn to_argv(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.bidirectional {
            v.push("-b".to_string());
        }
        let mut opt = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                v.extend([flag.to_string(), value]);
            }
        };
        opt("--sl", self.sl.map(|x| x.to_string()));
        opt("-t", self.tx_depth.map(|x| x.to_string()));
        opt("-Q", self.cq_mod.map(|x| x.to_string()));
        opt("-l", self.post_list.map(|x| x.to_string()));
        opt("-I", self.inline_size.map(|x| x.to_string()));
        if self.data_validation {
            v.push("--data_validation".to_string());
        }
        if self.use_event {
            v.push("-e".to_string());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_perftests_suffixes() {
        assert_eq!(parse_size("65536"), Some(65536));
        assert_eq!(parse_size("64K"), Some(65536));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("8MiB"), Some(8 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("1.5M"), None);
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn only_the_given_flags_are_passed() {
        assert!(TransportFlags::default().to_argv().is_empty());
        let f = TransportFlags {
            bidirectional: true,
            sl: Some(3),
            cq_mod: Some(4),
            ..TransportFlags::default()
        };
        assert_eq!(f.to_argv().join(" "), "-b --sl 3 -Q 4");
        let v = TransportFlags {
            data_validation: true,
            ..f
        };
        assert_eq!(v.to_argv().join(" "), "-b --sl 3 -Q 4 --data_validation");
        let e = TransportFlags {
            use_event: true,
            cq_mod: Some(64),
            ..TransportFlags::default()
        };
        assert_eq!(e.to_argv().join(" "), "-Q 64 -e");
    }
}
