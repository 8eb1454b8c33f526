use super::*;
use crate::fleet::schedule::all_pairs;

use crate::test_support::row;

/// A pair met twice, or both ways, is one pair; a row of a pair not scheduled (a suspect
/// against a node that passed) counts for nothing; a failed row counts as measured.
#[test]
fn pairs_measured_counts_each_pair_of_pods_once() {
    let scheduled = [("a", "b"), ("b", "a"), ("c", "d"), ("a", "b"), ("e", "f")];
    let rows = [
        row("a", "b", 0, Some(90.0)),
        row("b", "a", 1, Some(90.0)),
        row("d", "c", 0, None),
        row("a", "e", 0, Some(90.0)),
    ];
    assert_eq!(pairs_measured(scheduled, &rows), (2, 3));
}

/// A pair whose rail failed and passed when measured again is ok; one whose latest row failed
/// is not, whichever way round the other pairs were met.
#[test]
fn a_pair_is_judged_by_its_latest_row() {
    let flap = [row("a", "b", 0, None), row("a", "b", 0, Some(90.0))];
    assert!(!any_not_ok(&flap));
    let broke = [row("a", "b", 0, Some(90.0)), row("a", "b", 0, None)];
    assert!(any_not_ok(&broke));
    let other = [row("a", "b", 0, Some(90.0)), row("c", "d", 1, None)];
    assert!(any_not_ok(&other));
}

/// 64 nodes, 8 rails, every pair; rail 5 of node n17 at 60 %, and a little noise.
fn fleet(bad: Option<(&str, u32, Option<f64>)>) -> Vec<RailResult> {
    let names: Vec<String> = (0..64).map(|i| format!("n{i}")).collect();
    let mut rows = Vec::new();
    for (i, p) in all_pairs(64).pairs().enumerate() {
        for rail in 0..8 {
            let (c, s) = (&names[p.client], &names[p.server]);
            #[allow(clippy::cast_precision_loss)]
            let noise = ((i * 7 + rail as usize * 13) % 11) as f64 * 0.5; // 0..5 Gb/s
            let mut bw = Some(390.0 - noise);
            if let Some((node, r, v)) = bad {
                if rail == r && (c == node || s == node) {
                    bw = v;
                }
            }
            rows.push(row(c, s, rail, bw));
        }
    }
    rows
}

#[test]
fn a_node_slow_to_answer_on_one_rail_is_named_for_its_latency() {
    // Every bandwidth fine; p99 about 4 us, but node n17's rail 2 answers in 12 us.
    let mut rows = fleet(None);
    for (i, r) in rows.iter_mut().enumerate() {
        #[allow(clippy::cast_precision_loss)]
        let noise = (i % 5) as f64 * 0.1;
        let bad = r.rail == 2 && (r.client_node == "n17" || r.server_node == "n17");
        r.lat_p99_us = Some(if bad { 12.0 } else { 4.0 + noise });
    }
    // 3x the median is above the default factor of 2.1, not above 3.5.
    let v = judge(&rows, Threshold::default());
    assert_eq!(v.outliers, 63, "{:?}", v.suspects);
    assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
    let said = v.suspects[0].to_string();
    assert!(
        said.starts_with("node n17 rail 2: slow in all 63"),
        "{said}"
    );
    assert!(
        said.contains("latency: p99 12.00 us in 63 of its pairs' median, fleet median 4."),
        "{said}"
    );
    let e = evidence(&rows, "n17", 2, Threshold::default());
    assert_eq!((e.slow_pairs, e.latency_pairs), (63, 63));
    assert_eq!(e.lat_p99_us, Some(12.0));
    let loose = Rules {
        bw: Threshold::default(),
        lat_factor: 3.5,
    };
    assert!(judge(&rows, loose).suspects.is_empty());
    assert!(outliers(&rows, loose).is_empty());
    // The suspect is measured again against a node that passed on rail 2.
    let r = repairs(&rows, Threshold::default());
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].suspect.as_str(), r[0].rails.as_slice()),
        ("n17", &[2][..])
    );
    // Rows without latency are judged by bandwidth alone.
    assert!(judge(&fleet(None), Threshold::default())
        .suspects
        .is_empty());
}

