//! The value parsers of the shared flags: the one place each range is checked. clap calls them
//! (so a bad value is a usage error naming the flag, exit 2, before any work), and so does
//! whatever reads a value from elsewhere.

use std::time::Duration;

use crate::params::{MAX_MSG_BYTES, MAX_SECONDS};

/// The path MTUs RDMA knows, in bytes.
pub const MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

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

/// `-s`: a message size ([`parse_size`]), 1 byte to [`MAX_MSG_BYTES`] (the buffer rdmabw
/// registers holds two of the largest).
pub fn size_arg(s: &str) -> Result<u64, String> {
    match parse_size(s) {
        Some(n) if (1..=MAX_MSG_BYTES).contains(&n) => Ok(n),
        Some(0) => Err("a message is at least 1 byte (e.g. -s 65536)".into()),
        Some(_) => Err(format!(
            "above the largest buffer rdmabw registers ({MAX_MSG_BYTES} bytes = 1 GiB per \
             message); use at most -s 1G"
        )),
        None => Err(format!("expected bytes, or K, M or G (64K, 1M), got `{s}`")),
    }
}

/// A count that must be at least 1 (`-q`, `-t`, `-Q`, `-l`).
pub fn at_least_one_arg(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("expected a whole number, at least 1, got `{s}`")),
    }
}

/// `--tclass`: the traffic class, one byte.
pub fn traffic_class_arg(s: &str) -> Result<u8, String> {
    s.trim().parse::<u8>().map_err(|_| {
        format!(
            "the traffic class is one byte, 0-255 (e.g. --tclass 41 for DSCP 10 with ECN 01, or \
             --tclass 106 for DSCP 26), got `{s}`"
        )
    })
}

/// `--sl`: the service level, 0-15.
pub fn service_level_arg(s: &str) -> Result<u8, String> {
    match s.trim().parse::<u8>() {
        Ok(n) if n <= 15 => Ok(n),
        _ => Err(format!("service levels are 0-15, got `{s}`")),
    }
}

/// `-m`: one of the path MTUs ([`MTUS`]).
pub fn mtu_arg(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(m) if MTUS.contains(&m) => Ok(m),
        _ => Err(format!(
            "expected 256, 512, 1024, 2048 or 4096 (or leave it out for the smaller active MTU \
             of both ports), got `{s}`"
        )),
    }
}

/// `-i`, a device's port: numbered from 1.
pub fn ib_port_arg(s: &str) -> Result<u8, String> {
    match s.trim().parse::<u8>() {
        Ok(p) if p >= 1 => Ok(p),
        _ => Err(format!(
            "ports are numbered from 1 to 255 (e.g. -i 1), got `{s}`"
        )),
    }
}

/// `-x`, a GID table index.
pub fn gid_index_arg(s: &str) -> Result<u32, String> {
    s.trim()
        .parse::<u32>()
        .map_err(|_| format!("expected a GID table index (0, 1, ...), got `{s}`"))
}

/// `--min-gbps`: a finite bandwidth above 0, in Gb/s.
pub fn gbps_arg(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!(
            "expected a bandwidth in Gb/s above 0 (e.g. --min-gbps 90), got `{s}`"
        )),
    }
}

/// `--min-line-rate-pct`: a percentage above 0, at most 100.
pub fn line_rate_pct_arg(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!(
            "expected a percentage above 0 and at most 100 (e.g. 90), got `{s}`"
        )),
    }
}

/// `--max-p99-us`'s value parser: a finite number above 0.
pub fn positive_arg(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number, got `{s}`")),
    }
}

/// `--warmup`'s and `--cooldown`'s value parser: seconds, 0 to a week ([`MAX_SECONDS`]), which
/// every `Duration` holds.
pub fn seconds_arg(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..=MAX_SECONDS).contains(&v) => Ok(v),
        _ => Err(format!(
            "expected a non-negative number of seconds, at most {MAX_SECONDS} (a week), got `{s}`"
        )),
    }
}

/// `v` seconds as a `Duration`, clamped to 0 .. a week ([`MAX_SECONDS`]); NaN is 0. The value
/// parsers keep flags in that range already: this never panics whatever reaches it.
pub fn secs(v: f64) -> Duration {
    Duration::try_from_secs_f64(v.clamp(0.0, MAX_SECONDS)).unwrap_or(Duration::ZERO)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
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

    /// Each parser takes the ends of its range and refuses what lies beyond, naming the range.
    #[test]
    fn each_range_is_checked_here_with_its_ends() {
        assert_eq!(size_arg("1"), Ok(1));
        assert_eq!(size_arg("1G"), Ok(MAX_MSG_BYTES));
        assert!(size_arg("0").unwrap_err().contains("at least 1 byte"));
        assert!(size_arg("2G").unwrap_err().contains("largest buffer"));
        assert_eq!(at_least_one_arg("1"), Ok(1));
        assert!(at_least_one_arg("0").unwrap_err().contains("at least 1"));
        assert_eq!(traffic_class_arg("255"), Ok(255));
        assert!(traffic_class_arg("256").unwrap_err().contains("0-255"));
        assert_eq!(service_level_arg("15"), Ok(15));
        assert!(service_level_arg("16").unwrap_err().contains("0-15"));
        for m in MTUS {
            assert_eq!(mtu_arg(&m.to_string()), Ok(m));
        }
        assert!(mtu_arg("1500")
            .unwrap_err()
            .starts_with("expected 256, 512"));
        assert_eq!(ib_port_arg("1"), Ok(1));
        assert!(ib_port_arg("0").is_err());
        assert!(gbps_arg("0").is_err() && gbps_arg("NaN").is_err());
        assert_eq!(gbps_arg("0.5"), Ok(0.5));
        assert_eq!(line_rate_pct_arg("100"), Ok(100.0));
        assert!(line_rate_pct_arg("100.5").is_err() && line_rate_pct_arg("0").is_err());
        assert_eq!(seconds_arg("0"), Ok(0.0));
        assert!(seconds_arg("604801").unwrap_err().contains("a week"));
    }
}
