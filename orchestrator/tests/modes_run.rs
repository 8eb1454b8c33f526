//! `railsweep run --mode M --nodes A,B` and `railsweep compare` on the built binary, against
//! kube-testserver's simulated cluster (the cases a real component can produce moved to
//! modes_cluster.rs, against the real control plane; these wait for the node agent's CNI step) (real HTTP and WebSocket, kube-rs's own
//! client): pods are created, watched until ready, swept with a fake rdmabw, and deleted; the
//! failures of the field reports are served as pod status and events and must come back as
//! explanations a user can act on; Ctrl-C deletes what railsweep created.

#[path = "../examples/kube-testserver/apiserver.rs"]
#[allow(dead_code)]
mod apiserver;
mod support;

use std::path::Path;

use std::time::{Duration, Instant};

use apiserver::cluster::{ClusterSpec, NodeSpec};
use results::{read_path, NetworkMode, RailStatus};
use support::cluster::{kubeconfig, server};
use support::fake::{alive, Behave, Fake};
use support::kube::{pods_left, railsweep, MODE_OPTIONS};
use support::process::{self, text};

/// Two GPU nodes like the field reports': 16 rail PFs, 8 GPUs, the GPU taint, an IP pool of
/// 32 addresses, and one SR-IOV VF resource per rail (2 rails here).
fn gpu_node(name: &str, extra: &str) -> NodeSpec {
    NodeSpec::parse(&format!(
        "{name},netns=-,ip=127.0.0.1,cap=nvidia.com/hostdev=16,cap=nvidia.com/gpu=8,\
         cap=nvidia.com/sriov_rdma_rail0=8,cap=nvidia.com/sriov_rdma_rail1=8,\
         taint=nvidia.com/gpu:NoSchedule,ipam=32{extra}"
    ))
    .expect("node spec")
}

fn cluster(extra_b: &str) -> ClusterSpec {
    ClusterSpec {
        nodes: vec![gpu_node("node-a", ""), gpu_node("node-b", extra_b)],
        ..ClusterSpec::default()
    }
}