#[test]
fn in_a_fleet_of_four_the_node_slow_to_answer_is_named_for_its_latency() {
    // All pairs of four nodes: c's rail 1 answers in 400 us, the others' in about 60 us.
    // c is in 3 of the rail's 6 pairs: their median (230 us) would hide it.
    let names = ["a", "b", "c", "d"];
    let mut rows = Vec::new();
    for (i, p) in all_pairs(4).pairs().enumerate() {
        for rail in 0..2 {
            let (c, s) = (names[p.client], names[p.server]);
            let mut r = row(c, s, rail, Some(0.15));
            #[allow(clippy::cast_precision_loss)]
            let noise = (i % 3) as f64 * 5.0;
            let bad = rail == 1 && (c == "c" || s == "c");
            r.lat_p99_us = Some(if bad { 400.0 + noise } else { 60.0 + noise });
            rows.push(r);
        }
    }
    let v = judge(&rows, Threshold::default());
    assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
    let said = v.suspects[0].to_string();
    assert!(said.starts_with("node c rail 1: slow in all 3"), "{said}");
    assert!(
        said.contains("; latency: p99 410.00 us in 3 of its pairs' median, fleet median 65.00 us"),
        "{said}"
    );
    assert_eq!(v.outliers, 3);
    // The suspect measured again against a node that passed (that pair's row replaced by
    // the new one) is still named.
    let mut more = rows.clone();
    let mut again = row("c", "a", 1, Some(0.15));
    again.lat_p99_us = Some(410.0);
    more.push(again);
    let v = judge(&more, Threshold::default());
    assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
    assert!(v.suspects[0].to_string().starts_with("node c rail 1"));
}

#[test]
fn one_bad_rail_among_64_nodes_is_named_and_nothing_else() {
    let rows = fleet(Some(("n17", 5, Some(235.0))));
    let v = judge(&rows, Threshold::default());
    assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
    match &v.suspects[0] {
        Suspect::NodeRail {
            node, rail, pairs, ..
        } => {
            assert_eq!((node.as_str(), *rail, *pairs), ("n17", 5, 63));
        }
        other => panic!("named {other}"),
    }
    assert_eq!(v.outliers, 63);
    assert!(v.unexplained.is_empty());
}

#[test]
fn a_failed_rail_is_named_too() {
    let rows = fleet(Some(("n3", 0, None)));
    let v = judge(&rows, Threshold::default());
    assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
    assert!(matches!(&v.suspects[0], Suspect::NodeRail { node, rail: 0, .. } if node == "n3"));
}

/// A finding whose only evidence is `counter` read on side `role`.
fn finding(kind: FindingKind, role: Role, counter: &str) -> results::rdmabw::counters::Finding {
    use results::rdmabw::counters::{CounterSource, Evidence, Finding};
    Finding {
        finding: kind,
        summary: format!("{counter} moved"),
        evidence: vec![Evidence {
            role,
            source: CounterSource::Netdev,
            counter: counter.into(),
            delta: 2,
            per_s: 0.5,
        }],
        what_to_do: String::new(),
    }
}

#[test]
fn a_flap_on_one_side_names_that_node_of_two() {
    let mut rows = vec![
        row("n1", "n2", 0, Some(390.0)),
        row("n1", "n2", 1, Some(20.0)),
    ];
    let v = judge(&rows, Threshold::LineRatePct(90.0));
    let named =
        |v: &Verdict| -> Vec<String> { v.suspects.iter().map(ToString::to_string).collect() };
    assert_eq!(
        named(&v),
        ["rail 1: slow in all 1 pairs of the fleet (the rail's switch or its settings)"],
        "bandwidth alone cannot tell the nodes from their rail"
    );
    rows[1].diagnosis = vec![
        finding(FindingKind::LinkFlap, Role::Server, "carrier_changes"),
        finding(FindingKind::PacketLoss, Role::Client, "rcvd_seq_err"),
    ];
    let v = judge(&rows, Threshold::LineRatePct(90.0));
    assert_eq!(v.suspects.len(), 1, "{:?}", named(&v));
    let text = v.suspects[0].to_string();
    assert!(
        text.starts_with("node n2 rail 1: slow in all 1 of its pairs"),
        "{text}"
    );
    assert!(text.ends_with("its own counters: link-flap"), "{text}");
    assert!(v.unexplained.is_empty());
}

