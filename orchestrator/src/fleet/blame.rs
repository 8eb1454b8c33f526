//! The fleet's judgement on each row: which node, group or rail the comparison of pairs blames
//! for a slow row ([`results::FleetBlame`]), for its verdict ([`results::verdict::judge`]).

use std::collections::BTreeMap;

use results::{FleetBlame, GroupCulprit, RailResult, RailStatus};

use super::culprit::{self, Medians, Rules, Suspect};

/// What the fleet blames for `r`: `None` when `r` failed (its own cause says more), is not slow
/// by the fleet's `rules`, or no suspect is at one of its ends. A node slow on the rail (or on
/// every rail) comes first, then a group of one of its ends, then the rail slow everywhere.
/// `group_of` maps a node to its group's value (`--pattern topology`).
pub fn blame(
    r: &RailResult,
    medians: &Medians,
    rules: Rules,
    suspects: &[Suspect],
    groups: &[GroupCulprit],
    group_of: &BTreeMap<String, String>,
) -> Option<FleetBlame> {
    if r.status == RailStatus::Failed || !culprit::is_slow(r, medians, rules) {
        return None;
    }
    let (a, b) = culprit::row_nodes(r);
    let ends = [&a, &b];
    // The fleet names pods (its nodes where it ran on hosts); the verdict names the node.
    let node_of = |end: &String| {
        if *end == a {
            r.client_node.clone()
        } else {
            r.server_node.clone()
        }
    };
    for s in suspects {
        match s {
            Suspect::NodeRail {
                node,
                rail,
                median_gbps,
                fleet_median_gbps,
                ..
            } if *rail == r.rail && ends.contains(&node) => {
                return Some(FleetBlame::Node {
                    node: node_of(node),
                    pct_of_fleet: fleet_median_gbps
                        .filter(|m| *m > 0.0)
                        .map(|m| 100.0 * median_gbps / m),
                });
            }
            Suspect::Node { node, .. } if ends.contains(&node) => {
                return Some(FleetBlame::Node {
                    node: node_of(node),
                    pct_of_fleet: None,
                });
            }
            _ => {}
        }
    }
    for g in groups.iter().filter(|g| g.rail == r.rail) {
        if ends
            .iter()
            .any(|n| group_of.get(n.as_str()) == Some(&g.value))
        {
            return Some(FleetBlame::Group { group: g.name() });
        }
    }
    suspects.iter().find_map(|s| match s {
        Suspect::Rail { rail, pairs } if *rail == r.rail => {
            Some(FleetBlame::Rail { pairs: *pairs })
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::culprit::Threshold;
    use results::Layer;

    fn row(a: &str, b: &str, rail: u32, bw: f64) -> RailResult {
        crate::test_support::row(a, b, rail, Some(bw))
    }

    /// Six nodes, all pairs on rails 0 and 1; n3 is at half speed on rail 1 only.
    fn fleet() -> Vec<RailResult> {
        let nodes = ["n1", "n2", "n3", "n4", "n5", "n6"];
        let mut rows = Vec::new();
        for (i, a) in nodes.iter().enumerate() {
            for b in &nodes[i + 1..] {
                for rail in [0, 1] {
                    let slow = rail == 1 && (*a == "n3" || *b == "n3");
                    rows.push(row(a, b, rail, if slow { 50.0 } else { 100.0 }));
                }
            }
        }
        rows
    }

    #[test]
    fn a_node_bad_on_one_rail_is_blamed_on_that_rail_alone() {
        let rows = fleet();
        let rules = Rules::from(Threshold::MedianPct(90.0));
        let judged = culprit::judge(&rows, rules);
        let m = culprit::medians(&rows);
        let none = BTreeMap::new();
        let of = |r: &RailResult| blame(r, &m, rules, &judged.suspects, &[], &none);
        let mut blamed = 0;
        for r in &rows {
            let (a, b) = culprit::row_nodes(r);
            let has_n3 = a == "n3" || b == "n3";
            match of(r) {
                Some(FleetBlame::Node { node, pct_of_fleet }) => {
                    assert!(has_n3 && r.rail == 1, "{a} {b} rail {}", r.rail);
                    assert_eq!(node, "n3");
                    assert_eq!(pct_of_fleet.map(f64::round), Some(50.0));
                    let mut judged = r.clone();
                    judged.judge(None, of(r).as_ref());
                    assert_eq!(judged.layer, Some(Layer::Path));
                    blamed += 1;
                }
                other => assert!(!(has_n3 && r.rail == 1), "{a} {b}: {other:?}"),
            }
        }
        assert_eq!(blamed, 5, "n3's five pairs on rail 1");
    }

    #[test]
    fn a_group_or_the_whole_rail_is_blamed_when_no_node_is() {
        let rows = fleet();
        let rules = Rules::from(Threshold::MedianPct(90.0));
        let m = culprit::medians(&rows);
        let slow = rows
            .iter()
            .find(|r| r.rail == 1 && r.bw_avg_gbps == Some(50.0))
            .expect("a slow row");
        let g = GroupCulprit {
            label: "rack".into(),
            value: "r2".into(),
            rail: 1,
            cross_pairs: 5,
            cross_median_gbps: 50.0,
            inside_pairs: 0,
            inside_median_gbps: 0.0,
            every_group: false,
        };
        let of: BTreeMap<String, String> = [("n3".to_string(), "r2".to_string())].into();
        assert_eq!(
            blame(slow, &m, rules, &[], std::slice::from_ref(&g), &of),
            Some(FleetBlame::Group {
                group: "rack=r2".into()
            })
        );
        let everywhere = [Suspect::Rail { rail: 1, pairs: 15 }];
        assert_eq!(
            blame(slow, &m, rules, &everywhere, &[], &BTreeMap::new()),
            Some(FleetBlame::Rail { pairs: 15 })
        );
        let fast = rows.iter().find(|r| r.rail == 0).expect("a row");
        assert_eq!(blame(fast, &m, rules, &everywhere, &[g], &of), None);
    }
}
