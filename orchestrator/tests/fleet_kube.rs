//! `railsweep fleet --mode M --nodes SELECTOR` on the built binary, against the test API
//! server with its simulated cluster (real HTTP and WebSocket, kube-rs's own client): the
//! nodes are listed by label, one pod per node is created and watched until ready, the fleet
//! runs over them with a fake rdmabw, and the pods are deleted, also on Ctrl-C and when a
//! round runs past its deadline. The plain fleet run moved to fleet_cluster.rs, against the
//! real control plane.

#[path = "../examples/kube-testserver/apiserver.rs"]
#[allow(dead_code)]
mod apiserver;
mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apiserver::cluster::{ClusterSpec, NodeSpec};
use results::{read_path, RailResult, RailStatus};
use support::cluster::{kubeconfig, server};
use support::fake::{alive, Behave, Fake};
use support::fleet::rounds;
use support::kube::{pods_left, railsweep};
use support::process::{self, text};

/// A GPU node as in modes_kube.rs, with extra options (labels).
fn node(name: &str, extra: &str) -> NodeSpec {
    NodeSpec::parse(&format!(
        "{name},netns=-,ip=127.0.0.1,cap=nvidia.com/hostdev=16,cap=nvidia.com/gpu=8,\
         taint=nvidia.com/gpu:NoSchedule,ipam=32{extra}"
    ))
    .expect("node spec")
}

/// Four nodes labelled rail-test=true, and one that is not (it must not join the fleet).
fn four_nodes() -> ClusterSpec {
    let mut nodes: Vec<NodeSpec> = (1..=4)
        .map(|i| node(&format!("node-{i}"), ",label=rail-test=true"))
        .collect();
    nodes.insert(2, node("node-x", ",label=rail-test=false"));
    ClusterSpec {
        nodes,
        ..ClusterSpec::default()
    }
}

/// `railsweep fleet --mode hostnetwork --nodes rail-test=true ...` into `out`.
fn args(kc: &str, fake: &Fake, out: &Path, extra: &[&str]) -> Vec<String> {
    args_nodes(kc, fake, out, "rail-test=true", extra)
}