#[test]
fn a_flap_in_one_pair_names_the_node_whose_port_flapped() {
    let mut rows = fleet(None);
    let at = rows
        .iter()
        .position(|r| r.rail == 6 && r.client_node == "n5" && r.server_node == "n40")
        .or_else(|| {
            rows.iter()
                .position(|r| r.rail == 6 && r.client_node == "n40" && r.server_node == "n5")
        })
        .unwrap_or(0);
    let role = if rows[at].client_node == "n5" {
        Role::Client
    } else {
        Role::Server
    };
    rows[at].bw_avg_gbps = Some(120.0);
    assert!(judge(&rows, Threshold::default()).suspects.is_empty());
    rows[at].diagnosis = vec![finding(FindingKind::LinkFlap, role, "link_downed")];
    let v = judge(&rows, Threshold::default());
    assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
    let text = v.suspects[0].to_string();
    assert!(
        text.starts_with("node n5 rail 6: slow in 1 of its 63 pairs"),
        "{text}"
    );
    assert!(v.unexplained.is_empty());
}

#[test]
fn a_healthy_fleet_has_no_suspect() {
    let v = judge(&fleet(None), Threshold::default());
    assert_eq!(v, Verdict::default());
}

#[test]
fn a_remeasured_outlier_that_recovered_is_not_slow() {
    let mut rows = fleet(None);
    rows.push(row("n1", "n2", 3, Some(100.0)));
    assert_eq!(outliers(&rows, Threshold::default()).len(), 1);
    let v = judge(&rows, Threshold::default());
    assert!(v.suspects.is_empty());
    assert_eq!(v.unexplained, vec![("n1".into(), "n2".into(), 3)]);
    rows.push(row("n2", "n1", 3, Some(389.0)));
    assert!(outliers(&rows, Threshold::default()).is_empty());
}

#[test]
fn line_rate_threshold_names_a_whole_rail() {
    let mut rows = fleet(None);
    for r in &mut rows {
        if r.rail == 2 {
            r.bw_avg_gbps = Some(200.0);
        }
    }
    assert!(judge(&rows, Threshold::default()).suspects.is_empty());
    let v = judge(&rows, Threshold::LineRatePct(90.0));
    assert_eq!(
        v.suspects,
        vec![Suspect::Rail {
            rail: 2,
            pairs: 64 * 63 / 2
        }]
    );
}

#[test]
fn a_bad_node_is_measured_once_more_against_a_node_that_passed() {
    let rows = fleet(Some(("n17", 5, Some(235.0))));
    let r = repairs(&rows, Threshold::default());
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].suspect.as_str(), r[0].rails.as_slice()),
        ("n17", &[5][..])
    );
    assert_ne!(r[0].partner, "n17");
    assert!(repairs(&fleet(None), Threshold::default()).is_empty());
    // Two nodes: neither passed, nothing to pair with.
    let two = vec![
        row("n1", "n2", 0, Some(20.0)),
        row("n1", "n2", 1, Some(390.0)),
    ];
    assert!(repairs(&two, Threshold::LineRatePct(90.0)).is_empty());
}

