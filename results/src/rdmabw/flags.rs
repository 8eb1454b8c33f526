//! The test parameters that rdmabw and railsweep both take, defined once so that the same
//! spelling means the same thing in both (`railsweep run -b -Q 4` runs `rdmabw client -b -Q 4`):
//! clap arguments (with the `cli` feature), and the argv railsweep hands to rdmabw.

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
    /// Both directions at once (ib_write_bw -b); rows are the sum of both, as ib_write_bw.
    #[cfg_attr(feature = "cli", arg(short = 'b', long = "bidirectional"))]
    pub bidirectional: bool,

    /// Service level, 0-15 (ib_write_bw --sl; the VLAN priority on RoCE).
    #[cfg_attr(feature = "cli", arg(short = 'S', long = "sl", value_name = "SL"))]
    pub sl: Option<u8>,

    /// Send queue depth (ib_write_bw -t).
    #[cfg_attr(feature = "cli", arg(short = 't', long = "tx-depth", value_name = "N"))]
    pub tx_depth: Option<u32>,

    /// Signal one completion every N writes (ib_write_bw -Q). Default as ib_write_bw: 1 for
    /// one size above 8 KiB, the post list's length with -l, else 100.
    #[cfg_attr(feature = "cli", arg(short = 'Q', long = "cq-mod", value_name = "N"))]
    pub cq_mod: Option<u32>,

    /// Writes per post call (ib_write_bw -l).
    #[cfg_attr(
        feature = "cli",
        arg(short = 'l', long = "post_list", alias = "post-list", value_name = "N")
    )]
    pub post_list: Option<u32>,

    /// Largest message sent inline (ib_write_bw -I; 0 for RDMA WRITE by default).
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

    /// Check every byte the peer wrote once its writes are in: each QP and size writes its own
    /// pattern to a place of its own; a byte that differs fails the test (exit 1), naming its
    /// offset, the byte sent and the byte found (ib_write_bw --data_validation).
    #[cfg_attr(
        feature = "cli",
        arg(long = "data_validation", alias = "data-validation")
    )]
    pub data_validation: bool,
    /// Wait for completion events instead of polling (ib_write_bw -e, which refuses it for
    /// RDMA WRITE): the sender sleeps on the CQ's completion channel between completions;
    /// without -Q, at least half the send queue per completion.
    #[cfg_attr(
        feature = "cli",
        arg(short = 'e', long = "use_event", alias = "use-event")
    )]
    pub use_event: bool,
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