fn args_nodes(kc: &str, fake: &Fake, out: &Path, nodes: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "fleet",
        "--kubeconfig",
        kc,
        "--mode",
        "hostnetwork",
        "--nodes",
        nodes,
        "--rdmabw",
        &fake.path().display().to_string(),
        "-D",
        "1",
        "--tclass",
        "41",
        "--pod-timeout",
        "20",
        "--run-id",
        "t1",
        "--out-dir",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn rows(out: &Path) -> Vec<RailResult> {
    read_path(out.join("fleet.csv")).expect("fleet.csv")
}

fn pod(n: u32) -> String {
    format!("railsweep-t1-hostnetwork-node-{n}")
}

fn out_dir(f: &Fake) -> PathBuf {
    f.file("fleet")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pairs_one_runs_one_pair_at_a_time() {
    let addr = server(four_nodes()).await;
    let f = Fake::new(2);
    f.behave("net1", Behave::Slow);
    let kc = kubeconfig(&f, addr);
    let out = out_dir(&f);
    let r = railsweep(&args_nodes(
        &kc,
        &f,
        &out,
        "node-4,node-1,node-2,node-3",
        &["--max-pairs", "1"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    // Node names: the pods in this order.
    assert!(
        stderr.contains(&format!(
            "4 pods ready: {}, {}, {}, {}",
            pod(4),
            pod(1),
            pod(2),
            pod(3)
        )),
        "{stderr}"
    );
    let mut ran = rounds(&out);
    assert_eq!(ran.len(), 6);
    ran.sort_by(|a, b| a.start.total_cmp(&b.start));
    for w in ran.windows(2) {
        assert!(
            w[1].start >= w[0].end,
            "two pairs at once: {:?} and {:?}",
            w[0],
            w[1]
        );
    }
    assert_eq!(rows(&out).len(), 12);
    assert!(pods_left(addr).await.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_the_fleet_keeps_rows_and_deletes_the_pods() {
    let addr = server(four_nodes()).await;
    let f = Fake::new(2);
    f.behave("net2", Behave::Hang);
    let kc = kubeconfig(&f, addr);
    let out = out_dir(&f);
    let mut child = process::start(&args(&kc, &f, &out, &[]));
    let t0 = Instant::now();
    while f.pid_in("hang-net2.pid").is_none() {
        if t0.elapsed() > Duration::from_secs(40) {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!("rail 1 never started: {}", text(&o.stderr));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        pods_left(addr).await.len(),
        4,
        "the 4 pods run during the fleet"
    );
    let (code, o) = process::interrupt_async(child, Duration::from_secs(30)).await;
    let stderr = text(&o.stderr);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("deleted pods"), "{stderr}");
    assert!(pods_left(addr).await.is_empty(), "{stderr}");
    let hang = f.pid_in("hang-net2.pid").expect("pid");
    assert!(!alive(hang), "the hanging client in the pod ended");
    // What was measured before Ctrl-C is kept: rail 0 of round 1's pairs, nothing after.
    let rows = rows(&out);
    assert!(
        !rows.is_empty(),
        "rows measured before Ctrl-C are kept: {stderr}"
    );
    assert!(
        rows.iter()
            .all(|r| r.rail == 0 && r.status == RailStatus::Ok),
        "{rows:?}"
    );
    let ran = rounds(&out);
    assert!(
        ran.iter().all(|x| x.round == 1),
        "no round after Ctrl-C: {ran:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_round_past_its_deadline_is_stopped_and_reported() {
    let addr = server(four_nodes()).await;
    let f = Fake::new(2);
    f.behave("net2", Behave::Hang);
    let kc = kubeconfig(&f, addr);
    let out = out_dir(&f);
    let t0 = Instant::now();
    let r = railsweep(&args(
        &kc,
        &f,
        &out,
        &["--round-deadline", "5", "--no-remeasure"],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    // 3 rounds of 5 s, pods and clean-up: far under the 600 s of the hanging clients.
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "took {:?}: {stderr}",
        t0.elapsed()
    );
    assert_eq!(
        stderr
            .matches("rail(s) [1] not measured (round deadline)")
            .count(),
        6,
        "{stderr}"
    );
    let rows = rows(&out);
    assert!(
        rows.iter().all(|r| r.rail == 0),
        "rail 1 never measured: {rows:?}"
    );
    assert_eq!(rounds(&out).len(), 6, "every pair was started and stopped");
    assert!(stdout.contains("fleet: 4 pods"), "{stdout}");
    let hang = f.pid_in("hang-net2.pid").expect("pid");
    assert!(!alive(hang), "the hanging client was ended");
    assert!(pods_left(addr).await.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_does_not_start_is_explained_and_left_out() {
    // node-3's host port 18515 is taken: its hostnetwork pod cannot be scheduled.
    let spec = ClusterSpec {
        nodes: vec![
            node("node-1", ",label=rail-test=true"),
            node("node-2", ",label=rail-test=true"),
            node("node-3", ",label=rail-test=true,port=18515"),
        ],
        ..ClusterSpec::default()
    };
    let addr = server(spec).await;
    let f = Fake::new(2);
    let kc = kubeconfig(&f, addr);
    let out = out_dir(&f);
    let r = railsweep(&args(&kc, &f, &out, &[])).await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("pod {} on node node-3 did not start", pod(3))),
        "{stderr}"
    );
    assert!(
        stderr.contains("already declares host port 18515"),
        "{stderr}"
    );
    assert!(
        stdout.contains("fleet: 2 pods, 1 of 1 pairs measured"),
        "{stdout}"
    );
    assert_eq!(rows(&out).len(), 2);
    assert!(pods_left(addr).await.is_empty(), "{stderr}");

    // Only one pod can start on one node: no fleet, exit 2, nothing left behind.
    let spec = ClusterSpec {
        nodes: vec![
            node("node-1", ",label=rail-test=true"),
            node("node-3", ",label=rail-test=true,port=18515"),
        ],
        ..ClusterSpec::default()
    };
    let addr = server(spec).await;
    let out = f.file("fleet2");
    let r = railsweep(&args(&kc_for(&f, addr), &f, &out, &[])).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("1 of 2 pods started; a fleet needs at least 2"),
        "{stderr}"
    );
    assert!(pods_left(addr).await.is_empty(), "{stderr}");
    assert!(!out.join("fleet.csv").exists());
}

fn kc_for(f: &Fake, addr: SocketAddr) -> String {
    let kc = f.file("kubeconfig2");
    std::fs::write(
        &kc,
        apiserver::kubeconfig(&format!("http://{addr}"), "lab", None),
    )
    .expect("writes");
    kc.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_lists_the_nodes_and_prints_the_pods() {
    let addr = server(four_nodes()).await;
    let f = Fake::new(1);
    let kc = kubeconfig(&f, addr);
    let out = out_dir(&f);
    let r = railsweep(&args(&kc, &f, &out, &["--dry-run", "-o", "json"])).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let list: serde_json::Value = serde_json::from_slice(&r.stdout).expect("a JSON List");
    assert_eq!(list["kind"], "List");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, (1..=4).map(pod).collect::<Vec<_>>());
    assert_eq!(
        list["items"][0]["spec"]["nodeSelector"]["kubernetes.io/hostname"],
        "node-1"
    );
    assert!(
        pods_left(addr).await.is_empty(),
        "a dry run creates nothing"
    );
    assert!(!out.exists());

    let r = railsweep(&args_nodes(&kc, &f, &out, "a,b", &["--dry-run"])).await;
    let yaml = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert_eq!(yaml.matches("\n---\n").count() + 1, 2, "{yaml}");
    assert!(
        yaml.contains("# railsweep: hostnetwork fleet pod, on node b."),
        "{yaml}"
    );
}

#[test]
fn nodes_usage_errors_name_the_flags() {
    let run = |a: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_railsweep"))
            .args(a)
            .stdin(Stdio::null())
            .output()
            .expect("runs");
        (o.status.code(), text(&o.stderr))
    };
    let (code, e) = run(&[
        "fleet",
        "--mode",
        "hostnetwork",
        "--nodes",
        "a,b",
        "--pods",
        "p,q",
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(e.contains("--nodes") && e.contains("--pods"), "{e}");
    let (code, e) = run(&[
        "fleet",
        "--mode",
        "hostnetwork",
        "--nodes",
        "a,b",
        "--pods-selector",
        "app=x",
    ]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("--nodes") && e.contains("--pods-selector"),
        "{e}"
    );
    let (code, e) = run(&["fleet", "--nodes", "a,b"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("--mode hostnetwork, hostnetwork-crio, ipvlan or sriov"),
        "{e}"
    );
    let (code, e) = run(&["fleet", "--mode", "pods", "--nodes", "a,b"]);
    assert_eq!(code, Some(2), "{e}");
    assert!(
        e.contains("modes: hostnetwork, hostnetwork-crio, ipvlan, sriov"),
        "{e}"
    );
}
