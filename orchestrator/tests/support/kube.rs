//! What the Kubernetes tests share: running railsweep, the modes' options, and asking the
//! API server (kube-testserver or the real one) which of railsweep's pods are left.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::{Output, Stdio};

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client, Config};

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

/// The names of the pods railsweep made in namespace `lab` of the test API server at `addr`
/// that are not being deleted, sorted.
pub async fn pods_left(addr: SocketAddr) -> Vec<String> {
    let mut config = Config::new(format!("http://{addr}").parse().expect("uri"));
    config.default_namespace = "lab".into();
    pods_left_in(Client::try_from(config).expect("client"), "lab").await
}

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
