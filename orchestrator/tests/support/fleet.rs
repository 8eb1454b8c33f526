//! rounds.tsv as the fleet tests read it.
#![allow(dead_code)]

use std::path::Path;

/// One line of rounds.tsv.
#[derive(Debug, Clone)]
pub struct Ran {
    pub attempt: String,
    pub round: usize,
    pub client: String,
    pub server: String,
    pub start: f64,
    pub end: f64,
    pub rows: usize,
}

pub fn rounds(out: &Path) -> Vec<Ran> {
    let tsv = std::fs::read_to_string(out.join("rounds.tsv")).expect("rounds.tsv");
    let mut lines = tsv.lines();
    assert_eq!(
        lines.next(),
        Some("attempt\tround\tclient\tserver\tstart_unix\tend_unix\trows\terror")
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Ran {
                attempt: f[0].into(),
                round: f[1].parse().expect("round"),
                client: f[2].into(),
                server: f[3].into(),
                start: f[4].parse().expect("start"),
                end: f[5].parse().expect("end"),
                rows: f[6].parse().expect("rows"),
            }
        })
        .collect()
}
