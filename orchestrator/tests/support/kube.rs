//! What the Kubernetes tests share: running railsweep, the modes' options, and asking the
//! API server which of railsweep's pods are left.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};

/// railsweep with `args`, no stdin, output captured.
pub async fn railsweep(args: &[String]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_railsweep"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("railsweep runs")
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

/// The names of the pods railsweep made in `ns` that are not being deleted, sorted.
pub async fn pods_left_in(client: Client, ns: &str) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(client, ns);
    let lp = ListParams::default().labels("app.kubernetes.io/managed-by=railsweep");
    let mut names: Vec<String> = pods
        .list(&lp)
        .await
        .expect("lists")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// railsweep with `args`, which must be refused before any sweep: exit 2 within 25 s (at once,
/// not at the pod timeout), each of `expect` and a "what to do:" on stderr, no railsweep pod
/// left in `ns`, no results file `out`. Its stderr.
pub async fn refused(
    client: Client,
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
    assert!(pods_left_in(client, ns).await.is_empty(), "{stderr}");
    assert!(!out.exists(), "no sweep ran");
    stderr
}
