//! `railsweep fleet --mode hostnetwork --nodes SELECTOR` against the real control plane
//! (`scripts/cluster`): the API server answers the label selector, the scheduler places one
//! pod per node, the node agent runs them on this machine (host network), railsweep runs the
//! fleet through exec with a fake rdmabw and deletes the pods. The nodes are the ones
//! scripts/test starts: fleet-1 ... fleet-4 labelled rail-test=true, fleet-x labelled
//! rail-test=false (it must not join). The other fleet cases still meet kube-testserver
//! (fleet_kube.rs).

/// The shared helpers these tests use (not `support::cluster`, which is kube-testserver's).
mod support {
    pub mod fake;
    pub mod fleet;
    pub mod kube;
    pub mod process;
    pub mod testcluster;
}

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use results::{read_path, NetworkMode, RailResult, RailStatus};
use support::fake::{Behave, Fake};
use support::fleet::{rounds, Ran};
use support::kube::{pods_left_in, railsweep};
use support::process::text;
use support::testcluster::TestCluster;

fn args(kc: &Path, fake: &Fake, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "fleet",
        "--kubeconfig",
        &kc.display().to_string(),
        "--mode",
        "hostnetwork",
        "--nodes",
        "rail-test=true",
        "--rdmabw",
        &fake.path().display().to_string(),
        "-D",
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
    assert!(
        pods_left_in(c.client.clone(), &ns).await.is_empty(),
        "{stderr}"
    );
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
    assert!(pods_left_in(c.client.clone(), &ns).await.is_empty());
}
