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

use results::stats::Rng;

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
    /// rounds pair nodes inside their group, the other half across groups ([`topology()`]),
    /// so that a group whose cross pairs are slow while its inside pairs are fast is told
    /// apart from a bad node ([`super::topology`]). Built by [`Schedule::build_grouped`].
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
                topology(groups, *rounds, seed.unwrap_or(1))
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
    let mut rng = Rng::new(seed);
    let mut order: Vec<usize> = (0..n).collect();
    let rounds = (0..rounds)
        .map(|_| {
            shuffle(&mut order, &mut rng);
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

/// How the `rounds` of `topology` split: (inside the groups, across them); at least one of each.
pub fn topology_split(rounds: usize) -> (usize, usize) {
    let inside = (rounds / 2).max(1);
    (inside, rounds.saturating_sub(inside).max(1))
}

/// The schedule of `topology:ROUNDS:SEED` over nodes whose groups are `group_of` ([`topology_split`]
/// rounds inside, then across; a round with no pair is left out).
pub fn topology(group_of: &[usize], rounds: usize, seed: u64) -> Schedule {
    let n = group_of.len();
    let mut rng = Rng::new(seed);
    let n_groups = group_of.iter().max().map_or(0, |g| g + 1);
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n_groups];
    for (i, &g) in group_of.iter().enumerate() {
        members[g].push(i);
    }
    for m in &mut members {
        shuffle(m, &mut rng);
    }
    let (inside, cross) = topology_split(rounds);
    let mut out: Vec<Vec<Pair>> = Vec::with_capacity(inside + cross);
    for r in 0..inside {
        // A group whose pairs have all come sits the rest of the inside rounds out.
        let round: Vec<Pair> = members
            .iter()
            .filter(|m| r < circle_rounds(m.len()))
            .flat_map(|m| circle_round(m, r))
            .collect();
        out.push(round);
    }
    for r in 0..cross {
        let mut order: Vec<usize> = (0..n_groups).collect();
        shuffle(&mut order, &mut rng);
        let mut line: Vec<usize> = Vec::with_capacity(n);
        for &g in &order {
            let mut m = members[g].clone();
            shuffle(&mut m, &mut rng);
            line.extend(m);
        }
        let half = n / 2;
        out.push(
            (0..half)
                .map(|i| {
                    let (a, b) = (line[i], line[i + half]);
                    oriented(a, b, (i + r) % 2 == 0)
                })
                .collect(),
        );
    }
    out.retain(|r| !r.is_empty());
    Schedule {
        nodes: n,
        rounds: out,
    }
}

/// Fisher-Yates with the fleet's generator.
fn shuffle(v: &mut [usize], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        v.swap(i, rng.below(i + 1));
    }
}

/// The rounds of the circle method over `s` members (0 for fewer than 2).
fn circle_rounds(s: usize) -> usize {
    if s < 2 {
        0
    } else {
        s + s % 2 - 1
    }
}

/// Round `r` (modulo the group's rounds) of the circle method over `m`'s members, computed
/// directly (a group without the label may be the whole fleet: its all pairs are not built).
fn circle_round(m: &[usize], r: usize) -> Vec<Pair> {
    let s = m.len();
    if s < 2 {
        return Vec::new();
    }
    let k = s + s % 2; // a phantom member `s` when odd
    let r = r % (k - 1);
    // Position 0 stays; after r turns, position i >= 1 holds member 1 + (i - 1 - r) mod (k - 1).
    let at = |i: usize| {
        if i == 0 {
            0
        } else {
            1 + (i - 1 + (k - 1) - r) % (k - 1)
        }
    };
    (0..k / 2)
        .filter_map(|i| {
            let (a, b) = (at(i), at(k - 1 - i));
            if a == s || b == s {
                return None;
            }
            let (a, b) = (m[a], m[b]);
            Some(oriented(a, b, (i + r) % 2 == 0))
        })
        .collect()
}

/// The pair of `a` and `b`, `a` the client when `a_first`: roles alternate over the rounds so
/// that each node is client about as often as server.
fn oriented(a: usize, b: usize, a_first: bool) -> Pair {
    if a_first {
        Pair {
            client: a,
            server: b,
        }
    } else {
        Pair {
            client: b,
            server: a,
        }
    }
}

#[cfg(test)]
mod tests;
