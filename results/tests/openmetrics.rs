//! The OpenMetrics export over a fleet-like report: several node pairs on the same rails, one
//! pair slow on one rail, re-measured rows appended (the text format itself is checked against
//! real Prometheus parsers by scripts/check-metrics).

mod common;

use results::{Format, RailStatus, Report};

/// Four pairs of the fixture's hostnetwork rails 0 and 1; pair 2 is at half the bandwidth on
/// rail 1, and its rail 1 is measured again (appended) at 40 Gb/s.
fn fleet() -> Report {
    let base: Vec<_> = common::fixture_rows()
        .into_iter()
        .filter(|r| r.network_mode.as_str() == "hostnetwork" && r.rail < 2)
        .collect();
    let mut rows = Vec::new();
    for pair in 0..4 {
        for r in &base {
            let mut r = r.clone();
            r.client_node = format!("n{pair}");
            r.server_node = format!("m{pair}");
            r.bw_avg_gbps = Some(if pair == 2 && r.rail == 1 {
                50.0
            } else {
                100.0
            });
            rows.push(r);
        }
    }
    let mut again = rows[5].clone();
    again.bw_avg_gbps = Some(40.0);
    again.status = RailStatus::BelowThreshold;
    rows.push(again);
    Report::new("test", rows)
}

fn value(text: &str, metric: &str, client: &str, rail: u32) -> Option<f64> {
    let head = format!("{metric}{{client_node=\"{client}\",");
    let rail = format!("rail=\"{rail}\"");
    text.lines()
        .find(|l| l.starts_with(&head) && l.contains(&rail))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[test]
fn a_slow_pair_is_below_the_rails_fleet_median_and_the_latest_row_counts() {
    let text = String::from_utf8(
        Format::OpenMetrics
            .exporter()
            .serialize(&fleet())
            .expect("exports"),
    )
    .expect("utf-8");
    // Rail 1's latest values: 100, 100, 40, 100: median 100.
    assert_eq!(
        value(&text, "railbench_rail_bandwidth_gbps", "n2", 1),
        Some(40.0)
    );
    assert_eq!(
        value(&text, "railbench_rail_median_percent", "n2", 1),
        Some(40.0)
    );
    assert_eq!(
        value(&text, "railbench_rail_median_percent", "n1", 1),
        Some(100.0)
    );
    assert_eq!(value(&text, "railbench_rail_ok", "n2", 1), Some(0.0));
    assert_eq!(value(&text, "railbench_rail_ok", "n2", 0), Some(1.0));
    // One sample per pair and rail, the appended row replacing the first.
    let oks = text
        .lines()
        .filter(|l| l.starts_with("railbench_rail_ok{"))
        .count();
    assert_eq!(oks, 8, "{text}");
    assert!(text.ends_with("# EOF\n"));
}

#[test]
fn the_verdicts_layer_and_the_latency_are_samples() {
    let mut report = fleet();
    let n = report.rows.len();
    report.rows[n - 1].judge(
        None,
        Some(&results::FleetBlame::Node {
            node: "n2".into(),
            pct_of_fleet: Some(40.0),
        }),
    );
    report.rows[0].lat_p99_us = Some(4.5);
    let text = String::from_utf8(
        Format::OpenMetrics
            .exporter()
            .serialize(&report)
            .expect("exports"),
    )
    .expect("utf-8");
    let verdicts: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("railbench_rail_verdict{"))
        .collect();
    assert_eq!(verdicts.len(), 1, "{text}");
    assert!(
        verdicts[0].contains("client_node=\"n2\"")
            && verdicts[0].contains("layer=\"path\"")
            && verdicts[0].ends_with(" 1.0"),
        "{}",
        verdicts[0]
    );
    assert_eq!(
        value(&text, "railbench_rail_latency_p99_us", "n0", 0),
        Some(4.5)
    );
    assert_eq!(value(&text, "railbench_rail_latency_p99_us", "n1", 0), None);
    // No row has a median latency: that family is left out.
    assert!(!text.contains("railbench_rail_latency_p50_us"), "{text}");
}