fn args(cmd: &str, kc: &str, fake: &Fake, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        cmd,
        "--kubeconfig",
        kc,
        "--nodes",
        "node-a,node-b",
        "--rdmabw",
        &fake.path().display().to_string(),
        "-D",
        "1",
        "--tclass",
        "41",
        "-o",
        &out.display().to_string(),
        "--quiet",
        "--pod-timeout",
        "20",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(MODE_OPTIONS.iter().map(|s| s.to_string()));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_creates_waits_sweeps_and_deletes() {
    let addr = server(cluster("")).await;
    let f = Fake::new(2);
    let kc = kubeconfig(&f, addr);
    let out = f.file("ipvlan.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        &["--mode", "ipvlan", "--run-id", "t1"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("creating client pod railsweep-t1-ipvlan-client on node-a, server pod railsweep-t1-ipvlan-server on node-b"), "{stderr}");
    assert!(stderr.contains("pods ready"), "{stderr}");
    assert!(
        stderr.contains("deleted pods railsweep-t1-ipvlan-client, railsweep-t1-ipvlan-server"),
        "{stderr}"
    );
    let rows = read_path(&out).expect("rows");
    assert_eq!(rows.len(), 2);
    assert!(rows
        .iter()
        .all(|r| r.status == RailStatus::Ok && r.network_mode == NetworkMode::Ipvlan));
    // Rail 1 of the fake is net2 on mlx5_1; railsweep names the device (-d), not the interface.
    assert!(
        f.client_log().contains("-d mlx5_1 "),
        "the clients ran in the created client pod"
    );
    assert_eq!(
        rows[0].client_pod.as_deref(),
        Some("railsweep-t1-ipvlan-client")
    );
    assert_eq!(
        (rows[0].client_node.as_str(), rows[0].server_node.as_str()),
        ("node-a", "node-b")
    );
    assert!(pods_left(addr).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_pods_keeps_them() {
    let addr = server(cluster("")).await;
    let f = Fake::new(1);
    let kc = kubeconfig(&f, addr);
    let out = f.file("keep.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        &["--mode", "hostnetwork", "--run-id", "k", "--keep-pods"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("keeping pods") && stderr.contains("kubectl delete pods -n lab"),
        "{stderr}"
    );
    let mut left = pods_left(addr).await;
    left.sort();
    assert_eq!(
        left,
        [
            "railsweep-k-hostnetwork-client",
            "railsweep-k-hostnetwork-server"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_runs_every_mode_into_one_file() {
    let addr = server(cluster("")).await;
    let f = Fake::new(2);
    let kc = kubeconfig(&f, addr);
    let out = f.file("cmp.csv");
    let r = railsweep(&args(
        "compare",
        &kc,
        &f,
        &out,
        &["--modes", "hostnetwork,hostnetwork-crio,ipvlan,sriov"],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let rows = read_path(&out).expect("one file with every mode");
    let mut modes: Vec<String> = rows.iter().map(|r| r.network_mode.to_string()).collect();
    modes.dedup();
    assert_eq!(
        modes,
        ["hostnetwork", "hostnetwork-crio", "ipvlan", "sriov"]
    );
    assert_eq!(rows.len(), 8);
    for m in ["hostnetwork", "hostnetwork-crio", "ipvlan", "sriov"] {
        assert!(
            stdout.contains(m),
            "the markdown comparison names {m}:\n{stdout}"
        );
    }
    let svg = std::fs::read_to_string(f.file("cmp.svg")).expect("chart");
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..40.min(svg.len())]
    );
    // Each mode's table as it is measured, then the comparison, which is also in FILE.md.
    let md = std::fs::read_to_string(f.file("cmp.md")).expect("markdown");
    assert!(
        md.contains("| rail | hostnetwork | hostnetwork-crio | ipvlan | sriov |"),
        "{md}"
    );
    assert!(stdout.ends_with(&md), "{stdout}");
    assert_eq!(stderr.matches("deleted pods").count(), 4, "{stderr}");
    assert!(pods_left(addr).await.is_empty());
}

/// Run one mode that must not start: exit 2, the explanation in words, no pod left behind.
async fn must_not_start(spec: ClusterSpec, mode: &str, extra: &[&str], expect: &[&str]) -> String {
    let addr = server(spec).await;
    let f = Fake::new(1);
    let kc = kubeconfig(&f, addr);
    let out = f.file("x.csv");
    let mut a = vec!["--mode", mode];
    a.extend_from_slice(extra);
    let t0 = Instant::now();
    let r = railsweep(&args("run", &kc, &f, &out, &a)).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "explained at once, not at the timeout: {stderr}"
    );
    for e in expect {
        assert!(stderr.contains(e), "expected {e:?} in:\n{stderr}");
    }
    assert!(stderr.contains("what to do:"), "{stderr}");
    assert!(pods_left(addr).await.is_empty(), "{stderr}");
    assert!(!out.exists(), "no sweep ran");
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_affinity_error_is_explained() {
    // 4 GPUs (2 of 4 NUMA nodes) with 16 PFs (all 4): the IPvlan report's refused job.
    must_not_start(
        cluster(",numa=4"),
        "ipvlan",
        &["--resource", "nvidia.com/gpu=4"],
        &[
            "TopologyAffinityError",
            "Resources cannot be allocated with Topology locality",
            "NUMA",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipam_exhaustion_is_explained() {
    // A pool of 8 addresses on node B: 16 rail networks do not fit.
    let spec = ClusterSpec {
        nodes: vec![gpu_node("node-a", ""), {
            let mut b = gpu_node("node-b", "");
            b.ipam = Some(8);
            b
        }],
        ..ClusterSpec::default()
    };
    must_not_start(
        spec,
        "ipvlan",
        &[],
        &[
            "no free addresses in the pool \"rdma-ipvlan-pool\"",
            "the IP pool rdma-ipvlan-pool has no free address on node node-b",
            "perNodeBlockSize",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipvlan_without_ipc_lock_passes_baseline() {
    // The refusals of Pod Security admission come from the real API server
    // (modes_cluster.rs); that IPvlan without IPC_LOCK then runs needs the CNI step, which
    // only this simulated cluster has so far.
    let addr = server(ClusterSpec {
        pod_security: Some("baseline".into()),
        ..cluster("")
    })
    .await;
    let f = Fake::new(1);
    let kc = kubeconfig(&f, addr);
    let out = f.file("ok.csv");
    let r = railsweep(&args(
        "run",
        &kc,
        &f,
        &out,
        &["--mode", "ipvlan", "--no-ipc-lock"],
    ))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_the_sweep_deletes_the_pods() {
    let addr = server(cluster("")).await;
    let f = Fake::new(2);
    f.behave("net2", Behave::Hang);
    let kc = kubeconfig(&f, addr);
    let out = f.file("int.csv");
    let child = process::start(&args("run", &kc, &f, &out, &["--mode", "sriov"]));
    let t0 = Instant::now();
    while f.pid_in("hang-net2.pid").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "rail 1 never started"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        pods_left(addr).await.len(),
        2,
        "both pods run during the sweep"
    );
    let code = process::interrupt_async(child, Duration::from_secs(20)).await;
    let stderr = text(&code.1.stderr);
    assert_eq!(code.0, Some(130), "{stderr}");
    assert!(stderr.contains("deleted pods"), "{stderr}");
    let (hang, daemon) = (
        f.pid_in("hang-net2.pid").expect("pid"),
        f.pid_in("server.pid").expect("pid"),
    );
    assert!(
        !alive(hang) && !alive(daemon),
        "the client and the daemon in the pods ended"
    );
    assert!(pods_left(addr).await.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_the_pods_start_deletes_them() {
    // Slow steps: the pods stay Pending long enough to be interrupted.
    let spec = ClusterSpec {
        step: Duration::from_secs(30),
        ..cluster("")
    };
    let addr = server(spec).await;
    let f = Fake::new(1);
    let kc = kubeconfig(&f, addr);
    let out = f.file("int.csv");
    let mut child = process::start(&args("run", &kc, &f, &out, &["--mode", "hostnetwork"]));
    let t0 = Instant::now();
    while pods_left(addr).await.len() < 2 {
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!("pods never created: {}", text(&o.stderr));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, o) = process::interrupt_async(child, Duration::from_secs(20)).await;
    let stderr = text(&o.stderr);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted while the pods were starting")
            && stderr.contains("deleted pods"),
        "{stderr}"
    );
    assert!(pods_left(addr).await.is_empty(), "{stderr}");
}
