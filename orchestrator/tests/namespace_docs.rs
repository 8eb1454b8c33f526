//! Issue 56, item 5: one namespace, `railbench`, in every doc and example a user reads (README,
//! docs/, deploy/ and its examples, railsweep's help), the one deploy/namespace.yaml makes and
//! deploy/rbac.yaml grants in. Every `-n NAME`, `--namespace NAME` (or `=NAME`) and YAML
//! `namespace: NAME` there names it. Not scanned: the lab's own namespace (`lab`, in
//! docs/lab.md and docs/testing.md, which no command line names) and the test fixtures.

use std::path::{Path, PathBuf};
use std::process::Command;

const NAMESPACE: &str = "railbench";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The namespaces `text` names: after `-n` or `--namespace` (or `--namespace=`) in a command
/// line of railsweep or kubectl (rdmabw's `-n` is a count), and a YAML key `namespace:` (the
/// first word of a line that is no comment). A placeholder (`<NS>`) names none.
fn named(text: &str) -> Vec<(usize, String)> {
    let quotes = |w: &str| w.trim_matches(|c: char| "`'\"".contains(c)).to_string();
    let value = |w: &str| w.trim_matches(|c: char| "`'\",;)(".contains(c)).to_string();
    // A Kubernetes name (an RFC 1123 label), not a placeholder or a word of prose.
    let is_name = |v: &str| {
        !v.is_empty()
            && !v.starts_with('-')
            && v.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for (i, w) in words.iter().enumerate() {
            let next = words.get(i + 1).map(|x| value(x));
            let w = quotes(w);
            let command = words[..i]
                .iter()
                .any(|p| ["railsweep", "kubectl"].contains(&quotes(p).as_str()));
            let found = match w.as_str() {
                "-n" | "--namespace" if command => next,
                "namespace:" if i == 0 => next,
                _ if command => w.strip_prefix("--namespace=").map(value),
                _ => None,
            };
            if let Some(v) = found.filter(|v| is_name(v)) {
                out.push((n + 1, v));
            }
        }
    }
    out
}

/// The files a user reads: README.md, docs/*.md, deploy/ (its YAML, its examples).
fn files() -> Vec<PathBuf> {
    let mut v = vec![repo().join("README.md")];
    for dir in ["docs", "deploy", "deploy/examples"] {
        let mut here: Vec<PathBuf> = std::fs::read_dir(repo().join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "md" || x == "yaml" || x == "yml")
            })
            .collect();
        here.sort();
        v.extend(here);
    }
    v
}

/// Where deploy/namespace.yaml's Namespace is named, so that the rule's name is deploy's own.
#[test]
fn deploy_makes_the_one_namespace() {
    let ns = std::fs::read_to_string(repo().join("deploy/namespace.yaml"))
        .unwrap_or_else(|e| panic!("deploy/namespace.yaml: {e}"));
    let kinds: Vec<&str> = ns.lines().filter(|l| l.starts_with("kind:")).collect();
    assert_eq!(kinds, ["kind: Namespace"], "{ns}");
    let name = ns
        .lines()
        .find_map(|l| l.trim().strip_prefix("name:"))
        .map(str::trim);
    assert_eq!(name, Some(NAMESPACE), "{ns}");
    assert_eq!(
        orchestrator::modes::yaml::EXAMPLE_NAMESPACE,
        NAMESPACE,
        "deploy/examples"
    );
}

#[test]
fn every_doc_and_example_names_one_namespace() {
    let mut other = Vec::new();
    let mut seen = 0;
    for f in files() {
        let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for (line, ns) in named(&text) {
            seen += 1;
            if ns != NAMESPACE {
                let name = f.strip_prefix(repo()).unwrap_or(&f);
                other.push(format!("{}:{line}: {ns}", name.display()));
            }
        }
    }
    // railsweep's help, every command's.
    let rs = env!("CARGO_BIN_EXE_railsweep");
    let help = |args: &[&str]| {
        let o = Command::new(rs)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("railsweep {args:?}: {e}"));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let top = help(&["--help"]);
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 4, "{top}");
    for (what, text) in std::iter::once(("--help".to_string(), top.clone())).chain(
        commands
            .iter()
            .map(|c| (format!("{c} --help"), help(&[c, "--help"]))),
    ) {
        for (line, ns) in named(&text) {
            seen += 1;
            if ns != NAMESPACE {
                other.push(format!("railsweep {what}, line {line}: {ns}"));
            }
        }
    }
    assert!(
        seen > 20,
        "only {seen} namespaces found: the scan reads nothing"
    );
    assert!(
        other.is_empty(),
        "namespaces other than {NAMESPACE} (deploy/namespace.yaml's, the one deploy/rbac.yaml grants in):\n{}",
        other.join("\n")
    );
}

#[test]
fn the_scan_finds_each_spelling() {
    let text = "railsweep run -n rdma --client-pod a\n  namespace: rdma-hostnet\n\
                kubectl get pods --namespace=x\nctr -n k8s.io images import\n\
                rdmabw client -n 5000 10.0.0.2\n# namespace: the one of the rows\n\
                | `-n`, `--namespace` | the pods' namespace |\n  -n, --namespace <NS>\n\
                (rdmabw lat -n, ib_write_lat -n), at least 5";
    let found: Vec<String> = named(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(found, ["rdma", "rdma-hostnet", "x"]);
}
