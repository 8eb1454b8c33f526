//! What the Kubernetes tests share: running railsweep, the modes' options, and a run that must
//! be refused before it sweeps.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use super::fake::Fake;
use super::testcluster::TestCluster;

/// railsweep with `args`, no stdin, output captured.
pub async fn railsweep(args: &[String]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("railsweep runs")
}

/// railsweep's arguments for `cmd` (run, compare) between `nodes` with kubeconfig `kc` and the
/// fake rdmabw `f`: tests of one second, the CSV to `out`, quiet, pods given 30 s to start;
/// then `extra`.
pub fn sweep_args(
    cmd: &str,
    kc: &Path,
    f: &Fake,
    out: &Path,
    nodes: &str,
    extra: &[&str],
) -> Vec<String> {
    let (kc, rdmabw, out) = (
        kc.display().to_string(),
        f.path().display().to_string(),
        out.display().to_string(),
    );
    let base = [
        cmd,
        "--kubeconfig",
        &kc,
        "--nodes",
        nodes,
        "--rdmabw",
        &rdmabw,
        "--window",
        "1",
        "--output-file",
        &out,
        "--quiet",
        "--pod-timeout",
        "30",
    ];
    base.iter().chain(extra).map(|s| s.to_string()).collect()
}

/// Every option the four modes need, as one command line (MODE: prefixes keep them apart).
pub const MODE_OPTIONS: [&str; 10] = [
    "--uverbs",
    "0-17",
    "--networks",
    "ipvlan:rdma-ipvlan-{0..15}",
    "--rdma-resource",
    "ipvlan:nvidia.com/hostdev=16",
    "--networks",
    "sriov:sriov-rdma-rail-{0..1}",
    "--rdma-resource",
    "sriov:nvidia.com/sriov_rdma_rail{0..1}=1",
];

/// railsweep with `args`, which must be refused before any sweep: exit 2 within 25 s (at once,
/// not at the pod timeout), each of `expect` and a "what to do:" on stderr, no railsweep pod
/// left in `ns`, no results file `out`. Its stderr.
pub async fn refused(
    c: &TestCluster,
    ns: &str,
    args: &[String],
    out: &Path,
    expect: &[&str],
) -> String {
    let t0 = Instant::now();
    let r = railsweep(args).await;
    let stderr = String::from_utf8_lossy(&r.stderr).to_string();
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        t0.elapsed() < Duration::from_secs(25),
        "explained at once, not at the timeout: {stderr}"
    );
    for e in expect {
        assert!(stderr.contains(e), "expected {e:?} in:\n{stderr}");
    }
    assert!(stderr.contains("what to do:"), "{stderr}");
    assert!(c.pods_left(ns).await.is_empty(), "{stderr}");
    assert!(!out.exists(), "no sweep ran");
    stderr
}
