//! `rdmabw batch` as railsweep drives it: argument vectors on stdin, one end line per test on
//! both streams, failures that end a test but not the batch. (Tests that move data through a
//! batch run in the lab: `scripts/labtests/sweep.sh`.)

use std::io::Write;
use std::process::{Command, Stdio};

use results::rdmabw::report::{BatchEnd, BwReport};

fn batch(input: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rdmabw"))
        .arg("batch")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts rdmabw batch");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("writes the tests");
    child.wait_with_output().expect("rdmabw batch ends")
}

fn ends(text: &[u8]) -> Vec<BatchEnd> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(BatchEnd::parse)
        .collect()
}

#[test]
fn every_line_gets_an_end_on_both_streams_and_a_failure_does_not_end_the_batch() {
    let input = concat!(
        "not json\n",
        "\n",
        "[\"devices\"]\n",
        "[\"client\",\"--json\",\"-D\",\"1\",\"--tclass\",\"300\",\"10.0.0.2\"]\n",
        "[\"client\",\"--json\",\"-D\",\"1\",\"-d\",\"no_such_dev9\",\"-x\",\"1\",\"-p\",\"1\",\"127.0.0.1\"]\n",
    );
    let out = batch(input);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let want: Vec<BatchEnd> = [(1, 2), (3, 2), (4, 2), (5, 2)]
        .iter()
        .map(|&(test, exit_code)| BatchEnd { test, exit_code })
        .collect();
    assert_eq!(ends(&out.stdout), want, "stdout");
    assert_eq!(ends(&out.stderr), want, "stderr");
    assert!(stderr.contains("JSON array of strings"), "{stderr}");
    assert!(stderr.contains("client tests only"), "{stderr}");
    assert!(stderr.contains("--tclass"), "{stderr}");
    // A client that fails after its flags were accepted still prints its --json document,
    // before its end line.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last_doc = stdout
        .split(&format!("{}\n", want[2].line()))
        .nth(1)
        .and_then(|rest| rest.split(results::rdmabw::report::BATCH_END).next())
        .unwrap_or_default();
    let rep: BwReport =
        serde_json::from_str(last_doc.trim()).unwrap_or_else(|e| panic!("{e}: {stdout:?}"));
    assert!(rep.error.is_some(), "{stdout}");
}

#[test]
fn an_empty_input_is_an_empty_batch() {
    let out = batch("");
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}
