//! `railsweep fleet --mode hostnetwork --nodes SELECTOR` against the real control plane
//! (`scripts/cluster`): the API server answers the label selector, the scheduler places one
//! pod per node, the node agent runs them on this machine (host network), railsweep runs the
//! fleet through exec with a fake rdmabw and deletes the pods. The nodes are the ones
//! scripts/test starts: fleet-1 ... fleet-4 labelled rail-test=true, fleet-x labelled
//! rail-test=false (it must not join). Ctrl-C, a round past its deadline and a pod that does
//! not start (the scheduler's refusal) leave no pod behind. Each test that creates pods uses
//! a host port of its own: they share the fleet's nodes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::fake::{ended_within, Behave, Fake};
use crate::support::fleet::{rounds, Ran};
use crate::support::kube::railsweep;
use crate::support::process::{self, text};
use crate::support::testcluster::TestCluster;
use results::{read_path, NetworkMode, RailResult, RailStatus};

fn args(kc: &Path, fake: &Fake, out: &Path, extra: &[&str]) -> Vec<String> {
    args_on(kc, fake, out, "rail-test=true", extra)
}

/// `railsweep fleet` over `nodes` (a selector or node names).
fn args_on(kc: &Path, fake: &Fake, out: &Path, nodes: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "fleet",
        "--kubeconfig",
        &kc.display().to_string(),
        "--mode",
        "hostnetwork",
        "--nodes",
        nodes,
        "--rdmabw",
        &fake.path().display().to_string(),
        "--window",
        "1",
        "--pod-timeout",
        "30",
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

fn pod(n: u32) -> String {
    format!("railsweep-t1-hostnetwork-fleet-{n}")
}

/// kubectl's -A: `fleet -A -l SELECTOR` finds the labelled pods of every namespace, names them
/// NAMESPACE/NAME in its rows, and reaches each in its own namespace (exec, describe).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_all_namespaces_measures_labelled_pods_of_each_namespace() {
    let c = TestCluster::get().await;
    let (n1, n2) = (
        c.namespace("all-a", &[]).await,
        c.namespace("all-b", &[]).await,
    );
    let label = ("railbench-test/all-namespaces", n1.as_str());
    c.labelled_pod(&n1, "rdma", "node-a", label).await;
    c.labelled_pod(&n2, "rdma", "node-b", label).await;
    let f = Fake::new(2);
    let out = f.file("fleet");
    let kc = c.kubeconfig.display().to_string();
    let selector = format!("{}={}", label.0, label.1);
    let args: Vec<String> = [
        "fleet",
        "--kubeconfig",
        &kc,
        "-A",
        "-l",
        &selector,
        "--rdmabw",
        &f.path().display().to_string(),
        "--window",
        "1",
        "--no-remeasure",
        "--port",
        "18871",
        "--out-dir",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let r = railsweep(&args).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let rows = read_path(out.join("fleet.csv")).expect("fleet.csv");
    assert!(!rows.is_empty(), "{stderr}");
    let pods: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| [r.client_pod.clone(), r.server_pod.clone()])
        .flatten()
        .collect();
    assert_eq!(
        pods,
        BTreeSet::from([format!("{n1}/rdma"), format!("{n2}/rdma")]),
        "{stderr}"
    );
    // Without -A, the same selector finds nothing in the kubeconfig's namespace: exit 2.
    let without: Vec<String> = args.iter().filter(|a| *a != "-A").cloned().collect();
    let r = railsweep(&without).await;
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
    assert!(
        text(&r.stderr).contains("no running pod in namespace"),
        "{}",
        text(&r.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_over_labelled_nodes_creates_measures_and_deletes() {
    let c = TestCluster::get().await;
    let ns = c.namespace("fleet", &[]).await;
    let f = Fake::new(2);
    f.behave("net1", Behave::Slow);
    // railsweep holds only deploy/rbac.yaml's grants (nodes list among them).
    let kc = c
        .railsweep_kubeconfig_with_nodes(&ns, &f.file("kubeconfig"))
        .await;
    let out = f.file("fleet");
    let r = railsweep(&args(&kc, &f, &out, &[])).await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let want: Vec<String> = (1..=4).map(pod).collect();
    assert!(
        stderr.contains(&format!(
            "creating 4 pods: {} on fleet-1, {} on fleet-2",
            want[0], want[1]
        )),
        "{stderr}"
    );
    assert!(
        stdout.contains("fleet: 4 pods, 6 of 6 pairs measured in 3 rounds"),
        "{stdout}"
    );
    let rows: Vec<RailResult> = read_path(out.join("fleet.csv")).expect("fleet.csv");
    assert_eq!(rows.len(), 12, "{stderr}");
    assert!(rows
        .iter()
        .all(|r| r.status == RailStatus::Ok && r.network_mode == NetworkMode::HostNetwork));
    let pods: BTreeSet<String> = rows
        .iter()
        .flat_map(|r| [r.client_pod.clone(), r.server_pod.clone()])
        .flatten()
        .collect();
    assert_eq!(pods.into_iter().collect::<Vec<_>>(), want);
    for r in &rows {
        // The scheduler put the pod for fleet-N on fleet-N.
        assert_eq!(
            r.client_pod.as_deref().map(|p| p.ends_with(&r.client_node)),
            Some(true),
            "{r:?}"
        );
    }
    // 3 rounds of 2 disjoint pairs, which ran at the same time.
    let ran = rounds(&out);
    assert_eq!(ran.len(), 6);
    let mut by_round: BTreeMap<usize, Vec<&Ran>> = BTreeMap::new();
    for x in &ran {
        assert_eq!((x.attempt.as_str(), x.rows), ("first", 2));
        by_round.entry(x.round).or_default().push(x);
    }
    assert_eq!(by_round.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
    for (round, pairs) in &by_round {
        let busy: BTreeSet<&String> = pairs.iter().flat_map(|p| [&p.client, &p.server]).collect();
        assert_eq!(
            (pairs.len(), busy.len()),
            (2, 4),
            "round {round}: two disjoint pairs"
        );
        let (a, b) = (pairs[0], pairs[1]);
        assert!(
            a.start < b.end && b.start < a.end,
            "round {round}: the pairs overlap: {a:?} {b:?}"
        );
    }
    assert!(stderr.contains("deleted pods"), "{stderr}");
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_lists_the_labelled_nodes() {
    let c = TestCluster::get().await;
    let ns = c.namespace("fleet-dry", &[]).await;
    let f = Fake::new(1);
    let kc = c
        .railsweep_kubeconfig_with_nodes(&ns, &f.file("kubeconfig"))
        .await;
    let out = f.file("fleet");
    let r = railsweep(&args(&kc, &f, &out, &["--dry-run", "-o", "json"])).await;
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let list: serde_json::Value = serde_json::from_slice(&r.stdout).expect("a JSON List");
    let names: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|p| p["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, (1..=4).map(pod).collect::<Vec<_>>());
    assert!(c.pods_left(&ns).await.is_empty());
}

/// A namespace, a kubeconfig in it with deploy/rbac.yaml's grants, and the fleet's out dir.
async fn setup(prefix: &str, f: &Fake) -> (TestCluster, String, PathBuf, PathBuf) {
    let c = TestCluster::get().await;
    let ns = c.namespace(prefix, &[]).await;
    let kc = c
        .railsweep_kubeconfig_with_nodes(&ns, &f.file("kubeconfig"))
        .await;
    (c, ns, kc, f.file("fleet"))
}

fn fleet_rows(out: &Path) -> Vec<RailResult> {
    read_path(out.join("fleet.csv")).expect("fleet.csv")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_pairs_one_runs_one_pair_at_a_time() {
    let f = Fake::new(2);
    f.behave("net1", Behave::Slow);
    let (c, ns, kc, out) = setup("fleet-one", &f).await;
    let r = railsweep(&args_on(
        &kc,
        &f,
        &out,
        "fleet-4,fleet-1,fleet-2,fleet-3",
        &["--max-pairs", "1", "--port", "18801"],
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
    assert_eq!(fleet_rows(&out).len(), 12);
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_the_fleet_keeps_rows_and_deletes_the_pods() {
    let f = Fake::new(2);
    f.behave("net2", Behave::Hang);
    let (c, ns, kc, out) = setup("fleet-int", &f).await;
    let mut child = process::start(&args(&kc, &f, &out, &["--port", "18811"]));
    let t0 = Instant::now();
    while f.pid_in("hang-net2.pid").is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!("rail 1 never started: {}", text(&o.stderr));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        c.pods_left(&ns).await.len(),
        4,
        "the 4 pods run during the fleet"
    );
    let (code, o) = process::interrupt_async(child, Duration::from_secs(30)).await;
    let stderr = text(&o.stderr);
    assert_eq!(code, Some(130), "{stderr}");
    assert!(stderr.contains("deleted pods"), "{stderr}");
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
    // The node agents end what exec started in a deleted pod.
    let hang = f.pid_in("hang-net2.pid").expect("pid");
    assert!(
        ended_within(&[hang], Duration::from_secs(15)).await,
        "the hanging client in the pod ended"
    );
    // What was measured before Ctrl-C is kept: rail 0 of round 1's pairs, nothing after.
    let rows = fleet_rows(&out);
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
    let f = Fake::new(2);
    f.behave("net2", Behave::Hang);
    let (c, ns, kc, out) = setup("fleet-deadline", &f).await;
    let t0 = Instant::now();
    let r = railsweep(&args(
        &kc,
        &f,
        &out,
        &["--round-deadline", "5", "--no-remeasure", "--port", "18821"],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    // 3 rounds of 5 s, pods and clean-up: far under the 600 s of the hanging clients.
    assert!(
        t0.elapsed() < Duration::from_secs(90),
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
    let rows = fleet_rows(&out);
    assert!(
        rows.iter().all(|r| r.rail == 0),
        "rail 1 never measured: {rows:?}"
    );
    assert_eq!(rounds(&out).len(), 6, "every pair was started and stopped");
    assert!(stdout.contains("fleet: 4 pods"), "{stdout}");
    let hang = f.pid_in("hang-net2.pid").expect("pid");
    assert!(
        ended_within(&[hang], Duration::from_secs(15)).await,
        "the hanging client was ended"
    );
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_does_not_start_is_explained_and_left_out() {
    // A pod on fleet-3's host network holds the port: the scheduler cannot place the fleet's.
    let f = Fake::new(2);
    let (c, ns, kc, out) = setup("fleet-port", &f).await;
    let holder = c.namespace("fleet-holder", &[]).await;
    c.pod_with_host_port(&holder, "holder", "fleet-3", 18831, None)
        .await;
    let port = ["--port", "18831"];
    let r = railsweep(&args_on(&kc, &f, &out, "fleet-1,fleet-2,fleet-3", &port)).await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("pod {} on node fleet-3 did not start", pod(3))),
        "{stderr}"
    );
    assert!(
        stderr.contains("already declares host port 18831"),
        "{stderr}"
    );
    assert!(
        stdout.contains("fleet: 2 pods, 1 of 1 pairs measured"),
        "{stdout}"
    );
    assert_eq!(fleet_rows(&out).len(), 2);
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");

    // Only one pod can start: no fleet, exit 2, nothing left behind.
    let out = f.file("fleet2");
    let r = railsweep(&args_on(&kc, &f, &out, "fleet-1,fleet-3", &port)).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("1 of 2 pods started; a fleet needs at least 2"),
        "{stderr}"
    );
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
    assert!(!out.join("fleet.csv").exists());
    c.delete_namespace(&holder).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_of_named_nodes_prints_one_pod_each() {
    let f = Fake::new(1);
    let (c, ns, kc, out) = setup("fleet-dry-names", &f).await;
    let r = railsweep(&args_on(&kc, &f, &out, "a,b", &["--dry-run"])).await;
    let yaml = text(&r.stdout);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert_eq!(yaml.matches("\n---\n").count() + 1, 2, "{yaml}");
    assert!(
        yaml.contains("# railsweep: hostnetwork fleet pod, on node b."),
        "{yaml}"
    );
    assert!(c.pods_left(&ns).await.is_empty());
    assert!(!out.exists());
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
    let hostnetwork = ["fleet", "--mode", "hostnetwork", "--nodes", "a,b"];
    let cases: [(Vec<&str>, &[&str]); 7] = [
        (
            vec!["fleet", "--pods", "p,q", "--pattern", "topology"],
            &["--pattern topology", "give --topology-label KEY"],
        ),
        (
            vec!["fleet", "--pods", "p,q", "--topology-label", "rack"],
            &["--topology-label goes with --pattern topology"],
        ),
        (
            vec![
                "fleet",
                "--runner",
                "local",
                "--pods",
                "p,q",
                "--pattern",
                "topology",
                "--topology-label",
                "rack",
            ],
            &["--pattern topology", "--runner local"],
        ),
        (
            [&hostnetwork[..], &["--pods", "p,q"]].concat(),
            &["--nodes", "--pods"],
        ),
        (
            [&hostnetwork[..], &["--selector", "app=x"]].concat(),
            &["--nodes", "--selector"],
        ),
        (
            vec!["fleet", "--nodes", "a,b"],
            &["--mode hostnetwork, hostnetwork-crio, ipvlan, sriov or dra"],
        ),
        (
            vec!["fleet", "--mode", "pods", "--nodes", "a,b"],
            &["modes: hostnetwork, hostnetwork-crio, ipvlan, sriov or dra"],
        ),
    ];
    for (args, says) in cases {
        let (code, e) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {e}");
        for w in says {
            assert!(e.contains(w), "{args:?}: {w:?} in {e}");
        }
    }
}
