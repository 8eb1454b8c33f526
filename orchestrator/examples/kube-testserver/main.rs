//! kube-testserver: a test Kubernetes API server for railsweep's Kubernetes runner, where no
//! real cluster exists (the Soft-RoCE lab, CI). It serves pods (list, get) whose commands run
//! in network namespaces of this machine, and pod exec over WebSocket (see `apiserver.rs`).
//!
//! Usage: kube-testserver [--listen ADDR] [--namespace NS] [--token T] [--kubeconfig-out FILE]
//!                        [--verbose] POD...
//!   POD: NAME[,netns=NS|-][,node=NODE][,ip=IP][,hostnet][,container=NAME]
//!        (netns defaults to NAME; `-` runs commands on this machine without entering one)
//!
//! Simulated cluster (pods that railsweep creates; see `cluster.rs`):
//!   --node NAME[,netns=NS|-][,ip=IP][,cap=RES=N][,taint=K[=V]:EFFECT][,numa=K][,ipam=N][,port=P]
//!              [,label=K[=V]][,cordoned]
//!                          a node (listed by GET /api/v1/nodes, with label selectors); created
//!                          pods pinned to it run their commands in its netns
//!   --pod-security LEVEL   the namespace enforces baseline or restricted
//!   --runtime-class NAME   a RuntimeClass that exists (repeatable; default runc-nohostdev)
//!   --pull-fails IMAGE     an image that cannot be pulled (repeatable)
//!   --step-ms N            time between the steps of a pod's start (default 40)
//!
//! Prints `listening on http://ADDR` on stdout once it accepts connections, writes a
//! kubeconfig for it if asked, and serves until killed.
#![forbid(unsafe_code)]

mod apiserver;

use std::net::SocketAddr;
use std::process::ExitCode;

use apiserver::cluster::{Cluster, ClusterSpec, NodeSpec};
use apiserver::{ApiServer, TestPod};

fn usage() -> ExitCode {
    eprintln!(
        "usage: kube-testserver [--listen ADDR] [--namespace NS] [--token T] [--kubeconfig-out FILE] [--verbose] \
         [--node SPEC]... [--pod-security LEVEL] [--runtime-class NAME]... [--pull-fails IMAGE]... [--step-ms N] \
         NAME[,netns=NS|-][,node=NODE][,ip=IP][,hostnet][,container=NAME]..."
    );
    ExitCode::from(2)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let mut listen: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut server = ApiServer {
        namespace: "default".into(),
        pods: vec![],
        token: None,
        verbose: false,
    };
    let mut kubeconfig_out = None;
    let mut cluster = ClusterSpec::default();
    let mut runtime_classes = vec![];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--listen" => match args.next().and_then(|v| v.parse().ok()) {
                Some(v) => listen = v,
                None => return usage(),
            },
            "--namespace" => match args.next() {
                Some(v) => server.namespace = v,
                None => return usage(),
            },
            "--token" => server.token = args.next(),
            "--kubeconfig-out" => kubeconfig_out = args.next(),
            "--verbose" => server.verbose = true,
            "--node" => match args.next().map(|v| NodeSpec::parse(&v)) {
                Some(Ok(n)) => cluster.nodes.push(n),
                Some(Err(e)) => {
                    eprintln!("kube-testserver: {e}");
                    return usage();
                }
                None => return usage(),
            },
            "--pod-security" => match args.next() {
                Some(v) if v == "baseline" || v == "restricted" => cluster.pod_security = Some(v),
                _ => return usage(),
            },
            "--runtime-class" => match args.next() {
                Some(v) => runtime_classes.push(v),
                None => return usage(),
            },
            "--pull-fails" => match args.next() {
                Some(v) => cluster.pull_fails.push(v),
                None => return usage(),
            },
            "--step-ms" => match args.next().and_then(|v| v.parse().ok()) {
                Some(ms) => cluster.step = std::time::Duration::from_millis(ms),
                None => return usage(),
            },
            "-h" | "--help" => {
                let _ = usage();
                return ExitCode::SUCCESS;
            }
            s if s.starts_with('-') => return usage(),
            spec => match TestPod::parse(spec) {
                Ok(p) => server.pods.push(p),
                Err(e) => {
                    eprintln!("kube-testserver: {e}");
                    return usage();
                }
            },
        }
    }
    let (namespace, token) = (server.namespace.clone(), server.token.clone());
    if !runtime_classes.is_empty() {
        cluster.runtime_classes = runtime_classes;
    }
    let cluster =
        (!cluster.nodes.is_empty()).then(|| Cluster::new(cluster, &namespace, server.verbose));
    let started = match cluster {
        Some(c) => apiserver::start_with(server, Some(c), listen).await,
        None => apiserver::start(server, listen).await,
    };
    let addr = match started {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kube-testserver: cannot listen on {listen}: {e}");
            return ExitCode::from(2);
        }
    };
    let url = format!("http://{addr}");
    if let Some(path) = kubeconfig_out {
        if let Err(e) = std::fs::write(
            &path,
            apiserver::kubeconfig(&url, &namespace, token.as_deref()),
        ) {
            eprintln!("kube-testserver: cannot write {path}: {e}");
            return ExitCode::from(2);
        }
    }
    println!("listening on {url}");
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
