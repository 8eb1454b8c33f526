//! `railsweep report` end to end, on the built binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[path = "support/process.rs"]
mod process;

use process::{assert_says, railsweep, stdout_of, text};
use results::{read_path, read_str, write_csv, write_json, NetworkMode, RailResult};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("results")
        .join("tests")
        .join("fixtures")
        .join("sweep-16x3.csv")
}

fn fixture_rows() -> Vec<RailResult> {
    read_path(fixture()).expect("fixture reads")
}

fn rows_of(mode: &NetworkMode) -> Vec<RailResult> {
    fixture_rows()
        .into_iter()
        .filter(|r| &r.network_mode == mode)
        .collect()
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// hostnetwork as CSV and ipvlan (without its slow rail) as JSON.
fn healthy_runs(dir: &Path) -> (PathBuf, PathBuf) {
    let host = dir.join("host.csv");
    write_csv(
        std::fs::File::create(&host).expect("create"),
        &rows_of(&NetworkMode::HostNetwork),
    )
    .expect("write");
    let ipvlan = dir.join("ipvlan.json");
    let rows: Vec<RailResult> = rows_of(&NetworkMode::Ipvlan)
        .into_iter()
        .filter(|r| r.rail != 7)
        .collect();
    write_json(
        std::fs::File::create(&ipvlan).expect("create"),
        "test",
        &rows,
    )
    .expect("write");
    (host, ipvlan)
}

#[test]
fn merges_csv_and_json_into_a_markdown_comparison_on_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, ipvlan) = healthy_runs(dir.path());
    let out = railsweep(&["report", path_str(&host), path_str(&ipvlan)]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(
        stdout.contains("| rail | hostnetwork | ipvlan |\n"),
        "{stdout}"
    );
    assert!(stdout.contains("| 7 | 96.87 | - |\n"), "{stdout}");
    assert!(
        stdout.contains(
            "- hostnetwork: 16 rails, 96.86 to 96.88 Gb/s (mean 96.87 Gb/s, 96.9% of line rate), 0 below 90.0 Gb/s, 0 failed\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("- ipvlan: 15 rails, 96.80 to 96.85 Gb/s"),
        "{stdout}"
    );
    // Logs go to stderr, never into the machine output.
    assert!(!stdout.contains("railsweep:"), "{stdout}");
    assert_says(&out.stderr, "read 16 rows from");
}

#[test]
fn label_names_columns_and_a_label_for_nothing_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, ipvlan) = healthy_runs(dir.path());
    let out = railsweep(&[
        "report",
        path_str(&host),
        path_str(&ipvlan),
        "--label",
        "hostnetwork=host net",
        "--label",
        "sweep-0601-ipvlan=IPvlan (Multus)",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("| rail | host net | IPvlan (Multus) |\n"),
        "{stdout}"
    );
    // The Runs table keeps each column's mode and run id.
    assert!(
        stdout.contains("| IPvlan (Multus) (ipvlan) | sweep-0601-ipvlan |"),
        "{stdout}"
    );
    let out = railsweep(&["report", path_str(&host), "--label", "sriov=VFs"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    assert_says(
        &out.stderr,
        "--label sriov=...: no run id or network mode `sriov` in the rows (they have: hostnetwork, sweep-0601-host)",
    );
    let out = railsweep(&["report", path_str(&host), "--label", "sriov"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    assert_says(&out.stderr, "expected RUN_OR_MODE=NAME");
}

#[test]
fn failed_or_below_threshold_rails_exit_1() {
    let out = railsweep(&["report", path_str(&fixture())]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("| 7 | 96.87 | 71.42 (below) | 96.87 |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| 12 | 96.87 | 96.83 | failed |"),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("1 rail(s) failed, 1 below threshold"));
}

#[test]
fn a_rail_below_the_given_threshold_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, _) = healthy_runs(dir.path());
    let ok = railsweep(&["report", path_str(&host), "--threshold-gbps", "96.86"]);
    assert_eq!(ok.status.code(), Some(0), "stderr: {}", text(&ok.stderr));
    let below = railsweep(&["report", path_str(&host), "--threshold-gbps", "96.87"]);
    assert_eq!(
        below.status.code(),
        Some(1),
        "stderr: {}",
        text(&below.stderr)
    );
    let stdout = text(&below.stdout);
    assert!(stdout.contains("| 1 | 96.86 (below) |"), "{stdout}");
    assert!(
        stdout.contains(", 4 below 96.87 Gb/s, 0 failed"),
        "{stdout}"
    );
}

/// Rows of `--test bw,lat`: rail 1 recorded below for its p99 (45 us over --max-p99-us 20),
/// rail 3 below for its bandwidth (under its 100 Gb/s), rail 2 at p99 9 us, the rest 4 us.
/// `--max-p99-us` judges every row's p99 anew and keeps the bandwidth judgement recorded.
#[test]
fn max_p99_us_judges_the_saved_latency_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows = rows_of(&NetworkMode::HostNetwork);
    for r in &mut rows {
        (r.lat_p50_us, r.lat_p99_us, r.lat_max_us) = (Some(1.5), Some(4.0), Some(4.0));
    }
    rows[1].lat_p99_us = Some(45.0);
    rows[1].status = results::RailStatus::BelowThreshold;
    rows[1].error = Some("p99 latency 45.00 us is above --max-p99-us 20".into());
    rows[2].lat_p99_us = Some(9.0);
    rows[3].status = results::RailStatus::BelowThreshold;
    rows[3].threshold_gbps = Some(100.0);
    let lat = dir.path().join("lat.csv");
    write_csv(std::fs::File::create(&lat).expect("create"), &rows).expect("write");
    let lat = path_str(&lat);
    for (extra, code, said) in [
        (&[][..], 1, "0 rail(s) failed, 2 below threshold"),
        (
            &["--max-p99-us", "50"][..],
            1,
            "0 rail(s) failed, 1 below threshold",
        ),
        (
            &["--max-p99-us", "8"][..],
            1,
            "0 rail(s) failed, 3 below threshold",
        ),
        (&["--max-p99-us", "50", "--threshold-gbps", "90"][..], 0, ""),
    ] {
        let mut args = vec!["report", lat];
        args.extend(extra);
        let out = railsweep(&args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{extra:?}: {stderr}");
        assert!(stderr.contains(said), "{extra:?}: {stderr}");
    }
    let out = railsweep(&["report", lat, "--max-p99-us", "8"]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("| 2 | 96.88 (below) |"), "{stdout}");
    // The same flag as run's: the same value parser.
    let bad = railsweep(&["report", lat, "--max-p99-us", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("expected a positive number, got `0`"));
}

#[test]
fn a_bad_file_exits_2_naming_file_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.csv");
    let good = std::fs::read_to_string(fixture()).expect("fixture");
    std::fs::write(&bad, good.replacen(",96.87,96.92,", ",96.87,fast,", 1)).expect("write");
    let out = railsweep(&["report", path_str(&fixture()), path_str(&bad)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no partial report on stdout");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{}:2:26: column `bw_peak_gbps`: expected a number, found `fast`",
            bad.display()
        )),
        "{stderr}"
    );
}

#[test]
fn missing_files_and_bad_arguments_exit_2() {
    let out = railsweep(&["report", "/nonexistent/run.csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent/run.csv"));
    assert_eq!(railsweep(&["report"]).status.code(), Some(2));
    let f = fixture();
    let fixture = path_str(&f);
    assert_eq!(
        railsweep(&["report", "-o", "pdf", fixture]).status.code(),
        Some(2)
    );
    assert_eq!(
        railsweep(&["report", "--threshold-gbps", "-3", fixture])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn the_same_run_twice_is_an_input_error() {
    let f = fixture();
    let out = railsweep(&["report", path_str(&f), path_str(&f)]);
    assert_eq!(out.status.code(), Some(2));
    assert_says(&out.stderr, "more than once");
}

#[test]
fn json_to_a_file_round_trips_and_logs_summaries() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, ipvlan) = healthy_runs(dir.path());
    let merged = dir.path().join("merged.json");
    let out = railsweep(&[
        "report",
        path_str(&host),
        path_str(&ipvlan),
        "--output-file",
        path_str(&merged),
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("\nhostnetwork: 16 rails, 96.86 to 96.88 Gb/s"),
        "{stderr}"
    );
    let mut expected = read_path(&host).expect("host");
    expected.extend(read_path(&ipvlan).expect("ipvlan"));
    assert_eq!(read_path(&merged).expect("merged json"), expected);
}

#[test]
fn csv_on_stdout_reads_back_and_stdin_is_accepted() {
    let f = fixture();
    let out = railsweep(&["report", "-o", "csv", path_str(&f)]);
    assert_eq!(out.status.code(), Some(1));
    let rows = read_str(&text(&out.stdout), "stdout.csv").expect("csv output parses");
    assert_eq!(rows, fixture_rows());

    let piped = Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(["report", "-o", "json", "-"])
        .stdin(std::fs::File::open(&f).expect("fixture"))
        .output()
        .expect("runs");
    assert_eq!(piped.status.code(), Some(1), "{}", text(&piped.stderr));
    assert!(text(&piped.stderr).contains("read 48 rows from -"));
    let rows = read_str(&text(&piped.stdout), "stdout.json").expect("json output parses");
    assert_eq!(rows, fixture_rows());
}

#[test]
fn a_closed_stdout_is_success_not_an_error() {
    // `railsweep report ... | head`: the reader went away, which is no failure of railsweep
    // (ripgrep's rule), even with failed rails in the input (exit 1 when stdout is read).
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let child = Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(["report", "-o", "csv", path_str(&fixture())])
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let out = child.wait_with_output().expect("ends");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn svg_output_takes_its_format_from_the_extension() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("chart.svg");
    let f = fixture();
    let out = railsweep(&["report", path_str(&f), "--output-file", path_str(&chart)]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let svg = std::fs::read_to_string(&chart).expect("svg written");
    assert!(svg.starts_with("<svg "), "{}", &svg[..svg.len().min(200)]);
    for needle in [
        ">\nrail\n<",
        ">\naverage Gb/s\n<",
        "line rate 100.0 Gb/s",
        "ipvlan",
    ] {
        assert!(svg.contains(needle), "svg lacks {needle:?}");
    }
}

#[test]
fn png_output_is_a_png_image_of_the_chart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("chart.PNG");
    let out = railsweep(&[
        "report",
        path_str(&fixture()),
        "--output-file",
        path_str(&chart),
    ]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    assert_says(&out.stderr, "wrote png to");
    let bytes = std::fs::read(&chart).expect("png written");
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "not a PNG: {:?}",
        &bytes[..bytes.len().min(40)]
    );
    let image = resvg::tiny_skia::Pixmap::decode_png(&bytes).expect("decodes");
    assert!(
        image.width() >= 1200 && image.height() >= 600,
        "{}x{}",
        image.width(),
        image.height()
    );
    // The first mode's bars (Tableau blue), and dark text or lines, are drawn.
    let has = |rgb: (u8, u8, u8)| {
        image
            .pixels()
            .iter()
            .any(|p| (p.red(), p.green(), p.blue(), p.alpha()) == (rgb.0, rgb.1, rgb.2, 255))
    };
    assert!(has((31, 119, 180)), "no bar of the first mode");
    assert!(has((0, 0, 0)), "no black text or line");

    // --format png says so whatever the name.
    let named = dir.path().join("chart.bin");
    let out = railsweep(&[
        "report",
        path_str(&fixture()),
        "-o",
        "png",
        "--output-file",
        path_str(&named),
    ]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    assert_eq!(std::fs::read(&named).expect("written"), bytes);
}

/// `rows` written as a JSON run (in.json in `dir`) and reported as CSV to merged.csv beside it,
/// which must end 0: the report's output, the CSV's path and its text.
fn report_to_csv(dir: &Path, rows: &[RailResult]) -> (std::process::Output, PathBuf, String) {
    let input = dir.join("in.json");
    write_json(std::fs::File::create(&input).expect("create"), "t", rows).expect("write");
    let merged = dir.join("merged.csv");
    let out = railsweep(&[
        "report",
        path_str(&input),
        "--output-file",
        path_str(&merged),
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let csv = std::fs::read_to_string(&merged).expect("csv");
    (out, merged, csv)
}

#[test]
fn csv_output_has_plain_numbers_and_its_counters_in_a_file_beside_it() {
    use results::rdmabw::counters::{CounterDelta, CounterReport, CounterSource, CounterUnit};
    use results::rdmabw::report::Role;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows = rows_of(&NetworkMode::HostNetwork);
    rows[0].bw_avg_gbps = Some(2.338_324_480_000_000_3);
    rows[0].counters = vec![CounterReport {
        role: Role::Server,
        device: "mlx5_0".into(),
        port: 1,
        netdev: None,
        span_s: 12.0,
        read_ms: 2.0,
        counters_read: 100,
        deltas: vec![CounterDelta {
            source: CounterSource::Hw,
            name: "out_of_sequence".into(),
            delta: 42,
            unit: CounterUnit::Packets,
        }],
    }];
    let (out, _, csv) = report_to_csv(dir.path(), &rows);
    assert!(csv.contains(",2.33832,"), "{csv}");
    assert!(
        !csv.contains("2.3383244") && !csv.contains("out_of_sequence"),
        "{csv}"
    );
    let counters = dir.path().join("merged.counters.csv");
    assert_says(
        &out.stderr,
        &format!("wrote the counters to {}", counters.display()),
    );
    let long = std::fs::read_to_string(&counters).expect("counters file");
    assert_eq!(
        long,
        "run,mode,rail,side,node,device,source,name,delta,unit\n\
         sweep-0601-host,hostnetwork,0,server,gpu-node-02,mlx5_0,hw,out_of_sequence,42,packets\n"
    );
}

#[test]
fn csv_output_has_the_findings_words_and_the_findings_in_a_file_beside_it() {
    use results::rdmabw::counters::{CounterSource, Evidence, Finding, FindingKind};
    use results::rdmabw::report::Role;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows = rows_of(&NetworkMode::HostNetwork);
    rows[1].diagnosis = vec![Finding {
        finding: FindingKind::PfcPause,
        summary: "priority 3 was paused 23% of the window".into(),
        evidence: vec![Evidence {
            role: Role::Client,
            source: CounterSource::Netdev,
            counter: "rx_prio3_pause_duration".into(),
            delta: 2_300_000,
            per_s: 191_666.666_666_7,
        }],
        what_to_do: "find who sends the pauses".into(),
    }];
    let (out, merged, csv) = report_to_csv(dir.path(), &rows);
    assert!(csv.contains(",pfc-pause,"), "{csv}");
    assert!(!csv.contains("rx_prio3") && !csv.contains('{'), "{csv}");
    let findings = dir.path().join("merged.findings.csv");
    assert_says(
        &out.stderr,
        &format!("wrote the findings to {}", findings.display()),
    );
    assert_eq!(
        std::fs::read_to_string(&findings).expect("findings file"),
        "run,mode,rail,finding,side,node,source,counter,delta,per_s,summary,what_to_do\n\
         sweep-0601-host,hostnetwork,1,pfc-pause,client,gpu-node-01,netdev,rx_prio3_pause_duration,2300000,191667.0,priority 3 was paused 23% of the window,find who sends the pauses\n"
    );
    // explain of the CSV reads the finding whole from the findings file beside it.
    let out = railsweep(&["explain", path_str(&merged), "--rail", "1"]);
    assert_says(
        &out.stdout,
        "  finding pfc-pause: priority 3 was paused 23% of the window\n    client netdev rx_prio3_pause_duration: +2300000 (191667.0/s)\n    what to do: find who sends the pauses\n",
    );
    // Without it, explain says where its counters would be.
    std::fs::remove_file(&findings).expect("remove");
    let out = railsweep(&["explain", path_str(&merged), "--rail", "1"]);
    assert_says(
        &out.stdout,
        &format!(
            "  finding pfc-pause: its counters and what to do would be in {}, which was not there",
            findings.display()
        ),
    );
}

/// The markdown section that starts with `heading`, up to the next one.
fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let start = markdown
        .find(heading)
        .unwrap_or_else(|| panic!("{heading} in:\n{markdown}"));
    let rest = &markdown[start..];
    let end = rest[heading.len()..]
        .find("\n## ")
        .map_or(rest.len(), |i| i + heading.len() + 1);
    &rest[..end]
}

/// Loss at both ends is the path's fault, at one end the port's: a CSV read back with its
/// findings file judges the rails as their JSON does (`report --threshold-gbps` judges them
/// again from their findings), and `explain` shows the counters of each side.
#[test]
fn a_csv_with_its_findings_file_is_judged_as_its_json() {
    use results::rdmabw::counters::{CounterSource, Evidence, Finding, FindingKind};
    use results::rdmabw::report::Role;
    let dir = tempfile::tempdir().expect("tempdir");
    let evidence = |role, counter: &str, delta, per_s| Evidence {
        role,
        source: CounterSource::Hw,
        counter: counter.into(),
        delta,
        per_s,
    };
    let loss = |evidence| Finding {
        finding: FindingKind::PacketLoss,
        summary: "packets were lost".into(),
        evidence,
        what_to_do: "look at the drops".into(),
    };
    let mut rows = rows_of(&NetworkMode::HostNetwork);
    rows[1].diagnosis = vec![loss(vec![
        evidence(Role::Client, "packet_seq_err", 17, 1.7),
        evidence(Role::Server, "out_of_sequence", 40, 4.0),
    ])];
    rows[2].diagnosis = vec![loss(vec![evidence(
        Role::Server,
        "out_of_sequence",
        9,
        0.9,
    )])];
    let json = dir.path().join("run.json");
    write_json(std::fs::File::create(&json).expect("create"), "t", &rows).expect("write");
    // The CSV and its findings file, as railsweep writes them.
    let csv = dir.path().join("run.csv");
    let out = railsweep(&["report", path_str(&json), "--output-file", path_str(&csv)]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let findings = results::findings_csv_path(&csv);
    assert!(findings.exists(), "{}", text(&out.stderr));

    // Every rail under 97 Gb/s: judged again, rails 1 and 2 by their findings.
    let judged = |input: &Path| {
        let out = railsweep(&[
            "report",
            path_str(input),
            "-o",
            "markdown",
            "--threshold-gbps",
            "97",
        ]);
        assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
        (text(&out.stdout), text(&out.stderr))
    };
    let (from_json, _) = judged(&json);
    let (from_csv, said) = judged(&csv);
    assert!(
        said.contains(&format!(
            "read 16 rows from {}, their findings from {}",
            csv.display(),
            findings.display()
        )),
        "{said}"
    );
    for line in [
        "rail 1 (gpu-node-01 mlx5_1 -> gpu-node-02 mlx5_1): **below_threshold**, layer `path`: loss (both ends): packets were lost.",
        "rail 2 (gpu-node-01 mlx5_2 -> gpu-node-02 mlx5_2): **below_threshold**, layer `nic-port`: loss (server): packets were lost.",
    ] {
        assert!(from_json.contains(line), "{line} in:\n{from_json}");
    }
    for heading in ["## Verdicts", "## Findings"] {
        assert_eq!(
            section(&from_csv, heading),
            section(&from_json, heading),
            "{heading}"
        );
    }

    // explain of the CSV: each side's counters, and the verdict the JSON gives.
    let explained = |input: &Path| {
        let out = railsweep(&["explain", path_str(input), "--rail", "1"]);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let t = explained(&csv);
    assert_eq!(t, explained(&json));
    assert!(
        t.contains("    client hw packet_seq_err: +17 (1.7/s)\n    server hw out_of_sequence: +40 (4.0/s)\n"),
        "{t}"
    );

    // Without the findings file the CSV's loss rests on no side, and rail 1 reads as the
    // port's: what the findings file is read for.
    std::fs::remove_file(&findings).expect("remove");
    let (alone, _) = judged(&csv);
    assert!(
        alone.contains("rail 1 (gpu-node-01 mlx5_1 -> gpu-node-02 mlx5_1): **below_threshold**, layer `nic-port`"),
        "{alone}"
    );
}

#[test]
fn the_chart_takes_a_title_and_a_width_and_refuses_a_width_too_narrow() {
    let dir = tempfile::tempdir().expect("tempdir");
    let chart = dir.path().join("chart.svg");
    let f = fixture();
    let out = railsweep(&[
        "report",
        path_str(&f),
        "--output-file",
        path_str(&chart),
        "--title",
        "Rails of rack 3",
        "--width",
        "900",
    ]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let svg = std::fs::read_to_string(&chart).expect("svg written");
    assert!(
        svg.starts_with("<svg width=\"900\" "),
        "{}",
        &svg[..svg.len().min(200)]
    );
    assert!(svg.contains(">\nRails of rack 3\n<"), "no title");
    let out = railsweep(&[
        "report",
        path_str(&f),
        "--output-file",
        path_str(&chart),
        "--width",
        "300",
    ]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    assert_says(&out.stderr, "--width");
}

#[test]
fn an_output_name_of_no_known_format_is_a_usage_error_listing_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["chart.jpg", "report"] {
        let target = dir.path().join(name);
        let out = railsweep(&[
            "report",
            path_str(&fixture()),
            "--output-file",
            path_str(&target),
        ]);
        assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
        for needle in [
            "--output-file",
            name,
            ".md",
            ".csv",
            ".json",
            ".svg",
            ".png",
            ".prom",
            "-o",
        ] {
            assert_says(&out.stderr, needle);
        }
        assert!(!target.exists(), "{name} was written");
    }
}

/// `run --gpu auto --mode M`: both pods ask for every GPU of the node, unless --resource says.
#[test]
fn gpu_auto_pods_ask_for_gpus() {
    let base = [
        "run",
        "--mode",
        "sriov",
        "--nodes",
        "node-a,node-b",
        "--dry-run",
        "-o",
        "yaml",
        "--rdma-resource",
        "nvidia.com/sriov_rdma=1",
        "--networks",
        "sriov-rail-{0..1}",
    ];
    let plain = stdout_of(&base);
    assert!(
        !plain.contains("nvidia.com/gpu: "),
        "no GPUs without --gpu:\n{plain}"
    );

    let mut args = base.to_vec();
    args.extend(["--gpu", "auto"]);
    let y = stdout_of(&args);
    // Both pods (extended resources are asked for in limits), read as YAML whatever its quotes.
    let gpus = |y: &str| -> Vec<serde_json::Value> {
        serde_saphyr::from_multiple::<serde_json::Value>(y)
            .expect("YAML")
            .iter()
            .map(|pod| {
                pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"].clone()
            })
            .collect()
    };
    assert_eq!(
        gpus(&y),
        [serde_json::json!("8"), serde_json::json!("8")],
        "{y}"
    );

    args.extend(["--resource", "nvidia.com/gpu=2"]);
    let y = stdout_of(&args);
    assert_eq!(
        gpus(&y),
        [serde_json::json!("2"), serde_json::json!("2")],
        "{y}"
    );

    let out = railsweep(&[
        "run",
        "--server-pod",
        "b",
        "--client-pod",
        "a",
        "--gpu",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("auto"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Issue 33: railsweep panicked (exit 101) when its standard error had no reader any more
/// (`railsweep ... 2>&1 | head` after head exited); its logs are dropped and the exit status is
/// the run's own (1 here: the fixture's failed rail).
#[test]
fn a_closed_stderr_keeps_the_exit_status() {
    let (err, reader) = std::os::unix::net::UnixStream::pair().expect("socketpair");
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .arg("report")
        .arg(fixture())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::os::fd::OwnedFd::from(err)))
        .output()
        .expect("railsweep runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("RDMA bandwidth per rail"));
}

/// Issue 33: `railsweep report fleet.csv` refused a fleet's own CSV ("rail 0 more than once").
/// It shows the nodes x rails view (the lab's fleet with podC's rail 1 down) and draws it as a
/// PNG heatmap; exit 1 names the node's rail.
#[test]
fn a_fleets_csv_is_reported_per_node_and_rail() {
    let csv =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fleet-4x2-rail-down.csv");
    let out = railsweep(&["report", path_str(&csv)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let md = text(&out.stdout);
    assert!(md.contains("# Fleet: 4 nodes x 2 rails"), "{md}");
    assert!(md.contains("| podC | ") && md.contains(" failed |"), "{md}");
    assert_says(&out.stderr, "podC rail 1");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-fleet");
    std::fs::create_dir_all(&dir).expect("dir");
    let png = dir.join("fleet.png");
    let out = railsweep(&["report", path_str(&csv), "--output-file", path_str(&png)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let bytes = std::fs::read(&png).expect("png written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
}

/// Issue 56: a 2-pod fleet whose one pair was measured again (an outlier's re-measurement,
/// appended to fleet.csv) could not be reported again ("rail 0 more than once"). It is a
/// fleet's file: the nodes x rails view of the latest row of each pair's rail (here the
/// re-measured rail 0 is ok where its first row failed, so the exit is 0).
#[test]
fn a_two_pod_fleet_with_a_remeasured_pair_reports_its_latest_rows() {
    let mut rows: Vec<RailResult> = read_path(fleet_fixture())
        .expect("fixture reads")
        .into_iter()
        .filter(|r| {
            r.client_pod.as_deref() == Some("podA") && r.server_pod.as_deref() == Some("podD")
        })
        .collect();
    assert_eq!(
        rows.len(),
        2,
        "the fixture's pair podA -> podD, rails 0 and 1"
    );
    let again = rows[0].clone();
    rows[0].status = results::RailStatus::Failed;
    rows[0].bw_avg_gbps = None;
    rows[0].bw_peak_gbps = None;
    rows[0].line_rate_pct = None;
    rows[0].error = Some("the server stopped answering".into());
    let mut again = again;
    again.time_utc = "2026-12-04T17:57:30Z".into();
    rows.push(again);
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("fleet.csv");
    write_csv(std::fs::File::create(&csv).expect("create"), &rows).expect("write");
    let out = railsweep(&["report", path_str(&csv)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let md = text(&out.stdout);
    assert!(md.contains("# Fleet: 2 nodes x 2 rails"), "{md}");
    // Rail 0 is the re-measured row's (ok), not the first one's (failed).
    assert!(
        md.contains("| podA | 0.370 (100%) | 0.369 (100%) |"),
        "{md}"
    );
    assert!(
        md.contains("| podD | 0.370 (100%) | 0.369 (100%) |"),
        "{md}"
    );
    let out = railsweep(&["report", path_str(&csv), "-o", "csv"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        read_str(&text(&out.stdout), "stdout").expect("reads").len(),
        3
    );
    // The same fleet given twice is still two runs with the same rails, refused.
    let out = railsweep(&["report", path_str(&fixture()), path_str(&fixture())]);
    assert_eq!(out.status.code(), Some(2));
}

/// Issue 56: a file with no rows was reported as an empty table, exit 0: nothing measured is
/// no verdict. Exit 2, naming the file and what to give instead.
#[test]
fn a_file_without_rows_is_exit_2_naming_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = dir.path().join("empty.csv");
    write_csv(std::fs::File::create(&csv).expect("create"), &[]).expect("write");
    let out = railsweep(&["report", path_str(&csv)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_says(
        &out.stderr,
        &format!(
            "railsweep: error: nothing to report: {} holds no rows",
            csv.display()
        ),
    );
    assert_says(&out.stderr, "`railsweep run`");
}

fn fleet_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fleet-4x2-rail-down.csv")
}

/// Issue 33: `railsweep report fleet.csv --label KEY=NAME` (and `--threshold-gbps`,
/// `--max-p99-us`) drew the fleet's heatmap as if the flag had not been given. Each is refused
/// (exit 2) by name with what to do instead, before anything is written.
#[test]
fn a_fleets_csv_refuses_the_flags_its_view_cannot_use() {
    let csv = fleet_fixture();
    let dir = tempfile::tempdir().expect("tempdir");
    let png = dir.path().join("fleet.png");
    for (flag, value) in [
        ("--threshold-gbps", "90"),
        ("--label", "lab=before"),
        ("--max-p99-us", "20"),
    ] {
        for extra in [&[][..], &["--output-file", path_str(&png)][..]] {
            let mut a = vec!["report", path_str(&csv), flag, value];
            a.extend_from_slice(extra);
            let out = railsweep(&a);
            assert_eq!(out.status.code(), Some(2), "{a:?}: {}", text(&out.stderr));
            assert_says(
                &out.stderr,
                &format!("railsweep: error: {flag} does not apply to a fleet's rows: "),
            );
            assert!(out.stdout.is_empty(), "{a:?}: {}", text(&out.stdout));
            assert!(!png.exists(), "{a:?} wrote {}", png.display());
            assert!(!text(&out.stderr).contains("{ "), "{}", text(&out.stderr));
        }
    }
}

/// What a fleet's report takes still works: the rows as CSV, JSON and OpenMetrics, the view as
/// markdown and SVG (exit 1: the fixture's podC rail 1 is down).
#[test]
fn a_fleets_csv_is_still_written_in_every_format() {
    let csv = fleet_fixture();
    for (format, says) in [
        ("markdown", "# Fleet: 4 nodes x 2 rails"),
        ("svg", "<svg"),
        ("csv", "schema_version,run_id,"),
        ("json", "\"schema_version\""),
        ("openmetrics", "railbench_rail_bandwidth_gbps"),
    ] {
        let out = railsweep(&["report", path_str(&csv), "-o", format]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{format}: {}",
            text(&out.stderr)
        );
        assert_says(&out.stdout, says);
        assert_says(&out.stderr, "podC rail 1");
    }
}

/// Issue 53, finding 1 (the readers): a row whose value is out of range (a `bw_peak_gbps` of
/// -1, in CSV and in JSON) stopped `report` at once. Each such row is named (file, line and
/// column, the field and the value) and left out; every other row still reads and is
/// reported, and the exit is 1 (not everything is fine). A file that does not parse is still
/// refused whole (`a_bad_file_exits_2_naming_file_line_and_column`).
#[test]
fn a_row_out_of_range_is_named_and_left_out_and_the_rest_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host_rows = rows_of(&NetworkMode::HostNetwork);
    let mut csv = Vec::new();
    write_csv(&mut csv, &host_rows).expect("csv");
    let csv = String::from_utf8(csv).expect("utf-8");
    let three = &host_rows[3];
    let (avg, peak) = (
        three.bw_avg_gbps.expect("avg"),
        three.bw_peak_gbps.expect("peak"),
    );
    let mut lines: Vec<String> = csv.lines().map(String::from).collect();
    let at = lines
        .iter()
        .position(|l| l.contains(",rdma3,"))
        .expect("rail 3's line");
    let was = format!(",{avg},{peak},");
    assert!(lines[at].contains(&was), "{}", lines[at]);
    lines[at] = lines[at].replacen(&was, &format!(",{avg},-1,"), 1);
    let host = dir.path().join("host.csv");
    std::fs::write(&host, lines.join("\n") + "\n").expect("write");

    let ipvlan_rows: Vec<RailResult> = rows_of(&NetworkMode::Ipvlan)
        .into_iter()
        .filter(|r| r.rail != 7)
        .collect();
    let mut doc = serde_json::json!({
        "schema_version": results::SCHEMA_VERSION,
        "generated_by": "test",
        "rows": serde_json::to_value(&ipvlan_rows).expect("rows"),
    });
    doc["rows"][2]["bw_peak_gbps"] = serde_json::json!(-1.0);
    let ipvlan = dir.path().join("ipvlan.json");
    std::fs::write(
        &ipvlan,
        serde_json::to_string_pretty(&doc).expect("json") + "\n",
    )
    .expect("write");

    let out = railsweep(&["report", path_str(&host), path_str(&ipvlan)]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let csv_col = lines[0]
        .split(',')
        .position(|c| c == "bw_peak_gbps")
        .expect("column")
        + 1;
    assert!(
        stderr.contains(&format!(
            "{}:{}:{csv_col}: column `bw_peak_gbps` must be a finite number >= 0, got -1",
            host.display(),
            at + 1
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{}:", ipvlan.display()))
            && stderr.contains("row 2: `bw_peak_gbps` must be a finite number >= 0, got -1"),
        "{stderr}"
    );
    assert!(stderr.contains("left out"), "{stderr}");
    // The other rows are in the report: hostnetwork's 15, ipvlan's 14.
    assert_says(
        &out.stderr,
        &format!("read 15 rows from {}", host.display()),
    );
    assert_says(
        &out.stderr,
        &format!("read 14 rows from {}", ipvlan.display()),
    );
    assert!(stdout.contains("| 0 | 96.87 | "), "{stdout}");
    assert!(stdout.contains("| 3 | - | "), "{stdout}");
}

/// Issue 53, finding 2 (the readers): a results file is read whole, so its size is capped
/// (256 MiB by default); a larger file is refused naming the flag that raises the cap, from a
/// file and from stdin alike, and the flag raises it.
#[test]
fn an_input_over_max_input_bytes_is_refused_naming_the_flag() {
    let f = fixture();
    let size = std::fs::metadata(&f).expect("fixture").len();
    let small = (size / 2).to_string();
    let out = railsweep(&["report", path_str(&f), "--max-input-bytes", &small]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_says(&out.stderr, "--max-input-bytes");
    assert_says(&out.stderr, &f.display().to_string());
    assert!(out.stdout.is_empty());
    let mut child = Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(["report", "-", "--max-input-bytes", &small])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        let _ = stdin.write_all(&std::fs::read(&f).expect("fixture"));
    }
    let out = child.wait_with_output().expect("ends");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_says(&out.stderr, "--max-input-bytes");
    // Raised to the file's size, it reads.
    let out = railsweep(&[
        "report",
        path_str(&f),
        "--max-input-bytes",
        &size.to_string(),
    ]);
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_says(&out.stderr, "read 48 rows");
}

/// A saved run with a verdict on two rails: `report` reprints it, `explain --rail` prints the
/// chain of evidence of one, and a rail the file does not have is a usage error naming those
/// it has.
#[test]
fn report_and_explain_reprint_a_saved_rails_verdict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rows = rows_of(&NetworkMode::HostNetwork);
    let (down, slow) = (rows[2].rail, rows[3].rail);
    rows[2] = rows[2].clone().failed_because(
        "rail 2 in pod rdmabw-server-hn (rdma2, mlx5_2) is not usable: port state DOWN",
    );
    rows[2].judge(
        Some(&results::Cause::RailUnusable {
            pod: "rdmabw-server-hn".into(),
        }),
        None,
    );
    rows[3].status = results::RailStatus::BelowThreshold;
    rows[3].judge(None, None);
    let path = dir.path().join("railsweep-RUN1.csv");
    write_csv(std::fs::File::create(&path).expect("create"), &rows).expect("write");

    let out = railsweep(&["report", path_str(&path)]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_says(&out.stdout, "## Verdicts");
    assert_says(
        &out.stdout,
        &format!("rail {down} (gpu-node-01 mlx5_2 -> gpu-node-02 mlx5_2): **failed**, layer `node-setup`"),
    );

    let out = railsweep(&["explain", path_str(&path), "--rail", &down.to_string()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    for said in [
        &format!("rail {down} of run sweep-0601-host (hostnetwork, cluster h100-lab-a)"),
        "  client: pod rdmabw-client-hn on gpu-node-01, rdma2 mlx5_2 GID 3",
        "  status: failed",
        "  error: rail 2 in pod rdmabw-server-hn (rdma2, mlx5_2) is not usable: port state DOWN",
        "  verdict: failed at node-setup",
        "    fix: run `kubectl exec rdmabw-server-hn -- rdmabw probe`",
    ] {
        assert!(t.contains(said), "expected {said:?} in:\n{t}");
    }
    assert!(!t.contains(&format!("rail {slow} of run")), "{t}");

    // Without --rail: every rail with a verdict; by run id, from this directory.
    let out = Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(["explain", "RUN1"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(
        t.contains(&format!("rail {down} of run")) && t.contains(&format!("rail {slow} of run")),
        "{t}"
    );
    assert!(t.contains("verdict: below_threshold at unknown"), "{t}");
    assert_eq!(t.matches(" of run ").count(), 2, "{t}");

    let out = railsweep(&["explain", path_str(&path), "--rail", "99"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_says(&out.stderr, "--rail 99: no row of rail 99 in ");
    assert_says(&out.stderr, "(rails there: 0, 1, 2, 3");
}
