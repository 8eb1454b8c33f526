//! Which pairs of nodes are measured in which round.
//!
//! A round is a set of disjoint pairs: no node is in two pairs of one round, because a node
//! runs one client or one server daemon at a time (a node's rails are shared by every test
//! it takes part in, so two tests on one node would measure each other). The rounds of
//! `all-pairs` come from the circle method of round-robin tournaments: node 0 stays put,
//! the others turn one place per round, and position `i` meets position `M-1-i`. With `N`
//! even that gives `N-1` rounds of `N/2` pairs, every pair exactly once; with `N` odd a
//! phantom node makes `N` even, and whoever meets it sits the round out (a bye).
//!
//! Everything here works on node indexes; [`Schedule::named`] maps them back to names.

use std::fmt;
use std::str::FromStr;

/// Which pairs a fleet run measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// [`Pattern::AllPairs`] up to [`AUTO_ALL_PAIRS_MAX`] nodes, [`Pattern::Random`] with
    /// [`RANDOM_ROUNDS`] rounds above ([`Pattern::for_fleet`]).
    Auto,
    /// Every pair of nodes once (`N(N-1)/2` pairs).
    AllPairs,
    /// Each node with its neighbour in the node order, the last with the first (`N` pairs;
    /// one for two nodes).
    Ring,
    /// Every other node against one reference node, one pair per round (the reference can
    /// only take part in one test at a time).
    OneToAll(String),
    /// `rounds` rounds of random disjoint pairs, as fleets of thousands are checked (Google's
    /// cluster health scanner, Imbue's 15 rounds): each node in one pair a round (one bye a
    /// round when odd). `seed` makes it repeatable; none takes one from the clock
    /// ([`Pattern::with_seed`]), which the run prints.
    Random {
        /// How many rounds.
        rounds: usize,
        /// The generator's seed.
        seed: Option<u64>,
    },
    /// Pairs inside and across the groups of a node label (`--topology-label`): half of the
    /// rounds pair nodes inside their group, the other half across groups
    /// ([`super::topology`]), so that a group whose cross pairs are slow while its inside
    /// pairs are fast is told apart from a bad node. Built by [`Schedule::build_grouped`].
    Topology {
        /// How many rounds, inside and across groups together.
        rounds: usize,
        /// The generator's seed (as [`Pattern::Random`]'s).
        seed: Option<u64>,
    },
}

/// The rounds of `random` when not given.
pub const RANDOM_ROUNDS: usize = 8;

/// The rounds of `topology` when not given: 4 inside the groups, 4 across them.
pub const TOPOLOGY_ROUNDS: usize = 8;

/// The largest fleet `auto` measures all pairs of: 63 rounds (64 nodes at one 5 s window a
/// round is about 6 minutes a rail); above, all pairs grow as the square of the fleet.
pub const AUTO_ALL_PAIRS_MAX: usize = 64;

impl Pattern {
    /// The pattern a fleet of `n` nodes runs: `auto` chosen by its size, and a seed where it
    /// takes one and has none ([`Pattern::with_seed`]).
    #[must_use]
    pub fn for_fleet(self, n: usize) -> Pattern {
        match self {
            Pattern::Auto if n <= AUTO_ALL_PAIRS_MAX => Pattern::AllPairs,
            Pattern::Auto => Pattern::Random {
                rounds: RANDOM_ROUNDS,
                seed: None,
            }
            .with_seed(),
            p => p.with_seed(),
        }
    }

    /// The same pattern with a seed where it takes one and has none: from the clock, so that
    /// two runs pair differently; the pattern's text then repeats this run.
    #[must_use]
    pub fn with_seed(self) -> Pattern {
        match self {
            Pattern::Random { rounds, seed: None } => Pattern::Random {
                rounds,
                seed: Some(clock_seed()),
            },
            Pattern::Topology { rounds, seed: None } => Pattern::Topology {
                rounds,
                seed: Some(clock_seed()),
            },
            p => p,
        }
    }
}

/// A seed from the clock.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// `NAME[:ROUNDS[:SEED]]`'s rounds (from `min` to 10000, `default` when absent) and seed.
fn rounds_and_seed(
    s: &str,
    name: &str,
    default: usize,
    min: usize,
) -> Result<(usize, Option<u64>), String> {
    let mut parts = s.splitn(3, ':').skip(1);
    let rounds = match parts.next() {
        None => default,
        Some(r) => r.parse::<usize>().ok().filter(|r| (min..=10_000).contains(r)).ok_or_else(|| {
            format!("`{s}`: the rounds of {name}:ROUNDS[:SEED] are a whole number from {min} to 10000, e.g. {name}:{default}")
        })?,
    };
    let seed = match parts.next() {
        None => None,
        Some(x) => Some(x.parse::<u64>().map_err(|_| {
            format!(
                "`{s}`: the seed of {name}:ROUNDS:SEED is a whole number, e.g. {name}:{default}:42"
            )
        })?),
    };
    Ok((rounds, seed))
}

