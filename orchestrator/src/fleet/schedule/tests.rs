use std::collections::BTreeSet;

use super::*;

/// No node twice in a round; returns how many pairs each round has.
fn check_rounds(s: &Schedule) {
    let mut seen_in = vec![usize::MAX; s.nodes];
    for (r, round) in s.rounds.iter().enumerate() {
        for p in round {
            assert_ne!(
                p.client, p.server,
                "N={}: a node paired with itself",
                s.nodes
            );
            for x in [p.client, p.server] {
                assert!(x < s.nodes);
                assert_ne!(seen_in[x], r, "N={}: node {x} twice in round {r}", s.nodes);
                seen_in[x] = r;
            }
        }
    }
}

fn check_all_pairs(n: usize) {
    let s = all_pairs(n);
    check_rounds(&s);
    // Every pair exactly once: a bit per unordered pair.
    let mut met = vec![false; n * n];
    for p in s.pairs() {
        let (a, b) = p.key();
        assert!(!met[a * n + b], "N={n}: pair {a}-{b} twice");
        met[a * n + b] = true;
    }
    assert_eq!(s.len(), n * (n - 1) / 2, "N={n}: not every pair");
    if n % 2 == 0 {
        assert_eq!(s.rounds.len(), n - 1, "N={n}: rounds");
        assert!(
            s.rounds.iter().all(|r| r.len() == n / 2),
            "N={n}: a round is not full"
        );
        assert!((0..s.rounds.len()).all(|r| s.byes(r).is_empty()));
    } else {
        assert_eq!(s.rounds.len(), n, "N={n}: rounds");
        assert!(
            (0..n).all(|r| s.byes(r).len() == 1),
            "N={n}: one bye per round"
        );
    }
}

/// Every N to 256, then a spread of both parities to 1,024 (the whole range checks
/// 180 million pairs: 15 s in the suite's build, whose railsweep crate is unoptimized).
#[test]
fn all_pairs_every_n_from_2_to_256_and_a_spread_to_1024() {
    for n in (2..=256)
        .chain((257..=1024).step_by(37))
        .chain([511, 512, 1023, 1024])
    {
        check_all_pairs(n);
    }
}

#[test]
fn all_pairs_balances_roles() {
    let s = all_pairs(64);
    let mut clients = [0usize; 64];
    for p in s.pairs() {
        clients[p.client] += 1;
    }
    let (lo, hi) = (
        clients.iter().min().expect("clients"),
        clients.iter().max().expect("clients"),
    );
    assert!(hi - lo <= 1, "client counts {lo}..{hi}");
}

#[test]
fn four_nodes_three_rounds_of_two() {
    let s = all_pairs(4);
    assert_eq!(s.rounds.len(), 3);
    assert!(s.rounds.iter().all(|r| r.len() == 2));
}

#[test]
fn ring_neighbours_once_no_node_twice() {
    for n in 2..=300 {
        let s = ring(n);
        check_rounds(&s);
        let want = if n == 2 { 1 } else { n };
        assert_eq!(s.len(), want, "N={n}");
        for p in s.pairs() {
            let (a, b) = p.key();
            assert!(
                b == a + 1 || (a == 0 && b == n - 1),
                "N={n}: {a}-{b} are not neighbours"
            );
        }
        assert!(s.rounds.len() <= 3);
    }
}

#[test]
fn one_to_all_one_pair_per_round() {
    let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
    let s = Schedule::build(&Pattern::OneToAll("n3".into()), &names).expect("a schedule");
    assert_eq!(s.rounds.len(), 9);
    assert!(s
        .rounds
        .iter()
        .all(|r| r.len() == 1 && r[0].server == 3 && r[0].client != 3));
    check_rounds(&s);
    assert_eq!(
        Schedule::build(&Pattern::OneToAll("x".into()), &names),
        Err(ScheduleError::UnknownReference("x".into()))
    );
}

#[test]
fn random_rounds_are_matchings_repeatable_by_seed() {
    for n in [2, 3, 10, 1001] {
        let s = random(n, 8, 42);
        check_rounds(&s);
        assert_eq!(s.rounds.len(), 8);
        assert!(s.rounds.iter().all(|r| r.len() == n / 2), "N={n}");
        assert_eq!(s, random(n, 8, 42), "the same seed, the same pairs");
    }
    assert_ne!(random(100, 8, 1), random(100, 8, 2));
    // 8 rounds of 1000 nodes: few pairs come twice (28 pairs of rounds x 500 pairs / 999: 14
    // expected).
    let s = random(1000, 8, 7);
    let distinct: BTreeSet<(usize, usize)> = s.pairs().map(Pair::key).collect();
    assert!(
        distinct.len() > 3950,
        "{} distinct pairs of 4000",
        distinct.len()
    );
}

