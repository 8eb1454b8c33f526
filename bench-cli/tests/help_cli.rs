//! Issue 56, item 5: `rdmabw --help` is a grouped summary no longer than perftest's own
//! `ib_write_bw --help` plus rdmabw's list of commands, every flag still in full in a command's
//! `--help`; `rdmabw lat --help` has examples; a mistyped command gets "did you mean".

use std::process::Command;
use std::time::{Duration, Instant};

#[path = "support/cli.rs"]
mod cli;
use cli::{rdmabw, text};

/// Lines of `ib_write_bw --help` of the lab's perftest (Debian unstable's 25.01.0+0.80-1, wire
/// version 6.24, run through scripts/lab.d/ib_write_bw): counted, not guessed, and checked
/// against the live one below wherever the lab's perftest is there.
const IB_WRITE_BW_HELP_LINES: usize = 98;

/// The help `args` prints (exit 0, on stdout).
fn help(args: &[&str]) -> String {
    let out = rdmabw(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// The flags of the options' own lines in a help (not the words of descriptions or examples).
fn listed(help: &str) -> Vec<String> {
    help.lines()
        .filter(|l| (2..=6).contains(&(l.len() - l.trim_start().len())))
        .filter(|l| l.trim_start().starts_with('-'))
        .flat_map(|l| {
            l.split_whitespace()
                .take_while(|w| w.starts_with('-'))
                .map(|w| w.trim_end_matches(',').to_string())
        })
        .collect()
}

/// The "Commands:" block of a help: its heading, one line per command, and the blank line after.
fn commands_block(help: &str) -> usize {
    let block: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(block.len() > 5, "no list of commands:\n{help}");
    block.len() + 1
}

#[test]
fn the_top_level_help_is_no_longer_than_ib_write_bws_plus_the_commands() {
    let long = help(&["--help"]);
    let bound = IB_WRITE_BW_HELP_LINES + commands_block(&long);
    let lines = long.lines().count();
    assert!(
        lines <= bound,
        "rdmabw --help: {lines} lines, more than ib_write_bw's {IB_WRITE_BW_HELP_LINES} plus the \
         commands' {}:\n{long}",
        bound - IB_WRITE_BW_HELP_LINES
    );
    // One summary, whichever way it is asked for.
    assert_eq!(help(&["-h"]), long, "-h and --help differ");
    assert_eq!(help(&["help"]), long, "rdmabw help and --help differ");
    // Grouped, each group under its heading, and it says where each flag is in full.
    for heading in [
        "Commands:",
        "Rail:",
        "Shape:",
        "Timing:",
        "Transport:",
        "Output:",
        "Control channel:",
        "Server:",
        "Exit status: 0 it worked",
        "rdmabw client --help, server --help, lat --help",
    ] {
        assert!(long.contains(heading), "no {heading:?}:\n{long}");
    }
    assert!(
        long.lines().all(|l| l.chars().count() <= 100),
        "a line over 100 columns:\n{long}"
    );
    println!("rdmabw --help: {lines} lines (bound {bound})");
}

/// The bound's reference, where the lab's perftest can be run (after `scripts/lab --prepare`).
#[test]
fn the_reference_count_is_the_lab_perftests() {
    let lab = format!(
        "{}/../scripts/lab.d/ib_write_bw",
        env!("CARGO_MANIFEST_DIR")
    );
    let version = Command::new(&lab).arg("--version").output().ok();
    let version = version.map(|o| text(&o.stdout).trim().to_string());
    if version.as_deref() != Some("Version: 6.24") {
        println!(
            "no lab perftest 25.01 (wire 6.24) here ({version:?}): the count stands as measured"
        );
        return;
    }
    let out = Command::new(&lab)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{lab} --help: {e}"));
    let lines = text(&out.stdout).lines().count() + text(&out.stderr).lines().count();
    assert_eq!(
        lines, IB_WRITE_BW_HELP_LINES,
        "ib_write_bw --help of the lab"
    );
}

/// Nothing is lost by the summary: the flags it leaves out, and every flag it lists, are in the
/// `--help` of `rdmabw client` or `rdmabw server` (the bare form takes both's), in full.
#[test]
fn every_flag_of_the_bare_form_is_in_a_commands_full_help() {
    let root = help(&["--help"]);
    let client = help(&["client", "--help"]);
    let server = help(&["server", "--help"]);
    let full: Vec<String> = listed(&client).into_iter().chain(listed(&server)).collect();
    let mut summary = listed(&root);
    summary.retain(|f| !["-V", "--version", "-h", "--help"].contains(&f.as_str()));
    assert!(summary.len() > 50, "{summary:?}");
    for f in &summary {
        assert!(
            full.contains(f),
            "{f} is in rdmabw --help, in no command's:\n{root}"
        );
    }
    for left_out in [
        "--connection",
        "--CPU-freq",
        "--peer",
        "--secret-stdin",
        "--rate_units",
        "--cuda-bus-id",
        "--noPeak",
        "--retry-count",
    ] {
        assert!(!summary.iter().any(|f| f == left_out), "{left_out}: {root}");
        assert!(full.iter().any(|f| f == left_out), "{left_out} nowhere");
    }
    // The full text: a flag's second paragraph, and the exit statuses.
    assert!(
        client.contains("busy-polls through the measured window"),
        "{client}"
    );
    assert!(server.contains("130 interrupted"), "{server}");
}

#[test]
fn lat_help_has_examples() {
    let long = help(&["lat", "--help"]);
    for example in [
        "Examples (the ib_write_lat line each one replaces first):",
        "# ib_write_lat -d mlx5_3 -x 3 10.0.3.2",
        "rdmabw lat -d mlx5_3 10.0.3.2",
        "--max-p99-us 5 10.224.0.2",
        "ln -s rdmabw ib_write_lat",
    ] {
        assert!(
            long.contains(example),
            "lat --help lacks {example:?}:\n{long}"
        );
    }
    let short = help(&["lat", "-h"]);
    assert!(short.contains("rdmabw lat -d mlx5_3 10.0.3.2"), "{short}");
    assert!(
        !short.contains("ln -s rdmabw"),
        "-h is the summary:\n{short}"
    );
}

/// A bare first word close to a command that does not resolve is a mistyped command: clap's
/// "unrecognized subcommand" with the command meant, exit 2, at once. (A name that resolves
/// stays a host, as ib_write_bw takes it: the rule's unit test, in cli.)
#[test]
fn a_mistyped_command_gets_did_you_mean() {
    for (word, meant) in [
        ("rail", "rails"),
        ("gpu", "gpus"),
        ("serve", "server"),
        ("cleint", "client"),
        ("latency", "lat"),
        ("Devices", "devices"),
    ] {
        let t0 = Instant::now();
        let out = rdmabw(&[word, "--json"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{word}: {err}");
        assert!(
            err.contains(&format!("unrecognized subcommand '{word}'"))
                && err.contains(&format!("a similar subcommand exists: '{meant}'")),
            "{word}: {err}"
        );
        assert!(out.stdout.is_empty(), "{word}: {}", text(&out.stdout));
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{word}: {:?}",
            t0.elapsed()
        );
    }
    // A word close to no command is the bare form's HOST, as before.
    let out = rdmabw(&["zqxwvk"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("similar subcommand"), "{err}");
}