impl FromStr for Pattern {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Pattern::Auto),
            "all-pairs" => Ok(Pattern::AllPairs),
            "ring" => Ok(Pattern::Ring),
            _ if s == "random" || s.starts_with("random:") => {
                let (rounds, seed) = rounds_and_seed(s, "random", RANDOM_ROUNDS, 1)?;
                Ok(Pattern::Random { rounds, seed })
            }
            _ if s == "topology" || s.starts_with("topology:") => {
                let (rounds, seed) = rounds_and_seed(s, "topology", TOPOLOGY_ROUNDS, 2)?;
                Ok(Pattern::Topology { rounds, seed })
            }
            _ => match s.strip_prefix("one-to-all") {
                Some(rest) => {
                    let node = rest.trim_start_matches(['=', ':', ' ']).trim();
                    if node.is_empty() {
                        Err("one-to-all needs the reference node: `one-to-all=NODE`".into())
                    } else {
                        Ok(Pattern::OneToAll(node.to_string()))
                    }
                }
                None => Err(format!(
                    "unknown pattern `{s}`: expected auto, all-pairs, ring, random[:ROUNDS[:SEED]], topology[:ROUNDS[:SEED]] or one-to-all=NODE"
                )),
            },
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Auto => f.write_str("auto"),
            Pattern::AllPairs => f.write_str("all-pairs"),
            Pattern::Ring => f.write_str("ring"),
            Pattern::OneToAll(n) => write!(f, "one-to-all={n}"),
            Pattern::Random { rounds, seed: None } => write!(f, "random:{rounds}"),
            Pattern::Random {
                rounds,
                seed: Some(s),
            } => write!(f, "random:{rounds}:{s}"),
            Pattern::Topology { rounds, seed: None } => write!(f, "topology:{rounds}"),
            Pattern::Topology {
                rounds,
                seed: Some(s),
            } => write!(f, "topology:{rounds}:{s}"),
        }
    }
}

/// One measured pair: `client` runs the rdmabw clients against `server`'s daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pair {
    /// Index of the client node.
    pub client: usize,
    /// Index of the server node.
    pub server: usize,
}

impl Pair {
    /// The pair with the smaller index first, whatever the roles.
    pub fn key(self) -> (usize, usize) {
        (self.client.min(self.server), self.client.max(self.server))
    }
}

/// The rounds of a fleet run over `nodes` nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// How many nodes.
    pub nodes: usize,
    /// Rounds in order; the pairs of a round are disjoint.
    pub rounds: Vec<Vec<Pair>>,
}

/// Why no schedule can be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Fewer than two nodes.
    #[error("a fleet needs at least two nodes, got {0}")]
    TooFew(usize),
    /// `one-to-all` names a node that is not in the fleet.
    #[error("the reference node {0} of one-to-all is not one of the fleet's nodes")]
    UnknownReference(String),
    /// `topology` without the nodes' groups.
    #[error("--pattern topology needs the nodes' groups: give --topology-label KEY")]
    NoGroups,
    /// The groups are not one per node.
    #[error("{groups} group indexes for {nodes} nodes")]
    GroupsMismatch {
        /// Group indexes given.
        groups: usize,
        /// Nodes.
        nodes: usize,
    },
}

impl Schedule {
    /// The schedule of `pattern` over `names` (the node order is the order given).
    pub fn build(pattern: &Pattern, names: &[String]) -> Result<Schedule, ScheduleError> {
        Schedule::build_grouped(pattern, names, None)
    }

