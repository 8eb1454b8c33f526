//! Extra pairs to tell the bad nodes from their partners after a fleet's schedule: railsweep's
//! re-pairing (each suspect node against a node that passed) beside a halving re-test
//! (ClusterKit's way, as modelled in `orchestrator::fleet::culprit::simulate::halving`), over
//! the pairs of the same schedules. A simulation: a pair is slow exactly when a node is bad
//! (or, with a bad uplink, when it crosses that group's uplink). `topology:8` groups the nodes
//! 32 to a group (a rack's label) and applies railsweep's group rule
//! (`orchestrator::fleet::topology`) as well.
//!
//! `cargo run --release -p orchestrator --example culprit_pairs` prints two tables: small
//! fleets with placed bad nodes, then fleets of 1,000 to 16,000 nodes with random bad nodes and
//! a bad group uplink (docs/fleet.md has them).

use std::collections::BTreeSet;

use orchestrator::fleet::culprit::simulate;
use orchestrator::fleet::schedule::{self, all_pairs, random, ring, Schedule};
use orchestrator::fleet::topology;
use results::stats::Rng;

fn main() {
    println!("pattern\tnodes\tbad\trepair_pairs\thalving_pairs\tboth_found_all");
    for n in [8, 16, 64, 256, 1024] {
        for (name, sched) in [("all-pairs", all_pairs(n)), ("ring", ring(n))] {
            let pairs: Vec<_> = sched.pairs().collect();
            let placements: [(&str, Vec<usize>); 4] = [
                ("one", vec![3]),
                ("two-adjacent", vec![3, 4]),
                ("three-spread", vec![1, n / 2, n - 2]),
                ("every-8th", (0..n).step_by(8).collect()),
            ];
            for (what, bad) in placements {
                let bad: BTreeSet<usize> = bad.into_iter().collect();
                let (ours, found) = simulate::repair(n, &pairs, &bad);
                let (halving, found_h) = simulate::halving(&pairs, &bad);
                println!(
                    "{name}\t{n}\t{what} ({})\t{ours}\t{halving}\t{}",
                    bad.len(),
                    found == bad && found_h == bad
                );
            }
        }
    }
    println!();
    at_scale();
}

/// Trials per fleet size, pairing and planting.
const TRIALS: usize = 10;
/// Nodes behind one leaf switch, for the bad-uplink planting.
const GROUP: usize = 32;

/// `k` distinct nodes of `n`.
fn distinct(rng: &mut Rng, k: usize, n: usize) -> BTreeSet<usize> {
    let mut s = BTreeSet::new();
    while s.len() < k {
        s.insert(rng.below(n));
    }
    s
}

/// Large fleets: for each pairing, the pairs and rounds of its first pass, then over
/// [`TRIALS`] random plantings the extra pairs of the second pass, how often exactly the
/// planted nodes were named, and how many good nodes were named on average.
fn at_scale() {
    println!(
        "pairing\tnodes\tplanted\tpairs\trounds\textra_pairs\texactly_the_planted\tgood_nodes_named\tgroups_named"
    );
    // A fixed seed: the same table each run.
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    for n in [1_000, 4_000, 16_000] {
        let mut pairings: Vec<(String, Schedule)> = Vec::new();
        // All pairs of 16,000 nodes are 128 million pairs in 15,999 rounds: not a schedule
        // anyone runs; its figures are those of the smaller fleets' (every bad node found).
        if n <= 4_000 {
            pairings.push(("all-pairs".into(), all_pairs(n)));
        }
        pairings.push(("random:8".into(), random(n, 8, 42)));
        pairings.push(("random:15".into(), random(n, 15, 42)));
        pairings.push(("ring".into(), ring(n)));
        // The groups of the topology pattern (and of the bad uplink): 32 consecutive nodes.
        let group_of: Vec<usize> = (0..n).map(|i| i / GROUP).collect();
        pairings.push(("topology:8".into(), schedule::topology(&group_of, 8, 42)));
        for (name, sched) in &pairings {
            let pairs: Vec<_> = sched.pairs().collect();
            let grouped = name.starts_with("topology");
            // The groups the group rule names (topology only): `-` for the other patterns.
            let groups_named =
                |slow: &dyn Fn(usize, usize) -> bool, found: &BTreeSet<usize>| -> Vec<usize> {
                    topology::simulate(&group_of, &pairs, slow, &|x| found.contains(&x)).0
                };
            // A line of the table: extra pairs as the mean over the trials.
            let row = |pairing: &str,
                       planted: &str,
                       extra: usize,
                       exact: String,
                       good: String,
                       groups: String| {
                println!(
                    "{pairing}\t{n}\t{planted}\t{}\t{}\t{:.1}\t{exact}\t{good}\t{groups}",
                    pairs.len(),
                    sched.rounds.len(),
                    extra as f64 / TRIALS as f64
                );
            };
            for k in [4, 16] {
                let (mut extra, mut exact, mut good_named) = (0, 0, 0);
                let (mut extra_h, mut exact_h) = (0, 0);
                let mut false_groups = 0;
                for _ in 0..TRIALS {
                    let bad = distinct(&mut rng, k, n);
                    let (e, found) = simulate::repair(n, &pairs, &bad);
                    extra += e;
                    exact += usize::from(found == bad);
                    good_named += found.difference(&bad).count();
                    if grouped {
                        let slow = |a: usize, b: usize| bad.contains(&a) || bad.contains(&b);
                        false_groups += groups_named(&slow, &found).len();
                    }
                    if name == "ring" {
                        let (e, found) = simulate::halving(&pairs, &bad);
                        extra_h += e;
                        exact_h += usize::from(found == bad);
                    }
                }
                let planted = format!("{k} bad nodes");
                row(
                    name,
                    &planted,
                    extra,
                    format!("{exact}/{TRIALS}"),
                    format!("{:.1}", good_named as f64 / TRIALS as f64),
                    if grouped {
                        format!("{false_groups} (none is bad)")
                    } else {
                        "-".into()
                    },
                );
                if name == "ring" {
                    row(
                        "ring+halving",
                        &planted,
                        extra_h,
                        format!("{exact_h}/{TRIALS}"),
                        "-".into(),
                        "-".into(),
                    );
                }
            }
            // One group's uplink is bad: every pair across it is slow, its inside pairs are
            // not. No node is bad; any node named is a good node named.
            let (mut extra, mut good_named) = (0, 0);
            let (mut group_right, mut group_wrong) = (0, 0);
            for _ in 0..TRIALS {
                let g = rng.below(n / GROUP);
                let inside = |x: usize| x / GROUP == g;
                let slow = |a: usize, b: usize| inside(a) != inside(b);
                let (e, found) = simulate::repair_with(n, &pairs, &slow);
                extra += e;
                if grouped {
                    let named = groups_named(&slow, &found);
                    group_right += usize::from(named == [g]);
                    group_wrong += named.iter().filter(|&&x| x != g).count();
                    // The nodes named only through pairs across a named group's uplink are taken
                    // off (topology::judge): a node found here whose partner was outside its
                    // group behind that uplink.
                    good_named += found
                        .iter()
                        .filter(|&&x| !named.contains(&group_of[x]))
                        .count();
                } else {
                    good_named += found.len();
                }
            }
            row(
                name,
                &format!("bad uplink of {GROUP}"),
                extra,
                "-".into(),
                format!("{:.1}", good_named as f64 / TRIALS as f64),
                if grouped {
                    format!("{group_right}/{TRIALS} its group alone, {group_wrong} other")
                } else {
                    "-".into()
                },
            );
        }
    }
}
