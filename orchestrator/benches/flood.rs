//! railsweep's memory under a flood from a pod (issue 53's acceptance figures): `railsweep run
//! --runner local` against the fake rdmabw of `tests/support/fake.rs`, one rail, whose client
//! or server daemon prints as fast as it can for `FLOOD_SECS` seconds (10 by default) before
//! the client reports. Each kind of flood runs once, after a run without one (the baseline);
//! printed per run: the bytes the fake printed (dd's count), railsweep's peak RSS and CPU
//! seconds (GNU time's `%M`, `%U` + `%S`), the wall time and the rail's status.
//!
//! `cargo bench -p orchestrator --bench flood` (or `scripts/bench-flood`). Not a test: it
//! asserts only that the sweep ended and wrote its row; the figures are what it is for.

#[path = "../tests/support/mod.rs"]
#[allow(dead_code, unused_imports)]
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use results::{read_path, RailStatus};
use support::fake::{local_run, Behave, Fake};
use support::process;

/// GNU time's `%M %U %S` (peak RSS in KiB, user and system CPU seconds) from its `-o` file.
fn time_figures(path: &std::path::Path) -> (u64, f64) {
    // Its last line: a command that exits non-zero gets a line saying so before it.
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let f: Vec<&str> = text
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (num(0) as u64, num(1) + num(2))
}

/// dd's count of the bytes a flood printed (`N bytes (...) copied`), 0 if none.
fn flooded(f: &Fake) -> u64 {
    std::fs::read_to_string(f.file("flood-count"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.split(" bytes").next()?.trim().parse().ok())
        .unwrap_or(0)
}

struct Figures {
    kind: &'static str,
    flooded_mb: f64,
    hwm_mib: f64,
    cpu_s: f64,
    wall_s: f64,
    status: String,
}

fn run(kind: &'static str, secs: u64, set_up: impl FnOnce(&Fake)) -> Figures {
    let f = Fake::new(1);
    f.write("flood-secs", &secs.to_string());
    set_up(&f);
    let out = f.file("sweep.csv");
    let margin = (secs * 3).to_string();
    let fake = f.path().display().to_string();
    let times = f.file("time.out");
    // railsweep under GNU time, whose wait4 gives its peak RSS however short its life.
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "%M %U %S", "-o"])
        .arg(&times)
        .arg(env!("CARGO_BIN_EXE_railsweep"))
        .args(local_run(&fake))
        .args(["-D", "1", "--margin", &margin, "--port", "18998", "-o"])
        .arg(&out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("/usr/bin/time railsweep starts");
    let t0 = Instant::now();
    let limit = Duration::from_secs(secs * 6 + 30);
    let code = process::wait_exit(&mut child, limit);
    assert!(
        t0.elapsed() < limit,
        "{kind}: railsweep still ran after {limit:?}"
    );
    let wall_s = t0.elapsed().as_secs_f64();
    let (hwm, cpu) = time_figures(&times);
    let rows = read_path(&out).unwrap_or_else(|e| panic!("{kind}: exit {code:?}, no rows: {e}"));
    assert_eq!(rows.len(), 1, "{kind}");
    let status = match rows[0].status {
        RailStatus::Ok => "ok".to_string(),
        s => format!("{s} ({})", rows[0].error.as_deref().unwrap_or_default()),
    };
    Figures {
        kind,
        flooded_mb: flooded(&f) as f64 / 1e6,
        hwm_mib: hwm as f64 / 1024.0,
        cpu_s: cpu,
        wall_s,
        status,
    }
}

fn main() {
    let secs: u64 = std::env::var("FLOOD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|s| *s > 0)
        .unwrap_or(10);
    let runs = [
        run("none (baseline)", secs, |_| {}),
        run("client stdout, short lines", secs, |f| {
            f.behave("net1", Behave::FloodLines)
        }),
        run("client stderr, short lines", secs, |f| {
            f.behave("net1", Behave::FloodStderr)
        }),
        run("client stdout, one line", secs, |f| {
            f.behave("net1", Behave::FloodLine)
        }),
        run("server daemon stdout, short lines", secs, |f| {
            f.write("server-flood", "");
            f.behave("net1", Behave::Linger);
        }),
    ];
    println!("railsweep run --runner local, one rail, a flood of {secs} s from the fake rdmabw");
    println!(
        "{:<36} {:>12} {:>14} {:>8} {:>8}  rail",
        "flood", "flooded MB", "peak RSS MiB", "CPU s", "wall s"
    );
    for r in &runs {
        println!(
            "{:<36} {:>12.1} {:>14.1} {:>8.2} {:>8.1}  {}",
            r.kind, r.flooded_mb, r.hwm_mib, r.cpu_s, r.wall_s, r.status
        );
    }
}