    /// [`Schedule::build`], with each node's group index for `topology` (`group_of[i]` is the
    /// group of `names[i]`; other patterns ignore it).
    pub fn build_grouped(
        pattern: &Pattern,
        names: &[String],
        group_of: Option<&[usize]>,
    ) -> Result<Schedule, ScheduleError> {
        let n = names.len();
        if n < 2 {
            return Err(ScheduleError::TooFew(n));
        }
        Ok(match pattern {
            Pattern::Auto => return Schedule::build(&Pattern::Auto.for_fleet(n), names),
            Pattern::Topology { rounds, seed } => {
                let groups = group_of.ok_or(ScheduleError::NoGroups)?;
                if groups.len() != n {
                    return Err(ScheduleError::GroupsMismatch {
                        groups: groups.len(),
                        nodes: n,
                    });
                }
                super::topology::schedule(groups, *rounds, seed.unwrap_or(1))
            }
            Pattern::AllPairs => all_pairs(n),
            Pattern::Ring => ring(n),
            Pattern::OneToAll(reference) => {
                let r = names
                    .iter()
                    .position(|x| x == reference)
                    .ok_or_else(|| ScheduleError::UnknownReference(reference.clone()))?;
                one_to_all(n, r)
            }
            Pattern::Random { rounds, seed } => random(n, *rounds, seed.unwrap_or(1)),
        })
    }

    /// Every pair, round by round.
    pub fn pairs(&self) -> impl Iterator<Item = Pair> + '_ {
        self.rounds.iter().flatten().copied()
    }

    /// How many pairs in all.
    pub fn len(&self) -> usize {
        self.rounds.iter().map(Vec::len).sum()
    }

    /// True when there is no pair at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The nodes sitting round `r` out.
    pub fn byes(&self, r: usize) -> Vec<usize> {
        let mut busy = vec![false; self.nodes];
        for p in &self.rounds[r] {
            busy[p.client] = true;
            busy[p.server] = true;
        }
        (0..self.nodes).filter(|&i| !busy[i]).collect()
    }
}

/// The circle method: `N-1` rounds of `N/2` pairs for `N` even, `N` rounds with one bye each
/// for `N` odd. Every node is client about as often as server (within one).
pub fn all_pairs(n: usize) -> Schedule {
    let m = n + n % 2; // with a phantom node `n` when odd
    let mut circle: Vec<usize> = (0..m).collect();
    let mut rounds = Vec::with_capacity(m - 1);
    for r in 0..m - 1 {
        let mut round = Vec::with_capacity(m / 2);
        for i in 0..m / 2 {
            let (a, b) = (circle[i], circle[m - 1 - i]);
            if a == n || b == n {
                continue; // the bye
            }
            // The fixed node alternates; the others are client in the top half of the circle,
            // which each passes through about half of the time.
            let (client, server) = if i > 0 || r % 2 == 0 { (a, b) } else { (b, a) };
            round.push(Pair { client, server });
        }
        rounds.push(round);
        // Keep position 0, turn the others one place.
        circle[1..].rotate_right(1);
    }
    Schedule { nodes: n, rounds }
}

/// Neighbours in a ring: edge `i` joins `i` and `i+1`. Even edges in one round and odd edges
/// in another; for `N` odd the edge closing the ring meets both, and gets a third round.
pub fn ring(n: usize) -> Schedule {
    if n == 2 {
        return Schedule {
            nodes: n,
            rounds: vec![vec![Pair {
                client: 0,
                server: 1,
            }]],
        };
    }
    let mut rounds: Vec<Vec<Pair>> = vec![Vec::new(), Vec::new()];
    for i in 0..n {
        let p = Pair {
            client: i,
            server: (i + 1) % n,
        };
        if n % 2 == 1 && i == n - 1 {
            rounds.push(vec![p]);
        } else {
            rounds[i % 2].push(p);
        }
    }
    Schedule { nodes: n, rounds }
}

/// `rounds` rounds, each a random matching of the `n` nodes (a shuffle, then neighbours pair
/// up; for `n` odd the last sits out), from the xorshift64* generator seeded with `seed`.
pub fn random(n: usize, rounds: usize, seed: u64) -> Schedule {
    let mut rng = results::stats::Rng::new(seed);
    let mut order: Vec<usize> = (0..n).collect();
    let rounds = (0..rounds)
        .map(|_| {
            for i in (1..n).rev() {
                order.swap(i, rng.below(i + 1));
            }
            order
                .chunks_exact(2)
                .map(|p| Pair {
                    client: p[0],
                    server: p[1],
                })
                .collect()
        })
        .collect();
    Schedule { nodes: n, rounds }
}

/// Every node against `reference`, one pair per round; the reference runs the daemon.
pub fn one_to_all(n: usize, reference: usize) -> Schedule {
    let rounds = (0..n)
        .filter(|&i| i != reference)
        .map(|i| {
            vec![Pair {
                client: i,
                server: reference,
            }]
        })
        .collect();
    Schedule { nodes: n, rounds }
}

#[cfg(test)]
mod tests {
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
        let distinct: std::collections::BTreeSet<(usize, usize)> =
            s.pairs().map(Pair::key).collect();
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
}
