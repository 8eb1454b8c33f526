//! The test API server with a simulated cluster, and a kubeconfig that points railsweep at it.
#![allow(dead_code)]

use std::net::SocketAddr;

use super::fake::Fake;
use crate::apiserver::{
    self,
    cluster::{Cluster, ClusterSpec},
};

/// Starts the API server for namespace `lab` on a free local port, serving `spec`'s cluster.
pub async fn server(spec: ClusterSpec) -> SocketAddr {
    let api = apiserver::ApiServer {
        namespace: "lab".into(),
        pods: vec![],
        token: None,
        verbose: false,
    };
    let cluster = Cluster::new(spec, "lab", false);
    apiserver::start_with(api, Some(cluster), SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("binds")
}

/// A kubeconfig file in `f`'s folder for the server at `addr`, namespace `lab`: its path.
pub fn kubeconfig(f: &Fake, addr: SocketAddr) -> String {
    let kc = f.file("kubeconfig");
    std::fs::write(
        &kc,
        apiserver::kubeconfig(&format!("http://{addr}"), "lab", None),
    )
    .expect("writes");
    kc.display().to_string()
}
