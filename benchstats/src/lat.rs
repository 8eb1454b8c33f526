//! The statistics of `scripts/bench-lat`: per size and figure (typical, 99%), the median of each
//! arm's runs (`rdmabw`, `perftest`, and `perftest-aa`, ib_write_lat again as the A/A control),
//! and two ratios to perftest's median: rdmabw's (the comparison) and perftest-aa's (the bench's
//! own noise). `bench-stats lat RUNS_TSV` prints [`lat_summary`].

use std::fmt::Write as _;

use super::Tsv;
use results::stats::median;

/// The arms of a round, in the table's order.
pub const ARMS: [&str; 3] = ["rdmabw", "perftest", "perftest-aa"];

/// One run of one arm at one size: a row of bench-lat's `runs.tsv`.
#[derive(Debug, Clone, PartialEq)]
pub struct LatRun {
    /// `rdmabw`, `perftest` or `perftest-aa`.
    pub arm: String,
    /// Message size, bytes.
    pub size: u64,
    /// The typical (median) one-way latency of the run, microseconds.
    pub typical_us: f64,
    /// Its 99th percentile, microseconds.
    pub p99_us: f64,
}

/// Reads bench-lat's `runs.tsv` (a header naming `arm`, `size`, `typical_us` and `p99_us`).
///
/// # Errors
///
/// A missing column, or a cell that is not a number; the error names the line.
pub fn read_lat_runs(tsv: &str) -> Result<Vec<LatRun>, String> {
    let table = Tsv::read(tsv, &["arm", "size", "typical_us", "p99_us"])?;
    table
        .rows()
        .map(|row| {
            Ok(LatRun {
                arm: row.text(0)?.to_string(),
                size: row.whole(1)?,
                typical_us: row.number(2)?,
                p99_us: row.number(3)?,
            })
        })
        .collect()
}

/// Which figure of a run.
type Pick = fn(&LatRun) -> f64;

/// The median of `arm`'s runs at `size` of the figure `get` picks.
fn arm_median(runs: &[LatRun], arm: &str, size: u64, get: Pick) -> Option<f64> {
    let v: Vec<f64> = runs
        .iter()
        .filter(|r| r.arm == arm && r.size == size)
        .map(get)
        .collect();
    median(&v)
}

/// The table: per size (ascending) the typical then the 99% latency, each arm's median and
/// the two ratios to perftest's (`-` where an arm has no run or perftest's median is 0).
pub fn lat_summary(runs: &[LatRun]) -> String {
    let mut sizes: Vec<u64> = runs.iter().map(|r| r.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut out = format!(
        "{:>8} {:<10} {:>12} {:>12} {:>12} {:>16} {:>16}\n",
        "size",
        "figure",
        "rdmabw",
        "perftest",
        "perftest-aa",
        "rdmabw/perftest",
        "A/A (aa/perftest)"
    );
    let figures: [(&str, Pick); 2] = [("typical_us", |r| r.typical_us), ("p99_us", |r| r.p99_us)];
    let cell = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"));
    for size in sizes {
        for (name, get) in figures {
            let [r, q, a] = ARMS.map(|arm| arm_median(runs, arm, size, get));
            let ratio = |x: Option<f64>| match (x, q) {
                (Some(x), Some(q)) if q > 0.0 => Some(x / q),
                _ => None,
            };
            let _ = writeln!(
                out,
                "{size:>8} {name:<10} {:>12} {:>12} {:>12} {:>16} {:>16}",
                cell(r),
                cell(q),
                cell(a),
                cell(ratio(r)),
                cell(ratio(a))
            );
        }
    }
    out.push_str(
        "(latencies in microseconds, one-way: half a round trip; a ratio below 1 is faster than \
         perftest)\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUNS: &str = "boot\tarm\tround\tsize\ttypical_us\tp99_us\n\
        1\trdmabw\t1\t2\t46.0\t230\n\
        1\tperftest\t1\t2\t46.4\t650\n\
        1\tperftest-aa\t1\t2\t46.1\t670\n\
        1\trdmabw\t2\t2\t47.0\t236\n\
        1\tperftest\t2\t2\t46.2\t654\n\
        1\tperftest-aa\t2\t2\t45.9\t676\n\
        \n\
        1\trdmabw\t1\t65536\t1277\t3124\n\
        1\tperftest\t1\t65536\t1246\t3253\n";

    #[test]
    fn medians_and_ratios_per_size_and_figure() {
        let runs = read_lat_runs(RUNS).expect("reads");
        assert_eq!(runs.len(), 8);
        let table = lat_summary(&runs);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("rdmabw/perftest"), "{table}");
        // 2 B typical: medians 46.5, 46.3, 46.0; ratios 46.5/46.3 and 46.0/46.3.
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "2",
                "typical_us",
                "46.500",
                "46.300",
                "46.000",
                "1.004",
                "0.994"
            ]
        );
        assert!(lines[2].starts_with("       2 p99_us"), "{table}");
        // 64 KiB: no perftest-aa run, so no A/A ratio.
        let cells: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(
            cells,
            [
                "65536",
                "typical_us",
                "1277.000",
                "1246.000",
                "-",
                "1.025",
                "-"
            ]
        );
        assert!(lines[5].starts_with("(latencies in microseconds"));
    }

    #[test]
    fn a_bad_cell_names_its_line() {
        let e = read_lat_runs("arm\tsize\ttypical_us\tp99_us\nrdmabw\t2\tfast\t1\n")
            .expect_err("not a number");
        assert_eq!(e, "line 2: `fast` is not a number");
        let e = read_lat_runs("arm\tsize\ttypical_us\tp99_us\nrdmabw\t2.5\t1\t1\n")
            .expect_err("not whole");
        assert_eq!(e, "line 2: `2.5` is not a whole number");
        assert!(read_lat_runs("arm\tsize\n")
            .expect_err("columns")
            .contains("typical_us"));
    }
}
