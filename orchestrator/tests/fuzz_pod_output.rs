//! Bounded random-input tests of what railsweep reads from a pod (issue 53's limits): the tail
//! it keeps of each stream, and the report it takes from a client's output. A couple of
//! seconds each by default; `RAILBENCH_FUZZ_SECS` and `RAILBENCH_FUZZ_SEED` as for the other
//! fuzz tests (`results/tests/fuzzing`).

#[path = "../../results/tests/fuzzing/mod.rs"]
mod fuzzing;

use std::time::Instant;

use fuzzing::{budget, Rng};
use orchestrator::rdmabw::{parse_client, ClientOutcome};
use orchestrator::runner::bounded::{OverlongLine, Tail};
use orchestrator::runner::{Exit, Output};

/// What a [`Tail`] of lines up to `max_line` must hold of `input`, before its size cap: every
/// line of at most `max_line` bytes (with its newline), the unfinished last one too; how many
/// bytes of it came after the last longer line (all of it if none came); whether one came.
fn model(input: &[u8], max_line: usize) -> (Vec<u8>, usize, bool) {
    let (mut kept, mut over) = (Vec::new(), false);
    let mut since_over = 0;
    let mut lines = input.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        let last = lines.peek().is_none();
        if line.len() > max_line {
            over = true;
            since_over = kept.len();
        } else {
            kept.extend_from_slice(line);
            if !last {
                kept.push(b'\n');
            }
        }
    }
    let after = kept.len() - since_over;
    (kept, after, over)
}

/// Input with lines of every length around `max_line`, and now and then one far longer.
fn stream(r: &mut Rng, max_line: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..r.below(40) {
        let len = match r.below(8) {
            0 => max_line + r.below(3) as usize,
            1 => max_line * (2 + r.below(4) as usize),
            2 => max_line.saturating_sub(r.below(3) as usize),
            _ => r.below(max_line as u64 / 2 + 1) as usize,
        };
        v.extend((0..len).map(|_| b'a' + r.below(26) as u8));
        if r.below(12) != 0 {
            v.push(b'\n');
        }
    }
    v
}

/// However a stream comes (lines of any length, cut into chunks anywhere), the tail holds at
/// most its cap, from the start of a line, a suffix of the lines within the limit: all of them
/// where they fit and none went over (a line on its way over the limit takes room until it
/// goes, which may push older lines out), and what came after the last line over the limit
/// where that fits; the last line whole where it fits (a client's report is its last line);
/// and it says a line went over exactly when one did.
#[test]
fn the_tail_of_a_stream_keeps_its_bounds_and_the_last_lines() {
    let (limit, mut r) = budget("stream tail", 2.0);
    let t0 = Instant::now();
    let (mut cases, mut trimmed) = (0u64, 0u64);
    while t0.elapsed() < limit {
        let max_line = 1 + r.below(48) as usize;
        let cap = max_line + r.below(3 * max_line as u64) as usize;
        let input = stream(&mut r, max_line);
        let mut tail = Tail::new(cap, max_line);
        let mut rest = &input[..];
        while !rest.is_empty() {
            let n = (1 + r.below(2 * max_line as u64) as usize).min(rest.len());
            tail.push(&rest[..n]);
            rest = &rest[n..];
        }
        cases += 1;
        let (want, after, over) = model(&input, max_line);
        assert_eq!(tail.overlong(), over, "overlong, input {:?}", text(&input));
        let got = tail.into_bytes();
        let ctx = || format!("cap {cap}, max line {max_line}, input {:?}", text(&input));
        assert!(got.len() <= cap, "{} bytes kept: {}", got.len(), ctx());
        assert!(want.ends_with(&got), "not a suffix of the lines: {}", ctx());
        let start = want.len() - got.len();
        assert!(
            start == 0 || want[start - 1] == b'\n',
            "kept from inside a line: {}",
            ctx()
        );
        if after <= cap {
            assert!(
                got.len() >= after,
                "lost what came after the last long line: {}",
                ctx()
            );
        }
        if want.len() <= cap && !over {
            assert_eq!(got, want, "{}", ctx());
        } else {
            trimmed += 1;
            // The last complete line and the unfinished one after it, where they fit and came
            // after the last long line.
            let body = want.strip_suffix(b"\n").unwrap_or(&want);
            let last_start = body.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            if want.len() - last_start <= cap.min(after) {
                assert!(
                    got.len() >= want.len() - last_start,
                    "the last line was cut: {}",
                    ctx()
                );
            }
        }
    }
    eprintln!("stream tail: {cases} streams, {trimmed} over their cap");
    assert!(cases > 100 && trimmed > 0);
}

