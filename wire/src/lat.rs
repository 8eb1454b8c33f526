//! Latency (`rdmabw lat`, the drop-in for perftest's `ib_write_lat`): the statistics of one
//! message size as ib_write_lat computes them ([`LatencyStats`], [`RoundTrips`]), and the typed
//! rows of `--json`/`--csv`.

use serde::{Deserialize, Serialize};

pub use super::lat_stats::{LatencyStats, RoundTrips, MAX_KEPT_SAMPLES};
use super::params::TestParams;
use super::report::{Role, TestStatus};

/// One message size of a latency test, as a row of `rdmabw lat --csv` (and an element of the
/// JSON document's `results`): where it ran, then the statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatRow {
    /// The side that measured this row.
    pub role: Role,
    /// This side's RDMA device.
    pub device: String,
    /// Its port.
    pub port: u8,
    /// Its GID index.
    pub gid_index: u32,
    /// Its interface, when known.
    pub netdev: Option<String>,
    /// The peer's host (as given to the client, or its address on the server).
    pub remote_host: String,
    /// The peer's RDMA device.
    pub remote_device: String,
    /// Bytes per RDMA WRITE.
    pub msg_size_bytes: u64,
    /// Exchanges run (`-n`, or as many as fitted in `-D`).
    pub iterations: u64,
    /// See [`LatencyStats::samples`].
    pub samples: u64,
    /// See [`LatencyStats`]: ib_write_lat's columns, in microseconds.
    pub t_min_us: f64,
    /// Largest sample.
    pub t_max_us: f64,
    /// Median.
    pub t_typical_us: f64,
    /// Mean.
    pub t_avg_us: f64,
    /// Standard deviation.
    pub t_stdev_us: f64,
    /// ib_write_lat's 99% column.
    pub t_p99_us: f64,
    /// ib_write_lat's 99.9% column.
    pub t_p99_9_us: f64,
    /// Histogram median.
    pub p50_us: f64,
    /// Histogram 99th percentile (what `--max-p99-us` checks).
    pub p99_us: f64,
    /// Histogram 99.9th percentile.
    pub p99_9_us: f64,
    /// Histogram maximum.
    pub max_us: f64,
    /// `ok`, or `below_threshold` when `p99_us` is above `--max-p99-us`.
    pub status: TestStatus,
}

/// Where a latency test ran, for its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct LatContext {
    /// The side whose rows these are.
    pub role: Role,
    /// Its device, port, GID index and interface.
    pub device: String,
    /// Port.
    pub port: u8,
    /// GID index.
    pub gid_index: u32,
    /// Interface.
    pub netdev: Option<String>,
    /// The peer's host and device.
    pub remote_host: String,
    /// The peer's device.
    pub remote_device: String,
}

impl LatRow {
    /// The row of one size: `iterations` exchanges whose statistics are `s`, judged against
    /// `max_p99_us`.
    pub fn new(
        ctx: &LatContext,
        msg_size_bytes: u64,
        iterations: u64,
        s: &LatencyStats,
        max_p99_us: Option<f64>,
    ) -> LatRow {
        let status = if crate::threshold::above_max_p99(s.p99_us, max_p99_us) {
            TestStatus::BelowThreshold
        } else {
            TestStatus::Ok
        };
        LatRow {
            role: ctx.role,
            device: ctx.device.clone(),
            port: ctx.port,
            gid_index: ctx.gid_index,
            netdev: ctx.netdev.clone(),
            remote_host: ctx.remote_host.clone(),
            remote_device: ctx.remote_device.clone(),
            msg_size_bytes,
            iterations,
            samples: s.samples,
            t_min_us: s.t_min_us,
            t_max_us: s.t_max_us,
            t_typical_us: s.t_typical_us,
            t_avg_us: s.t_avg_us,
            t_stdev_us: s.t_stdev_us,
            t_p99_us: s.t_p99_us,
            t_p99_9_us: s.t_p99_9_us,
            p50_us: s.p50_us,
            p99_us: s.p99_us,
            p99_9_us: s.p99_9_us,
            max_us: s.max_us,
            status,
        }
    }
}

