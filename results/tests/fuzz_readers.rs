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

/// Four fixture rows as CSV and as JSON, with the names that tell their format.
fn corpus() -> [(Vec<u8>, &'static str); 2] {
    let rows = common::fixture_rows();
    let (mut csv, mut json) = (Vec::new(), Vec::new());
    write_csv(&mut csv, &rows[..4]).unwrap_or_else(|e| panic!("{e}"));
    write_json(&mut json, "fuzz", &rows[..4]).unwrap_or_else(|e| panic!("{e}"));
    [(csv, "in.csv"), (json, "in.json")]
}

#[test]
fn the_readers_take_random_and_mutated_files_without_panicking() {
    let (limit, mut r) = budget("results readers", 2.0);
    let corpus = corpus();
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

/// A number of the input, at random, replaced with a value out of every field's range (what a
/// pod or a hand-edited file can hold), so that rows break [`results::RailResult::validate`]
/// rather than the syntax.
fn spoil_a_number(r: &mut Rng, base: &[u8]) -> Vec<u8> {
    const BAD: [&str; 8] = [
        "-1",
        "NaN",
        "1e999",
        "-0.5",
        "inf",
        "99999999999",
        "1e308",
        "0",
    ];
    let digits: Vec<usize> = (0..base.len())
        .filter(|&i| base[i].is_ascii_digit() && (i == 0 || !base[i - 1].is_ascii_digit()))
        .collect();
    if digits.is_empty() {
        return base.to_vec();
    }
    let at = digits[r.below(digits.len() as u64) as usize];
    let end = (at..base.len())
        .find(|&i| !(base[i].is_ascii_digit() || base[i] == b'.'))
        .unwrap_or(base.len());
    let mut v = base[..at].to_vec();
    v.extend_from_slice(BAD[r.below(BAD.len() as u64) as usize].as_bytes());
    v.extend_from_slice(&base[end..]);
    v
}

/// Issue 53's limits on what `railsweep report` reads: the lenient reader leaves out each row
/// that breaks a rule, names it, and reads the rest; the size cap refuses exactly the inputs
/// over it. Random, mutated and spoiled inputs must keep these, and never panic:
/// - every row the lenient reader gives validates and writes again;
/// - each row left out is named with the file's name;
/// - where the strict reader reads, the lenient one reads the same rows and leaves none out;
///   where the lenient one leaves a row out, the strict one refuses the input;
/// - `read_capped` gives the input back when it is at most the cap (and UTF-8), and
///   `TooLarge` exactly when it is over.
#[test]
fn the_lenient_reader_and_the_size_cap_keep_their_rules() {
    let (limit, mut r) = budget("lenient reader and size cap", 2.0);
    let corpus = corpus();
    let t0 = Instant::now();
    let (mut cases, mut partial, mut capped) = (0u64, 0u64, 0u64);
    while t0.elapsed() < limit {
        let (base, name) = &corpus[r.below(2) as usize];
        let mut input = base.clone();
        for _ in 0..=r.below(3) {
            input = spoil_a_number(&mut r, &input);
        }
        if r.below(3) == 0 {
            input = mutate(&mut r, &input);
        }
        cases += 1;

        // The size cap, at a random distance from the input's size.
        let cap = match r.below(3) {
            0 => input.len() as u64,
            1 => (input.len() as u64).saturating_sub(1 + r.below(64)),
            _ => input.len() as u64 + r.below(64),
        };
        match results::read_capped(&input[..], name, cap) {
            Ok(text) => {
                assert!(
                    input.len() as u64 <= cap,
                    "{} bytes over a cap of {cap}",
                    input.len()
                );
                assert_eq!(text.as_bytes(), &input[..]);
            }
            Err(results::ResultsError::TooLarge { limit, .. }) => {
                assert_eq!(limit, cap);
                assert!(
                    input.len() as u64 > cap,
                    "{} bytes refused by a cap of {cap}",
                    input.len()
                );
                capped += 1;
            }
            Err(e) => {
                assert!(input.len() as u64 <= cap, "{e}");
                assert!(
                    std::str::from_utf8(&input).is_err(),
                    "valid UTF-8 refused: {e}"
                );
            }
        }

        let text = String::from_utf8_lossy(&input);
        let strict = read_str(&text, name);
        let Ok(lenient) = results::read_str_lenient(&text, name) else {
            assert!(
                strict.is_err(),
                "the strict reader read what the lenient one refused"
            );
            continue;
        };
        for row in &lenient.rows {
            if let Err(p) = row.validate() {
                panic!(
                    "a row that breaks a rule was read: `{}` {}",
                    p.field, p.message
                );
            }
        }
        let mut again = Vec::new();
        write_csv(&mut again, &lenient.rows).unwrap_or_else(|e| panic!("{e}"));
        for e in &lenient.left_out {
            assert!(e.to_string().contains(name), "{e}");
        }
        match strict {
            Ok(rows) => {
                assert!(lenient.left_out.is_empty(), "{:?}", lenient.left_out);
                assert_eq!(rows.len(), lenient.rows.len());
            }
            Err(e) => assert!(
                !lenient.left_out.is_empty(),
                "the strict reader refused ({e}) what the lenient one read whole"
            ),
        }
        if !lenient.left_out.is_empty() {
            partial += 1;
        }
    }
    eprintln!(
        "lenient reader and size cap: {cases} inputs, {partial} read in part, {capped} over the cap"
    );
    assert!(cases > 100);
    assert!(
        partial > 0 && capped > 0,
        "the spoiled inputs never reached a limit"
    );
}
