//! Simulations of the ways to find the bad nodes after a schedule, over its pairs only (no
//! measurement): a pair is slow exactly when one of its nodes is bad.

use std::collections::BTreeSet;

use crate::fleet::schedule::Pair;

/// Extra pairs railsweep measures ([`super::repairs`]): one per node that is in a slow pair
/// and in no fast one (the bad ones, and partners with no fast pair), against a node that
/// passed (one with a fast pair). Returns (extra pairs, the nodes found bad after them).
pub fn repair(n: usize, pairs: &[Pair], bad: &BTreeSet<usize>) -> (usize, BTreeSet<usize>) {
    repair_with(n, pairs, &|a, b| bad.contains(&a) || bad.contains(&b))
}

/// [`repair`] where `slow(a, b)` says whether a pair is slow (a bad uplink makes every
/// pair across it slow, whatever its nodes). The partners that passed are taken in turn,
/// as railsweep does; a suspect is found bad when its pair with its partner is slow.
pub fn repair_with(
    n: usize,
    pairs: &[Pair],
    slow: &dyn Fn(usize, usize) -> bool,
) -> (usize, BTreeSet<usize>) {
    let mut in_slow = vec![false; n];
    let mut in_fast = vec![false; n];
    for p in pairs {
        let set = if slow(p.client, p.server) {
            &mut in_slow
        } else {
            &mut in_fast
        };
        set[p.client] = true;
        set[p.server] = true;
    }
    let suspects: Vec<usize> = (0..n).filter(|&x| in_slow[x] && !in_fast[x]).collect();
    let passed: Vec<usize> = (0..n).filter(|&x| in_fast[x]).collect();
    if passed.is_empty() || n < 3 {
        return (0, suspects.into_iter().collect());
    }
    let found = suspects
        .iter()
        .enumerate()
        .filter(|(i, &s)| slow(s, passed[i % passed.len()]))
        .map(|(_, &s)| s)
        .collect();
    (suspects.len(), found)
}

/// A halving re-test as ClusterKit describes it, in this model: the nodes of the slow
/// pairs are split in two halves, each half is tested as a ring (a pair of 2 nodes as
/// one pair), and each half whose ring has a slow pair is halved again, until groups of 2,
/// whose nodes are each measured against a known-good node. Returns (extra pairs, the
/// nodes found bad).
pub fn halving(pairs: &[Pair], bad: &BTreeSet<usize>) -> (usize, BTreeSet<usize>) {
    let slow = |a: usize, b: usize| bad.contains(&a) || bad.contains(&b);
    let group: Vec<usize> = pairs
        .iter()
        .filter(|p| slow(p.client, p.server))
        .flat_map(|p| [p.client, p.server])
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut cost = 0;
    let mut found = BTreeSet::new();
    let mut stack = vec![group];
    while let Some(g) = stack.pop() {
        if g.len() <= 2 {
            cost += g.len();
            found.extend(g.iter().copied().filter(|x| bad.contains(x)));
            continue;
        }
        let (a, b) = g.split_at(g.len() / 2);
        for half in [a, b] {
            let ring: Vec<(usize, usize)> = match half.len() {
                0 | 1 => Vec::new(),
                2 => vec![(half[0], half[1])],
                m => (0..m).map(|i| (half[i], half[(i + 1) % m])).collect(),
            };
            cost += ring.len();
            let any_slow = ring.iter().any(|&(x, y)| slow(x, y));
            if any_slow {
                stack.push(half.to_vec());
            } else if half.len() == 1 && bad.contains(&half[0]) {
                // A lone node, tested against a known-good one.
                cost += 1;
                found.insert(half[0]);
            } else if half.len() == 1 {
                cost += 1;
            }
        }
    }
    (cost, found)
}