#[test]
fn patterns_parse() {
    assert_eq!(
        "random".parse(),
        Ok(Pattern::Random {
            rounds: RANDOM_ROUNDS,
            seed: None
        })
    );
    assert_eq!(
        "random:15:42".parse(),
        Ok(Pattern::Random {
            rounds: 15,
            seed: Some(42)
        })
    );
    assert_eq!(
        "random:15:42".parse::<Pattern>().map(|p| p.to_string()),
        Ok("random:15:42".into())
    );
    assert!("random:0"
        .parse::<Pattern>()
        .expect_err("0 rounds")
        .contains("from 1 to 10000"));
    assert!("random:8:x"
        .parse::<Pattern>()
        .expect_err("bad seed")
        .contains("SEED"));
    assert_eq!(Pattern::Auto.for_fleet(64), Pattern::AllPairs);
    assert!(matches!(
        Pattern::Auto.for_fleet(65),
        Pattern::Random {
            rounds: RANDOM_ROUNDS,
            seed: Some(_)
        }
    ));
    match "random:3".parse::<Pattern>().map(Pattern::with_seed) {
        Ok(Pattern::Random {
            rounds: 3,
            seed: Some(_),
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!("all-pairs".parse(), Ok(Pattern::AllPairs));
    assert_eq!("ring".parse(), Ok(Pattern::Ring));
    assert_eq!(
        "one-to-all=podA".parse(),
        Ok(Pattern::OneToAll("podA".into()))
    );
    assert!("one-to-all".parse::<Pattern>().is_err());
    assert!("mesh".parse::<Pattern>().is_err());
    assert_eq!(
        Schedule::build(&Pattern::AllPairs, &["a".into()]),
        Err(ScheduleError::TooFew(1))
    );
}

/// `k` groups of `size` nodes, node i in group i / size.
fn racks(k: usize, size: usize) -> Vec<usize> {
    (0..k * size).map(|i| i / size).collect()
}

#[test]
fn rounds_are_disjoint_inside_then_across() {
    for (k, size) in [(2, 2), (3, 5), (8, 4), (31, 32), (1, 7), (5, 1), (4, 3)] {
        let of = racks(k, size);
        let s = topology(&of, 8, 42);
        check_rounds(&s);
        assert_eq!(s, topology(&of, 8, 42), "the same seed, the same pairs");
        let inside_round = |r: &Vec<Pair>| r.iter().all(|p| of[p.client] == of[p.server]);
        // Inside rounds first: as many as a group has distinct ones, at most 4.
        let want_inside = circle_rounds(size).min(4);
        assert!(
            s.rounds[..want_inside].iter().all(inside_round),
            "{k}x{size}"
        );
        let mut in_inside = BTreeSet::new();
        for p in s.rounds[..want_inside].iter().flatten() {
            in_inside.extend([p.client, p.server]);
        }
        let want_in = if size >= 2 { of.len() } else { 0 };
        assert_eq!(
            in_inside.len(),
            want_in,
            "{k}x{size}: every node of a group of 2+"
        );
        let pairs: BTreeSet<(usize, usize)> = s.rounds[..want_inside]
            .iter()
            .flatten()
            .map(|p| p.key())
            .collect();
        assert_eq!(
            pairs.len(),
            s.rounds[..want_inside].iter().map(Vec::len).sum::<usize>(),
            "{k}x{size}: no inside pair twice"
        );
        let cross = &s.rounds[want_inside..];
        assert_eq!(cross.len(), 4, "{k}x{size}");
        if k >= 2 {
            for r in cross {
                assert!(
                    r.iter().all(|p| of[p.client] != of[p.server]),
                    "{k}x{size}: the last 4 rounds go across the groups"
                );
                // Everyone paired (one left out when odd).
                assert_eq!(r.len(), of.len() / 2, "{k}x{size}");
            }
        }
    }
}

#[test]
fn inside_rounds_of_a_group_do_not_repeat_until_they_must() {
    // A group of 5: 5 rounds of the circle method (one bye each) give its 10 pairs once.
    let of = vec![0; 5];
    let s = topology(&of, 10, 7);
    check_rounds(&s);
    let inside: Vec<(usize, usize)> = s.rounds[..5].iter().flatten().map(|p| p.key()).collect();
    let distinct: BTreeSet<_> = inside.iter().copied().collect();
    assert_eq!((inside.len(), distinct.len()), (10, 10));
}

#[test]
fn topology_rounds_over_unequal_groups() {
    // Groups of 2, 3, 1 and 1 (the last as the unlabelled ones).
    let of = [1, 1, 2, 0, 2, 2, 3];
    let s = topology(&of, 6, 3);
    check_rounds(&s);
    assert_eq!(s.rounds.len(), 6);
    // A group larger than half the fleet cannot be paired only across.
    let big = [vec![0; 7], vec![1; 2]].concat();
    check_rounds(&topology(&big, 4, 1));
    assert_eq!(topology_split(8), (4, 4));
    assert_eq!(topology_split(3), (1, 2));
    assert_eq!(topology_split(2), (1, 1));
}

#[test]
fn topology_parses_and_needs_groups() {
    assert_eq!(
        "topology".parse(),
        Ok(Pattern::Topology {
            rounds: TOPOLOGY_ROUNDS,
            seed: None
        })
    );
    assert_eq!(
        "topology:6:9".parse::<Pattern>().map(|p| p.to_string()),
        Ok("topology:6:9".into())
    );
    assert!("topology:1"
        .parse::<Pattern>()
        .expect_err("1 round")
        .contains("from 2 to 10000"));
    let names: Vec<String> = (0..4).map(|i| format!("n{i}")).collect();
    let p = Pattern::Topology {
        rounds: 4,
        seed: Some(1),
    };
    assert_eq!(Schedule::build(&p, &names), Err(ScheduleError::NoGroups));
    let s = Schedule::build_grouped(&p, &names, Some(&[0, 0, 1, 1])).expect("a schedule");
    check_rounds(&s);
    assert!(matches!(
        Pattern::Topology {
            rounds: 8,
            seed: None
        }
        .for_fleet(100),
        Pattern::Topology { seed: Some(_), .. }
    ));
}