/// The document `rdmabw lat --json` prints: one per test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatReport {
    /// [`super::REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Always `latency`: tells this document from a bandwidth report.
    pub test: String,
    /// The side that printed it.
    pub role: Role,
    /// The test's parameters.
    pub params: TestParams,
    /// Path MTU of the QP, bytes.
    pub path_mtu_bytes: u32,
    /// `--max-p99-us`, when given.
    pub max_p99_us: Option<f64>,
    /// This side's rows, one per size.
    pub results: Vec<LatRow>,
    /// The peer's rows (what it measured), one per size.
    pub peer_results: Vec<LatRow>,
    /// `ok`; `below_threshold` when any of this side's rows is; `failed` with `error`.
    pub status: TestStatus,
    /// Why the test failed or is below its threshold.
    pub error: Option<String>,
    /// Which tool the other end was (absent in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<super::report::PeerTool>,
}

impl LatReport {
    /// The report of this side's `results` and the peer's: its status is the worst of this
    /// side's rows, with the first row above the threshold named in `error`.
    pub fn new(
        role: Role,
        params: TestParams,
        path_mtu_bytes: u32,
        max_p99_us: Option<f64>,
        results: Vec<LatRow>,
        peer_results: Vec<LatRow>,
    ) -> LatReport {
        let over = results
            .iter()
            .find(|r| r.status == TestStatus::BelowThreshold);
        let (status, error) = match (over, max_p99_us) {
            (Some(r), Some(m)) => (
                TestStatus::BelowThreshold,
                Some(format!(
                    "{} B: p99 latency {:.2} us is above --max-p99-us {m}",
                    r.msg_size_bytes, r.p99_us
                )),
            ),
            _ => (TestStatus::Ok, None),
        };
        LatReport {
            schema_version: super::REPORT_SCHEMA_VERSION,
            test: "latency".into(),
            role,
            params,
            path_mtu_bytes,
            max_p99_us,
            results,
            peer_results,
            status,
            error,
            peer: None,
        }
    }
}

impl LatReport {
    /// Writes this side's rows (and with `peer`, the peer's after them) as CSV with a header,
    /// the columns being [`LatRow`]'s fields.
    pub fn write_csv<W: std::io::Write>(&self, w: W, peer: bool) -> Result<(), csv::Error> {
        let mut out = csv::Writer::from_writer(w);
        let theirs: &[LatRow] = if peer { &self.peer_results } else { &[] };
        for r in self.results.iter().chain(theirs) {
            out.serialize(r)?;
        }
        out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_row_above_max_p99_makes_the_report_below_threshold_and_names_it() {
        let ctx = LatContext {
            role: Role::Client,
            device: "rxe0".into(),
            port: 1,
            gid_index: 1,
            netdev: Some("net1".into()),
            remote_host: "10.0.0.2".into(),
            remote_device: "rxe1".into(),
        };
        let s = LatencyStats::from_round_trips_ns(&[20_000; 100]).unwrap();
        let ok = LatRow::new(&ctx, 2, 100, &s, Some(10.5));
        assert_eq!(ok.status, TestStatus::Ok);
        let over = LatRow::new(&ctx, 2, 100, &s, Some(9.5));
        assert_eq!(over.status, TestStatus::BelowThreshold);
        let params = crate::params::TestParams::write_lat(
            crate::params::Sizes::One { msg_size_bytes: 2 },
            crate::params::TestLength::Iterations { iterations: 100 },
        );
        let r = LatReport::new(
            Role::Client,
            params.clone(),
            1024,
            Some(9.5),
            vec![over],
            vec![],
        );
        assert_eq!(r.status, TestStatus::BelowThreshold);
        assert!(r
            .error
            .as_deref()
            .unwrap()
            .contains("above --max-p99-us 9.5"));
        let r = LatReport::new(Role::Client, params, 1024, None, vec![ok.clone()], vec![]);
        assert_eq!(r.status, TestStatus::Ok);
        // The JSON names the test and never carries the raw samples.
        let j = serde_json::to_string(&r).unwrap();
        assert!(
            j.contains("\"test\":\"latency\"") && !j.contains("samples_us"),
            "{j}"
        );
        // CSV columns come from the row's fields; the peer's rows only when asked.
        let mut both = r.clone();
        both.peer_results = vec![ok.clone()];
        let mut v = Vec::new();
        both.write_csv(&mut v, false).unwrap();
        assert_eq!(String::from_utf8(v).unwrap().lines().count(), 2);
        let mut v = Vec::new();
        both.write_csv(&mut v, true).unwrap();
        let text = String::from_utf8(v).unwrap();
        assert_eq!(text.lines().count(), 3);
        assert!(
            text.starts_with("role,device,port,gid_index,netdev,remote_host"),
            "{text}"
        );
        assert!(text.contains("p99_us,p99_9_us,max_us,status"), "{text}");
    }
}
