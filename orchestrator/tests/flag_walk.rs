//! The flag walk: every spelling whose meaning changed is refused, exit 2, with the spelling
//! to give now named (docs/railsweep.md, "One meaning per spelling"); the new spellings take
//! the old meanings' place. The table's rule over both binaries' flags is checked by
//! railsweep's own tests (`every_spelling_of_both_tools_has_one_meaning`) and each binary's
//! `every_flag_is_in_the_table_of_both_tools`.

use orchestrator::config::renamed::RENAMED;
use std::process::Command;

fn railsweep(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("railsweep runs")
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The least arguments each command parses with, so that only the spelling is at fault.
fn base(command: &str) -> Vec<&'static str> {
    match command {
        "run" => vec![
            "run",
            "--runner",
            "local",
            "--client-pod",
            "a",
            "--server-pod",
            "b",
        ],
        "compare" => vec!["compare", "--modes", "hostnetwork", "--nodes", "a,b"],
        "fleet" => vec!["fleet", "--runner", "local", "--pods", "a,b"],
        "report" => vec!["report", "x.csv"],
        other => panic!("no base for {other}"),
    }
}

#[test]
fn every_refused_spelling_exits_2_naming_the_new_one() {
    let mut walked = 0;
    for r in RENAMED {
        for command in r.commands {
            let mut args = base(command);
            args.extend([r.spelling, "out.json"]);
            let o = railsweep(&args);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
            for now in r.now {
                assert!(e.contains(now), "{args:?} does not name {now}: {e}");
            }
            assert!(!std::path::Path::new("out.json").exists());
            walked += 1;
        }
    }
    assert!(walked >= 8, "only {walked} refusals walked");
    // `--json` alone is rdmabw's now (the rows on stdout), not refused: it parses.
    let o = railsweep(&[
        "fleet",
        "--json",
        "--runner",
        "local",
        "--pods",
        "a,b",
        "--dry-run",
    ]);
    assert!(!stderr(&o).contains("--out_json_file"), "{}", stderr(&o));
}

#[test]
fn dash_d_alone_is_refused_with_window_and_f_named_and_d_with_f_is_ibwritebws() {
    let mut args = base("run");
    args.extend(["-D", "5"]);
    let o = railsweep(&args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("--window 5") && e.contains("-D 5 -f") && e.contains("measures 3 s"),
        "{e}"
    );
    // -D 5 -f 1 and --window 3 pass the timing (and fail later, on the missing namespaces).
    for timing in [
        &["-D", "5", "-f", "1"][..],
        &["--window", "3"],
        &["-D", "5", "-f", "0"],
    ] {
        let mut args = base("run");
        args.extend(timing);
        let e = stderr(&railsweep(&args));
        assert!(
            !e.contains("-D 5:") && !e.contains("nothing to measure"),
            "{timing:?}: {e}"
        );
    }
    // -D 2 -f 1: perftest's margins leave nothing to measure, said in its words.
    let mut args = base("run");
    args.extend(["-D", "2", "-f", "1"]);
    let o = railsweep(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("leaves nothing to measure"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn dash_o_with_a_file_is_refused_naming_output_file_in_every_command() {
    for command in ["run", "compare", "report"] {
        let mut args = base(command);
        args.extend(["-o", "sweep.csv"]);
        let o = railsweep(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{command}: {e}");
        assert!(e.contains("--output-file sweep.csv"), "{command}: {e}");
    }
    // A fleet's files are its --out-dir's: -o FILE and --output-file say so.
    let mut args = base("fleet");
    args.extend(["-o", "fleet.csv"]);
    let e = stderr(&railsweep(&args));
    assert!(e.contains("--output-file fleet.csv"), "{e}");
    let mut args = base("fleet");
    args.extend(["--output-file", "fleet.csv"]);
    let o = railsweep(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--out-dir"), "{}", stderr(&o));
    // A format a command does not print is refused with the ones it does.
    let mut args = base("run");
    args.extend(["-o", "png"]);
    let e = stderr(&railsweep(&args));
    assert!(
        e.contains("-o png") && e.contains("table, markdown, csv, json"),
        "{e}"
    );
}

#[test]
fn cluster_is_kubectls_and_the_rows_label_is_cluster_label() {
    let mut args = base("run");
    args.extend(["--cluster", "prod"]);
    let o = railsweep(&args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("--cluster-label prod"), "{e}");
    // A kubeconfig without that cluster: refused naming the ones it has, before any request.
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("kubeconfig");
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\nclusters:\n- name: lab\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: lab\n  context:\n    cluster: lab\n    user: u\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .expect("write");
    let o = railsweep(&[
        "run",
        "--kubeconfig",
        kc.to_str().expect("utf-8"),
        "--client-pod",
        "a",
        "--server-pod",
        "b",
        "--cluster",
        "prod",
        "--request-timeout",
        "1s",
    ]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("it has lab") && e.contains("--cluster-label prod"),
        "{e}"
    );
}