#[test]
fn in_a_ring_both_neighbours_of_a_bad_pair_are_cleared() {
    use crate::fleet::schedule::ring;
    // Ring of 6: n2 and n3 bad on rail 0: pairs 1-2, 2-3, 3-4 slow; n1 and n4 have a
    // fast pair each and are cleared; n2 and n3 are measured against nodes that passed.
    let names: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
    let mut rows = Vec::new();
    for p in ring(6).pairs() {
        let bad = [2, 3].contains(&p.client) || [2, 3].contains(&p.server);
        rows.push(row(
            &names[p.client],
            &names[p.server],
            0,
            Some(if bad { 100.0 } else { 390.0 }),
        ));
    }
    let r = repairs(&rows, Threshold::default());
    let who: Vec<&str> = r.iter().map(|x| x.suspect.as_str()).collect();
    assert_eq!(who, ["n2", "n3"], "{r:?}");
    for x in &r {
        assert!(
            ["n0", "n1", "n4", "n5"].contains(&x.partner.as_str()),
            "a node with a fast pair: {x:?}"
        );
    }
}

#[test]
fn repair_finds_the_bad_nodes_in_fewer_pairs_than_halving() {
    use crate::fleet::schedule::{all_pairs, ring};
    use std::collections::BTreeSet;
    for n in [8, 64, 256] {
        for (name, sched) in [("all-pairs", all_pairs(n)), ("ring", ring(n))] {
            let pairs: Vec<_> = sched.pairs().collect();
            for bad in [vec![3], vec![3, 4], vec![1, n / 2, n - 2]] {
                let bad: BTreeSet<usize> = bad.into_iter().collect();
                let (ours, found) = simulate::repair(n, &pairs, &bad);
                let (halving, found_h) = simulate::halving(&pairs, &bad);
                assert_eq!(found, bad, "{name} n={n}: repair finds {bad:?}");
                assert_eq!(found_h, bad, "{name} n={n}: halving finds {bad:?}");
                // One pair per bad node, and one per partner that had no other pair.
                assert!(ours >= bad.len(), "{name} n={n} {bad:?}: {ours}");
                assert!(ours < halving, "{name} n={n} {bad:?}: {ours} vs {halving}");
            }
        }
    }
}

#[test]
fn a_node_slow_everywhere_is_named_as_the_node() {
    let mut rows = fleet(None);
    for r in &mut rows {
        if r.client_node == "n9" || r.server_node == "n9" {
            r.bw_avg_gbps = Some(10.0);
        }
    }
    let v = judge(&rows, Threshold::default());
    assert_eq!(v.suspects.len(), 1, "{:?}", v.suspects);
    assert!(
        matches!(&v.suspects[0], Suspect::Node { node, rails } if node == "n9" && rails.len() == 8)
    );
}

/// Issue 56: `fleet --rails 0` where no pod has rail 0 blamed "the rail's switch" (every pair
/// failed on it). A rail no pod lists is not present, and nothing else is said of it; a rail
/// some pod has stays the fabric's suspect.
#[test]
fn a_rail_no_pod_has_is_not_present_never_its_switch() {
    let rows = vec![
        row("a", "b", 0, None),
        row("a", "c", 0, None),
        row("b", "c", 0, None),
    ];
    let mut v = judge(&rows, Threshold::MedianPct(90.0));
    assert!(
        matches!(v.suspects[..], [Suspect::Rail { rail: 0, .. }]),
        "{:?}",
        v.suspects
    );
    let present = BTreeSet::from([1, 2]);
    assert_eq!(not_present(&mut v, &[0], Some(&present)), [0]);
    let said: Vec<String> = v.suspects.iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].starts_with("rail 0: not present in any pod") && !said[0].contains("switch"),
        "{said:?}"
    );
    assert!(v.unexplained.is_empty());
    // A rail a pod has is still the fabric's, and nothing is said without any pod's rails
    // read; pods read without any rail have none of them.
    let mut none = judge(&rows, Threshold::MedianPct(90.0));
    assert_eq!(not_present(&mut none, &[0], Some(&BTreeSet::new())), [0]);
    let mut v = judge(&rows, Threshold::MedianPct(90.0));
    assert!(not_present(&mut v, &[0], Some(&BTreeSet::from([0]))).is_empty());
    assert!(not_present(&mut v, &[0], None).is_empty());
    assert!(matches!(v.suspects[..], [Suspect::Rail { rail: 0, .. }]));
}