/// A compact bandwidth report as rdmabw prints it (the lab fixture, one line).
fn report_line() -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/bwreport-lab-4k-64k.json"
    );
    let text = std::fs::read_to_string(path).expect("fixture");
    let v: serde_json::Value = serde_json::from_str(&text).expect("fixture parses");
    v.to_string()
}

/// A number of the report replaced with a value out of range, or a byte changed.
fn spoil(r: &mut Rng, line: &str) -> String {
    const BAD: [&str; 9] = [
        "-1",
        "NaN",
        "1e999",
        "-0.5",
        "1e308",
        "0",
        "18446744073709551616",
        "null",
        "\"x\"",
    ];
    let b = line.as_bytes();
    let starts: Vec<usize> = (0..b.len())
        .filter(|&i| {
            b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit() && b[i - 1] != b'.')
        })
        .collect();
    let mut s = line.to_string();
    if r.below(4) == 0 || starts.is_empty() {
        let at = r.below(b.len() as u64) as usize;
        if s.is_char_boundary(at) && s.is_char_boundary(at + 1) {
            s.replace_range(at..at + 1, ["{", "\"", ",", "]", "9"][r.below(5) as usize]);
        }
        return s;
    }
    let at = starts[r.below(starts.len() as u64) as usize];
    let end = (at..b.len())
        .find(|&i| !(b[i].is_ascii_digit() || matches!(b[i], b'.' | b'e' | b'E' | b'-' | b'+')))
        .unwrap_or(b.len());
    s.replace_range(at..end, BAD[r.below(BAD.len() as u64) as usize]);
    s
}

/// Whatever a client prints (its report spoiled, log lines around it, any exit code, a line
/// over the limit), reading it never panics, a measurement it gives keeps every rule of the
/// rows made of it, and a failure has a reason of bounded length.
#[test]
fn a_clients_report_is_checked_where_it_arrives() {
    let (limit, mut r) = budget("client reports", 2.0);
    let good = report_line();
    let t0 = Instant::now();
    let (mut cases, mut measured) = (0u64, 0u64);
    while t0.elapsed() < limit {
        let mut report = good.clone();
        for _ in 0..r.below(3) {
            report = spoil(&mut r, &report);
        }
        let mut stdout = Vec::new();
        for _ in 0..r.below(3) {
            stdout.extend_from_slice(b"rdmabw: a log line\n");
        }
        stdout.extend_from_slice(report.as_bytes());
        stdout.push(b'\n');
        let exit = Exit::Code([0, 1, 2, 137][r.below(4) as usize]);
        let mut out = Output::new(exit, stdout, b"rdmabw: error: something\n".to_vec());
        if r.below(10) == 0 {
            out.overlong = Some(OverlongLine {
                stream: "stdout",
                limit: 1024,
            });
        }
        cases += 1;
        match parse_client(&out) {
            ClientOutcome::Measured(rep) => {
                measured += 1;
                assert!(
                    out.overlong.is_none(),
                    "measured with a line over the limit"
                );
                if let Err(p) = rep.check() {
                    panic!(
                        "a report that breaks a rule was taken: `{}` {}",
                        p.field, p.message
                    );
                }
            }
            ClientOutcome::Failed(why, _) => {
                assert!(!why.is_empty());
                assert!(why.len() <= 4096, "a reason of {} bytes", why.len());
                assert!(!why.contains('\n'), "a reason over lines: {why:?}");
            }
        }
    }
    eprintln!("client reports: {cases} outputs, {measured} measured");
    assert!(cases > 100 && measured > 0);
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
