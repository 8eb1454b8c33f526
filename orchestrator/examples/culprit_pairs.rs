//! Extra pairs to tell the bad nodes from their partners after a fleet's schedule: railsweep's
//! re-pairing (each suspect node against a node that passed) beside a halving re-test
//! (ClusterKit's way, as modelled in `orchestrator::fleet::culprit::simulate::halving`), over
//! the pairs of the same schedules. A simulation: a pair is slow exactly when a node is bad.
//!
//! `cargo run --release -p orchestrator --example culprit_pairs`

use std::collections::BTreeSet;

use orchestrator::fleet::culprit::simulate;
use orchestrator::fleet::schedule::{all_pairs, ring};

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
}
