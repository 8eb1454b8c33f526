//! A bounded random-input test of the results readers (CSV, JSON, format detection): random
//! bytes and mutations of the fixture files must give rows or an error, never a panic, and
//! whatever reads must write again. A couple of seconds by default; `RAILBENCH_FUZZ_SECS=600`
//! runs it for ten minutes. The seed is printed, and `RAILBENCH_FUZZ_SEED` replays one.

mod common;
mod fuzzing;

use std::time::Instant;

use fuzzing::{budget, Rng};
use results::{read_str, write_csv, write_json};

/// Bytes a mutation inserts: the ones CSV and JSON give meaning to, and some others.
const SPICE: &[u8] = b",\"\n\r{}[]:0-9eE.+-nulltrue\\'=@\t \xef\xbb\xbf\xff";

fn mutate(r: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..=r.below(6) {
        let at = r.below(v.len() as u64 + 1) as usize;
        match r.below(4) {
            0 if at < v.len() => v[at] = SPICE[r.below(SPICE.len() as u64) as usize],
            1 if at < v.len() => {
                let end = (at + 1 + r.below(40) as usize).min(v.len());
                v.drain(at..end);
            }
            2 => v.insert(at, SPICE[r.below(SPICE.len() as u64) as usize]),
            _ => {
                // A piece of the input repeated elsewhere.
                let from = r.below(v.len() as u64) as usize;
                let end = (from + r.below(64) as usize).min(v.len());
                let piece = v[from..end].to_vec();
                let at = at.min(v.len());
                v.splice(at..at, piece);
            }
        }
    }
    v
}

#[test]
fn the_readers_take_random_and_mutated_files_without_panicking() {
    let (limit, mut r) = budget("results readers", 2.0);
    let rows = common::fixture_rows();
    let (mut csv, mut json) = (Vec::new(), Vec::new());
    write_csv(&mut csv, &rows[..4]).unwrap_or_else(|e| panic!("{e}"));
    write_json(&mut json, "fuzz", &rows[..4]).unwrap_or_else(|e| panic!("{e}"));
    let corpus = [(csv, "in.csv"), (json, "in.json")];
    let t0 = Instant::now();
    let (mut cases, mut read) = (0u64, 0u64);
    while t0.elapsed() < limit {
        let (base, name) = &corpus[r.below(2) as usize];
        let input = if r.below(10) == 0 {
            (0..r.below(200)).map(|_| r.next() as u8).collect()
        } else {
            mutate(&mut r, base)
        };
        let text = String::from_utf8_lossy(&input);
        let name = if r.below(4) == 0 { "in.txt" } else { name };
        cases += 1;
        if let Ok(rows) = read_str(&text, name) {
            read += 1;
            let mut again = Vec::new();
            // Rows that read are valid rows: they write again.
            write_csv(&mut again, &rows).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    eprintln!("results readers: {cases} inputs, {read} read");
    assert!(cases > 100);
}
