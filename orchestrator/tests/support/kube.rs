//! What the tests against the Kubernetes test API server share: running railsweep, and asking
//! the server which of railsweep's pods are left.
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

/// The names of the pods railsweep made in namespace `lab` that are not being deleted, sorted.
pub async fn pods_left(addr: SocketAddr) -> Vec<String> {
    let mut config = Config::new(format!("http://{addr}").parse().expect("uri"));
    config.default_namespace = "lab".into();
    let pods: Api<Pod> = Api::namespaced(Client::try_from(config).expect("client"), "lab");
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
