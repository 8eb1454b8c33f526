//! kube-testserver: a test Kubernetes API server for railsweep's Kubernetes runner, where no
//! real cluster exists (the Soft-RoCE lab, CI). It serves pods (list, get) whose commands run
//! in network namespaces of this machine, and pod exec over WebSocket (see `apiserver.rs`).
//!
//! Usage: kube-testserver [--listen ADDR] [--namespace NS] [--token T] [--kubeconfig-out FILE]
//!                        [--verbose] POD...
//!   POD: NAME[,netns=NS|-][,node=NODE][,ip=IP][,hostnet][,container=NAME]
//!        (netns defaults to NAME; `-` runs commands on this machine without entering one)
//!
//! Prints `listening on http://ADDR` on stdout once it accepts connections, writes a
//! kubeconfig for it if asked, and serves until killed.
#![forbid(unsafe_code)]

mod apiserver;

use std::net::SocketAddr;
use std::process::ExitCode;

use apiserver::{ApiServer, TestPod};

fn usage() -> ExitCode {
    eprintln!(
        "usage: kube-testserver [--listen ADDR] [--namespace NS] [--token T] [--kubeconfig-out FILE] [--verbose] \
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
    let addr = match apiserver::start(server, listen).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kube-testserver: cannot listen on {listen}: {e}");
            return ExitCode::from(2);
        }
    };
    let url = format!("http://{addr}");
    if let Some(path) = kubeconfig_out {
        if let Err(e) = std::fs::write(&path, apiserver::kubeconfig(&url, &namespace, token.as_deref())) {
            eprintln!("kube-testserver: cannot write {path}: {e}");
            return ExitCode::from(2);
        }
    }
    println!("listening on {url}");
    std::future::pending::<()>().await;
    ExitCode::SUCCESS
}
