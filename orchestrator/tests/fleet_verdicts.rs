//! `railsweep fleet --apply-verdicts` against the real control plane (`scripts/cluster`): the
//! verdict written onto the nodes through the API server, with exactly the grants of
//! deploy/fleet-job.yaml (its Role and ClusterRole, bound to a service account whose token
//! railsweep holds), and once with the in-cluster configuration that the CronJob uses. The
//! nodes are fleet-1 ... fleet-6 of scripts/test (their pods run on this machine with the
//! fake rdmabw, which tells the nodes apart: `Fake::per_node`). The tests change the nodes'
//! labels and taints, so they run one at a time and each starts by clearing railsweep's keys.
//! Other binaries' fleets use the same nodes, and the exec count is the API server's whole
//! count: scripts/test runs this binary alone.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;

use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use k8s_openapi::api::resource::v1::{DeviceTaintRule, ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use support::fake::{Behave, Fake};
use support::kube::railsweep;
use support::process::text;
use support::testcluster::{shipped, TestCluster};

const NODES: [&str; 6] = [
    "fleet-1", "fleet-2", "fleet-3", "fleet-4", "fleet-5", "fleet-6",
];
const LABEL: &str = "railbench.io/rails";
const CHECKED: &str = "railbench.io/rails-checked";
const EVIDENCE: &str = "railbench.io/rails-evidence";
const TAINT: &str = "railbench.io/bad-rails";

/// The tests share the nodes' labels and taints: one at a time.
static NODES_LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `railsweep fleet` over `nodes` with the fake, 1 s per rail, on host port `port`.
fn args(kc: &Path, f: &Fake, out: &Path, nodes: &[&str], port: u16, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec![
        "fleet".into(),
        "--kubeconfig".into(),
        kc.display().to_string(),
    ];
    v.extend(common(f, out, nodes, port));
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn common(f: &Fake, out: &Path, nodes: &[&str], port: u16) -> Vec<String> {
    [
        "--mode",
        "hostnetwork",
        "--nodes",
        &nodes.join(","),
        "--rdmabw",
        &f.path().display().to_string(),
        "--window",
        "1",
        "--pod-timeout",
        "30",
        "--port",
        &port.to_string(),
        "--out-dir",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// A fake with 2 rails whose nodes are told apart.
fn fake() -> Fake {
    let f = Fake::new(2);
    f.per_node(&NODES, 2);
    f
}

/// A node's labels, annotations and taints.
struct NodeState {
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    taints: Vec<Taint>,
}

impl NodeState {
    fn verdict(&self) -> Option<&str> {
        self.labels.get(LABEL).map(String::as_str)
    }

    fn railsweep_taint(&self) -> Option<&Taint> {
        self.taints.iter().find(|t| t.key == TAINT)
    }
}

async fn state(c: &TestCluster, node: &str) -> NodeState {
    let n = Api::<Node>::all(c.client.clone())
        .get(node)
        .await
        .unwrap_or_else(|e| panic!("gets node {node}: {e} (scripts/test starts fleet-1..6)"));
    NodeState {
        labels: n.metadata.labels.unwrap_or_default(),
        annotations: n.metadata.annotations.unwrap_or_default(),
        taints: n.spec.and_then(|s| s.taints).unwrap_or_default(),
    }
}

/// Remove railsweep's labels, annotation and taint from every test node, railsweep's
/// DeviceTaintRules and the test's ResourceSlices (as the admin).
async fn clear(c: &TestCluster) {
    Api::<DeviceTaintRule>::all(c.client.clone())
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app.kubernetes.io/managed-by=railsweep"),
        )
        .await
        .expect("deletes railsweep's DeviceTaintRules");
    Api::<ResourceSlice>::all(c.client.clone())
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&format!("{SLICE_LABEL}=true")),
        )
        .await
        .expect("deletes the test's ResourceSlices");
    let api = Api::<Node>::all(c.client.clone());
    for node in NODES {
        let s = state(c, node).await;
        let taints: Vec<&Taint> = s.taints.iter().filter(|t| t.key != TAINT).collect();
        let patch = json!({
            "metadata": {
                "labels": { LABEL: null, CHECKED: null },
                "annotations": { EVIDENCE: null },
            },
            "spec": { "taints": taints },
        });
        api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("clears node {node}: {e}"));
    }
}

/// The DRA driver of the test's ResourceSlices: a name of its own, so that no other test's
/// DeviceClass selects its devices.
const DRIVER: &str = "taints.railbench.test";
/// The label of the test's ResourceSlices.
const SLICE_LABEL: &str = "railbench.test/taints";

/// A ResourceSlice for each of `nodes` with one device per rail of the fake, as a DRA network
/// driver publishes them: devices `rail0` and `rail1`, whose attribute `ifName` (unqualified:
/// the driver's domain) names the interfaces net1 and net2.
async fn publish_rail_devices(c: &TestCluster, nodes: &[&str]) {
    let api = Api::<ResourceSlice>::all(c.client.clone());
    for node in nodes {
        let slice: ResourceSlice = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": { "name": format!("railbench-test-{node}"), "labels": { SLICE_LABEL: "true" } },
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": { "name": node, "generation": 1, "resourceSliceCount": 1 },
                "devices": [
                    { "name": "rail0", "attributes": { "ifName": { "string": "net1" } } },
                    { "name": "rail1", "attributes": { "ifName": { "string": "net2" } } },
                ],
            },
        }))
        .expect("a ResourceSlice");
        api.create(&PostParams::default(), &slice)
            .await
            .unwrap_or_else(|e| panic!("creates the ResourceSlice of {node}: {e}"));
    }
}

/// railsweep's DeviceTaintRules (those labelled as its own).
async fn railsweeps_rules(c: &TestCluster) -> Vec<DeviceTaintRule> {
    Api::<DeviceTaintRule>::all(c.client.clone())
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=railsweep"))
        .await
        .expect("lists DeviceTaintRules")
        .items
}

/// A claim for the test driver's device on interface `iface`, and a pod on `node` that holds
/// it (tolerating the nodes' GPU taint, not railsweep's device taint).
async fn claim_and_pod(c: &TestCluster, ns: &str, name: &str, node: &str, iface: &str) {
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": { "name": name },
        "spec": { "devices": { "requests": [{
            "name": "rail",
            "exactly": {
                "deviceClassName": DRIVER,
                "selectors": [{ "cel": {
                    "expression": format!("device.attributes[\"{DRIVER}\"].ifName == \"{iface}\"")
                } }],
            },
        }] } },
    }))
    .expect("a ResourceClaim");
    Api::<ResourceClaim>::namespaced(c.client.clone(), ns)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap_or_else(|e| panic!("creates claim {name}: {e}"));
    pod_with_claim(c, ns, name, name, node).await;
}

/// Pod `name` on `node` holding claim `claim`.
async fn pod_with_claim(c: &TestCluster, ns: &str, name: &str, claim: &str, node: &str) {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "nodeSelector": { "kubernetes.io/hostname": node },
            "tolerations": [{ "key": "nvidia.com/gpu", "operator": "Exists" }],
            "automountServiceAccountToken": false,
            "resourceClaims": [{ "name": "rail", "resourceClaimName": claim }],
            "containers": [{
                "name": "c", "image": "debian:trixie-slim", "command": ["sleep", "infinity"],
                "resources": { "claims": [{ "name": "rail" }] },
            }],
        },
    }))
    .expect("a Pod");
    Api::<Pod>::namespaced(c.client.clone(), ns)
        .create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("creates pod {name}: {e}"));
}

/// The device allocated to claim `name`, if any.
async fn allocated(c: &TestCluster, ns: &str, name: &str) -> Option<String> {
    let claim = Api::<ResourceClaim>::namespaced(c.client.clone(), ns)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("gets claim {name}: {e}"));
    claim
        .status?
        .allocation?
        .devices?
        .results?
        .first()
        .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
}

/// The scheduler's PodScheduled condition of pod `name`: (status, reason, message).
async fn scheduled(c: &TestCluster, ns: &str, name: &str) -> Option<(String, String, String)> {
    let pod = Api::<Pod>::namespaced(c.client.clone(), ns)
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("gets pod {name}: {e}"));
    pod.status?
        .conditions?
        .into_iter()
        .find(|k| k.type_ == "PodScheduled")
        .map(|k| {
            (
                k.status,
                k.reason.unwrap_or_default(),
                k.message.unwrap_or_default(),
            )
        })
}

fn today() -> String {
    let o = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .expect("date");
    text(&o.stdout).trim().to_string()
}

/// The pod exec requests the API server has served so far (apiserver_request_total of the
/// subresource exec, summed over its labels), read from its /metrics as the admin.
async fn exec_requests(c: &TestCluster) -> u64 {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = c.client.request_text(req).await.expect("reads /metrics");
    let n: f64 = text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{") && l.contains("subresource=\"exec\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let n = n as u64;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_makes_two_exec_requests_per_pair_and_one_per_pod() {
    // One at a time with the other fleets here, so that the count is this fleet's alone.
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    let ns = c.namespace("fleet-execs", &[]).await;
    let f = fake();
    let kc = f.file("kubeconfig");
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let out = f.file("run");
    let before = exec_requests(&c).await;
    let r = railsweep(&args(&kc, &f, &out, &NODES, 18856, &[])).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    let pairs = std::fs::read_to_string(out.join("rounds.tsv"))
        .expect("rounds.tsv")
        .lines()
        .count()
        - 1;
    assert_eq!(pairs, 15, "6 nodes, every pair once: {stderr}");
    // Per pod: `rdmabw rails` once for the whole fleet. Per pair: the server daemon and the
    // client's batch; no `rails` again, no `kill`. (The API server counts a request when it
    // ends: wait until the count stops moving.)
    let want = 2 * pairs as u64 + NODES.len() as u64;
    let mut got = exec_requests(&c).await - before;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let now = exec_requests(&c).await - before;
        if now == got && now >= want {
            break;
        }
        got = now;
    }
    assert_eq!(
        got,
        want,
        "exec requests for {pairs} pairs of {} pods: {stderr}",
        NODES.len()
    );
    // Every daemon ended at the end of its input: the close of the exec's stdin went through
    // the API server and the node agent to the process.
    assert_eq!(
        f.read("server-end").lines().filter(|l| *l == "eof").count(),
        pairs,
        "{stderr}"
    );
    assert!(!stderr.contains("did not stop"), "{stderr}");
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_rail_is_labelled_and_tainted_and_untainted_once_fixed() {
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    clear(&c).await;
    let ns = c.namespace("verdicts", &[]).await;
    let f = fake();
    f.behave_on("fleet-6", "net2", Behave::Fail);
    let kc = f.file("kubeconfig");
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let out = f.file("run1");
    // 1 of 6 is 16.7 %: over the default --max-taint-pct 10, under 20.
    let r = railsweep(&args(
        &kc,
        &f,
        &out,
        &NODES,
        18851,
        &["--apply-verdicts", "taints", "--max-taint-pct", "20"],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(1), "a failed rail: {stderr}");
    assert!(
        stdout.contains("suspect: node railsweep-"),
        "the culprit logic named it: {stdout}"
    );
    assert!(
        stderr.contains(
            "verdicts: labelled 6 node(s) railbench.io/rails: 5 ok, 0 degraded, 1 failed"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "verdict: node fleet-6 failed: rail 1 failed (0.000 Gb/s, 0 % of the fleet median)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("verdicts: tainted fleet-6 with railbench.io/bad-rails:NoSchedule"),
        "{stderr}"
    );
    let date = today();
    let bad = state(&c, "fleet-6").await;
    assert_eq!(bad.verdict(), Some("failed"));
    assert_eq!(bad.labels.get(CHECKED), Some(&date));
    let doc: Value = serde_json::from_str(
        bad.annotations
            .get(EVIDENCE)
            .expect("the evidence annotation"),
    )
    .expect("JSON");
    assert_eq!(doc["verdict"], "failed");
    assert_eq!(doc["bad_rails"][0]["rail"], 1);
    assert_eq!(doc["bad_rails"][0]["verdict"], "failed");
    assert_eq!(doc["bad_rails"][0]["pairs"], 5);
    assert_eq!(doc["bad_rails"][0]["failed_pairs"], 5);
    assert_eq!(doc["bad_rails"][0]["median_gbps"], 0.0);
    // The fake's rail 1 runs at 96.1 Gb/s.
    assert_eq!(doc["bad_rails"][0]["fleet_median_gbps"], 96.1);
    assert_eq!(doc["bad_rails"][0]["pct_of_fleet_median"], 0.0);
    let t = bad.railsweep_taint().expect("railsweep's taint on fleet-6");
    assert_eq!(
        (t.value.as_deref(), t.effect.as_str()),
        (Some("1"), "NoSchedule")
    );
    assert!(
        bad.taints.iter().any(|t| t.key == "nvidia.com/gpu"),
        "the node's own taint is kept: {:?}",
        bad.taints
    );
    for node in &NODES[..5] {
        let s = state(&c, node).await;
        assert_eq!(s.verdict(), Some("ok"), "{node}");
        assert_eq!(s.labels.get(CHECKED), Some(&date), "{node}");
        assert!(!s.annotations.contains_key(EVIDENCE), "{node}");
        assert!(s.railsweep_taint().is_none(), "{node}: {:?}", s.taints);
    }
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");

    // The rail is fixed: the next run measures fleet-6 (its pod tolerates railsweep's taint)
    // and takes the taint off.
    std::fs::remove_file(f.file("behave-fleet-6-net2")).expect("fixes the rail");
    let out = f.file("run2");
    let r = railsweep(&args(
        &kc,
        &f,
        &out,
        &NODES,
        18852,
        &["--apply-verdicts", "labels", "--untaint-passed"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("verdicts: removed railbench.io/bad-rails from fleet-6 (they pass now)"),
        "{stderr}"
    );
    let fixed = state(&c, "fleet-6").await;
    assert_eq!(fixed.verdict(), Some("ok"));
    assert!(fixed.railsweep_taint().is_none(), "{:?}", fixed.taints);
    assert!(!fixed.annotations.contains_key(EVIDENCE));
    assert!(
        fixed.taints.iter().any(|t| t.key == "nvidia.com/gpu"),
        "{:?}",
        fixed.taints
    );
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_bad_nodes_of_six_trip_the_breaker_and_nothing_is_tainted() {
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    clear(&c).await;
    let ns = c.namespace("verdicts-breaker", &[]).await;
    let f = fake();
    for node in ["fleet-2", "fleet-4", "fleet-5"] {
        f.behave_on(node, "net2", Behave::Fail);
    }
    let kc = f.file("kubeconfig");
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let r = railsweep(&args(
        &kc,
        &f,
        &f.file("run"),
        &NODES,
        18853,
        &["--apply-verdicts", "taints", "--max-taint-pct", "10"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "not tainting: 3 of 6 measured nodes (50.0 %) have bad rails, more than --max-taint-pct 10"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("point at the fabric"), "{stderr}");
    assert!(!stderr.contains("verdicts: tainted"), "{stderr}");
    for node in NODES {
        let s = state(&c, node).await;
        let want = if ["fleet-2", "fleet-4", "fleet-5"].contains(&node) {
            "failed"
        } else {
            "ok"
        };
        assert_eq!(s.verdict(), Some(want), "{node}");
        assert!(s.railsweep_taint().is_none(), "{node}: {:?}", s.taints);
    }
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_prints_the_patches_and_writes_nothing() {
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    clear(&c).await;
    let ns = c.namespace("verdicts-dry", &[]).await;
    let f = fake();
    f.behave_on("fleet-3", "net1", Behave::Fail);
    let kc = f.file("kubeconfig");
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let nodes = ["fleet-1", "fleet-2", "fleet-3", "fleet-4"];
    let r = railsweep(&args(
        &kc,
        &f,
        &f.file("run"),
        &nodes,
        18854,
        &[
            "--apply-verdicts",
            "taints",
            "--max-taint-pct",
            "25",
            "--dry-run",
        ],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    let patches: BTreeMap<String, Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            (
                v["node"].as_str().expect("node").to_string(),
                v["patch"].clone(),
            )
        })
        .collect();
    assert_eq!(patches.keys().collect::<Vec<_>>(), nodes, "{stdout}");
    let bad = &patches["fleet-3"];
    assert_eq!(bad["metadata"]["labels"][LABEL], "failed");
    assert!(bad["metadata"]["resourceVersion"].is_string(), "{bad}");
    let taints = bad["spec"]["taints"].as_array().expect("taints");
    assert!(
        taints
            .iter()
            .any(|t| t["key"] == TAINT && t["value"] == "0"),
        "{bad}"
    );
    assert!(taints.iter().any(|t| t["key"] == "nvidia.com/gpu"), "{bad}");
    assert_eq!(patches["fleet-1"]["metadata"]["labels"][LABEL], "ok");
    assert!(stderr.contains("verdicts: would taint fleet-3"), "{stderr}");
    for node in nodes {
        let s = state(&c, node).await;
        assert_eq!(s.verdict(), None, "{node}: nothing written");
        assert!(s.railsweep_taint().is_none(), "{node}");
    }
    c.delete_namespace(&ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_slow_to_answer_is_a_latency_suspect_and_degraded() {
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    clear(&c).await;
    let ns = c.namespace("verdicts-lat", &[]).await;
    let f = fake();
    // Every bandwidth fine, every p99 4 us but fleet-2's rail 1 (net2): 40 us in its pairs,
    // ten times the fleet median (4 of the 10 pairs of 5 nodes).
    f.lat_p99(Some("fleet-2"), "net2", 40.0);
    let kc = f.file("kubeconfig");
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let nodes = ["fleet-1", "fleet-2", "fleet-3", "fleet-4", "fleet-5"];
    let r = railsweep(&args(
        &kc,
        &f,
        &f.file("run"),
        &nodes,
        18857,
        &[
            "--test",
            "bw,lat",
            "--apply-verdicts",
            "labels",
            "--dry-run",
        ],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    assert_eq!(r.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("suspect: node ")
            && stdout.contains("rail 1: slow in all 4")
            && stdout.contains("latency: p99 40.00 us"),
        "{stdout}"
    );
    // Measured again, then against a node that passed: the suspect stays the only one.
    assert_eq!(stdout.matches("suspect: ").count(), 1, "{stdout}");
    let patch = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .find(|v| v["node"] == "fleet-2")
        .expect("a patch for fleet-2");
    assert_eq!(patch["patch"]["metadata"]["labels"][LABEL], "degraded");
    let evidence = patch["patch"]["metadata"]["annotations"][EVIDENCE]
        .as_str()
        .expect("evidence");
    assert!(
        evidence.contains("latency_pairs") && evidence.contains("fleet_lat_p99_us"),
        "{evidence}"
    );
    c.delete_namespace(&ns).await;
}

/// The CronJob's own command line from deploy/fleet-job.yaml, with this test's nodes,
/// namespace, results directory `out` (the CronJob's volume: its metrics file moves there, and
/// the test runs railsweep in it, as the CronJob's workingDir) and fake.
fn cronjob_command(ns: &str, f: &Fake, out: &Path, nodes: &[&str], port: u16) -> Vec<String> {
    let cj: Value = shipped("fleet-job.yaml", "CronJob");
    let cmd: Vec<String> = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
        ["command"]
        .as_array()
        .expect("the CronJob's command")
        .iter()
        .map(|v| v.as_str().expect("a string").to_string())
        .collect();
    assert_eq!(&cmd[..2], ["railsweep", "fleet"]);
    let working_dir =
        &cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["workingDir"];
    assert_eq!(
        working_dir, "/results",
        "the results volume is the CronJob's workingDir"
    );
    let mut v = Vec::new();
    let mut it = cmd[1..].iter();
    while let Some(a) = it.next() {
        let replace = match a.as_str() {
            "--nodes" => Some(nodes.join(",")),
            "--namespace" => Some(ns.to_string()),
            "--out-dir" => Some(out.display().to_string()),
            "--metrics" => Some(out.join("fleet.prom").display().to_string()),
            "--window" => Some("1".into()),
            _ => None,
        };
        v.push(a.clone());
        if let Some(r) = replace {
            it.next();
            v.push(r);
        }
    }
    assert!(
        v.windows(2)
            .any(|w| w[0] == "--apply-verdicts" && w[1] == "labels"),
        "{v:?}"
    );
    v.extend([
        "--rdmabw".into(),
        f.path().display().to_string(),
        "--pod-timeout".into(),
        "30".into(),
        "--port".into(),
        port.to_string(),
    ]);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cronjobs_command_works_with_the_in_cluster_service_account() {
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    clear(&c).await;
    let ns = c.namespace("verdicts-incluster", &[]).await;
    let f = fake();
    f.behave_on("fleet-2", "net2", Behave::Fail);
    let token = c
        .fleet_job_kubeconfig(&ns, &f.file("unused-kubeconfig"))
        .await;
    let (host, port, ca_b64) = c.server();
    let sa = f.file("sa");
    std::fs::create_dir_all(&sa).expect("mkdir");
    std::fs::write(sa.join("token"), &token).expect("writes");
    std::fs::write(sa.join("namespace"), &ns).expect("writes");
    std::fs::write(sa.join("ca.b64"), &ca_b64).expect("writes");
    let home = f.file("home");
    std::fs::create_dir_all(&home).expect("mkdir");
    let nodes = [
        "fleet-1", "fleet-2", "fleet-3", "fleet-4", "fleet-5", "fleet-6",
    ];
    let out = f.file("run");
    std::fs::create_dir_all(&out).expect("mkdir");
    let argv = cronjob_command(&ns, &f, &out, &nodes, 18855);
    // A pod's view: the service account's files where kube-rs (and client-go) look for them,
    // on a tmpfs over /run in a mount namespace of its own (this machine's /run untouched),
    // KUBERNETES_SERVICE_HOST/PORT set, and no kubeconfig anywhere.
    let script = r#"set -e
mount -t tmpfs railsweep-test /run
d=/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$d"
cp "$SA/token" "$SA/namespace" "$d/"
base64 -d "$SA/ca.b64" >"$d/ca.crt"
exec "$RAILSWEEP" "$@""#;
    let o = tokio::process::Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .args(&argv)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("SA", &sa)
        .env("RAILSWEEP", env!("CARGO_BIN_EXE_railsweep"))
        .env("KUBERNETES_SERVICE_HOST", &host)
        .env("KUBERNETES_SERVICE_PORT", &port)
        .current_dir(&out)
        .stdin(Stdio::null())
        .output()
        .await
        .expect("unshare runs");
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "a failed rail: {stderr}");
    assert!(
        stderr.contains(&format!("railsweep: cluster in-cluster, namespace {ns}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "verdicts: labelled 6 node(s) railbench.io/rails: 5 ok, 0 degraded, 1 failed"
        ),
        "{stderr}"
    );
    for node in nodes {
        let s = state(&c, node).await;
        let want = if node == "fleet-2" { "failed" } else { "ok" };
        assert_eq!(s.verdict(), Some(want), "{node}");
        assert!(s.railsweep_taint().is_none(), "labels only: {node}");
    }
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
    // Its files where the CronJob keeps them: the run's directory and the metrics.
    let prom = std::fs::read_to_string(out.join("fleet.prom")).expect("the metrics file");
    assert!(prom.contains("railbench_rail_bandwidth_gbps"), "{prom}");
    let runs: Vec<_> = std::fs::read_dir(&out)
        .expect("out")
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("railsweep-fleet-")
        })
        .collect();
    assert_eq!(runs.len(), 1, "one run directory in the results volume");
    assert!(runs[0].path().join("fleet.csv").exists());
    c.delete_namespace(&ns).await;
}

/// The rack label of the topology test (railbench.test/: no other test reads it).
const RACK: &str = "railbench.test/rack";

/// Set (`Some`) or remove (`None`) the rack label of each node, as the admin.
async fn set_racks(c: &TestCluster, racks: &[(&str, Option<&str>)]) {
    let api = Api::<Node>::all(c.client.clone());
    for (node, rack) in racks {
        let patch = json!({ "metadata": { "labels": { RACK: rack } } });
        api.patch(node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap_or_else(|e| panic!("labels node {node}: {e}"));
    }
}

/// The node of a pod railsweep created (`railsweep-RUN-hostnetwork-NODE`).
fn node_of(pod: &str) -> String {
    pod.rsplit_once("-hostnetwork-")
        .map(|(_, n)| n.to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_racks_bad_uplink_names_the_rack_and_marks_none_of_its_nodes() {
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    clear(&c).await;
    // Racks a and b of two nodes each; fleet-5 and fleet-6 have no rack label and form the
    // group railbench.test/rack=(none).
    let racks = [
        ("fleet-1", Some("a")),
        ("fleet-2", Some("a")),
        ("fleet-3", Some("b")),
        ("fleet-4", Some("b")),
        ("fleet-5", None),
        ("fleet-6", None),
    ];
    set_racks(&c, &racks).await;
    let ns = c.namespace("verdicts-topology", &[]).await;
    let f = fake();
    // Rack b's uplink on rail 1: every pair between b and another group at 40 Gb/s, the pairs
    // inside b and among the others at the fake's 96.1.
    let in_b = |n: &str| ["fleet-3", "fleet-4"].contains(&n);
    for (x, _) in racks {
        for (y, _) in racks {
            if x < y && in_b(x) != in_b(y) {
                f.report_between(x, y, "net2", 40.0);
            }
        }
    }
    let kc = f.file("kubeconfig");
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let out = f.file("run");
    let (json, prom) = (f.file("fleet.json"), f.file("railbench.prom"));
    // Against the line rate: with three groups, b's cross pairs are most of the rail's pairs,
    // and the fleet median would be theirs.
    let r = railsweep(&args(
        &kc,
        &f,
        &out,
        &NODES,
        18857,
        &[
            "--pattern",
            "topology",
            "--topology-label",
            RACK,
            "--out_json_file",
            &json.display().to_string(),
            "--metrics",
            &prom.display().to_string(),
            "--min-line-rate-pct",
            "80",
            "--apply-verdicts",
            "taints",
            "--max-taint-pct",
            "50",
        ],
    ))
    .await;
    let (stdout, stderr) = (text(&r.stdout), text(&r.stderr));
    set_racks(&c, &racks.map(|(n, _)| (n, None))).await;
    assert_eq!(r.status.code(), Some(1), "slow pairs: {stdout}{stderr}");
    assert!(
        stderr.contains("pattern topology:8:")
            && stderr.contains(&format!(
                "label {RACK}: 3 group(s) of 2 pod(s), 2 pod(s) on nodes without the label grouped as {RACK}=(none)"
            )),
        "{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "suspect: group {RACK}=b: cross-group pairs slow on rail 1 (all "
        )) && stdout.contains("suspect its uplink"),
        "{stdout}"
    );
    assert!(!stdout.contains("suspect: node"), "{stdout}");
    assert!(
        !stdout.contains("outlier:"),
        "every slow pair explained: {stdout}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("suspect:")).count(),
        1,
        "{stdout}"
    );
    assert!(
        stderr.contains(
            "verdicts: labelled 6 node(s) railbench.io/rails: 6 ok, 0 degraded, 0 failed"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "verdicts: group {RACK}=b is the suspect on rail 1 (its uplink): its nodes are not marked for it"
        )),
        "{stderr}"
    );
    // The machine output names the rack too: the JSON document's group_culprits and the
    // metrics' railbench_group_* gauges (fleet.prom and --metrics alike).
    let doc = results::read_json(
        &std::fs::read_to_string(&json).expect("the --json file"),
        "fleet.json",
    )
    .expect("reads");
    assert_eq!(doc.group_culprits.len(), 1, "{:?}", doc.group_culprits);
    let g = &doc.group_culprits[0];
    assert_eq!(
        (g.label.as_str(), g.value.as_str(), g.rail, g.every_group),
        (RACK, "b", 1, false)
    );
    assert!(
        g.cross_median_gbps < 50.0 && g.inside_median_gbps > 90.0,
        "{g:?}"
    );
    let metrics = std::fs::read_to_string(&prom).expect("the --metrics file");
    assert_eq!(
        std::fs::read_to_string(out.join("fleet.prom")).expect("fleet.prom"),
        metrics
    );
    let suspect: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("railbench_group_suspect{"))
        .collect();
    assert_eq!(
        suspect,
        [format!(
            "railbench_group_suspect{{topology_label=\"{RACK}\",group=\"b\",rail=\"1\"}} 1.0"
        )],
        "{metrics}"
    );
    // Inside and across: the rack's own pair and pairs of each of its nodes with others.
    let ran: Vec<(String, String)> = support::fleet::rounds(&out)
        .iter()
        .map(|p| (node_of(&p.client), node_of(&p.server)))
        .collect();
    let b_inside = ran.iter().any(|(c, s)| in_b(c) && in_b(s));
    let b_cross: Vec<&(String, String)> = ran.iter().filter(|(c, s)| in_b(c) != in_b(s)).collect();
    assert!(b_inside && b_cross.len() >= 4, "{stderr}");
    // The culprit counts each cross pair once, however often the random cross rounds met it
    // (the seed comes from the clock: 4 rounds of 2 cross pairs for b meet 2 to 8 pairs).
    let b_cross_pairs: std::collections::BTreeSet<(&String, &String)> = b_cross
        .iter()
        .map(|(c, s)| if c < s { (c, s) } else { (s, c) })
        .collect();
    assert_eq!(
        g.cross_pairs,
        b_cross_pairs.len() as u64,
        "{b_cross_pairs:?}"
    );
    assert!(g.cross_pairs >= 2, "{b_cross_pairs:?}");
    for (node, _) in racks {
        let s = state(&c, node).await;
        assert_eq!(s.verdict(), Some("ok"), "{node}");
        assert!(s.railsweep_taint().is_none(), "{node}: {:?}", s.taints);
    }
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
    c.delete_namespace(&ns).await;
}

/// Issue 54, item 3: a bad rail that DRA manages is tainted on its device, not on its node.
/// fleet-6's rail 1 (net2, device rail1 of its ResourceSlice) runs at 40 Gb/s: railsweep
/// writes exactly one DeviceTaintRule, for that device, and leaves the node untainted; the
/// real scheduler then allocates fleet-6's rail 0 to a claim and keeps rail 1 from another,
/// for the rule's taint alone. Fixed and measured again with --untaint-passed, the rule goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_dra_rail_gets_a_device_taint_rule_and_its_node_no_taint() {
    let _one = NODES_LOCK.lock().await;
    let c = TestCluster::get().await;
    clear(&c).await;
    c.device_class(DRIVER, DRIVER).await;
    publish_rail_devices(&c, &NODES).await;
    let ns = c.namespace("verdicts-dra", &[]).await;
    let f = fake();
    f.report_on("fleet-6", "net2", 40.0);
    let kc = f.file("kubeconfig");
    c.fleet_job_kubeconfig(&ns, &kc).await;
    let r = railsweep(&args(
        &kc,
        &f,
        &f.file("run1"),
        &NODES,
        18858,
        &["--apply-verdicts", "taints", "--max-taint-pct", "20"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "a slow rail: {stderr}");
    assert!(
        stderr.contains("verdict: node fleet-6 degraded: rail 1 degraded (40.000 Gb/s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("verdicts: wrote DeviceTaintRule railbench-fleet-6-rail1 (railbench.io/bad-rail:NoSchedule"),
        "{stderr}"
    );
    assert!(!stderr.contains("verdicts: tainted"), "{stderr}");
    let rules = railsweeps_rules(&c).await;
    assert_eq!(rules.len(), 1, "exactly one rule: {stderr}");
    let rule = serde_json::to_value(&rules[0]).expect("JSON");
    assert_eq!(rule["metadata"]["name"], "railbench-fleet-6-rail1");
    assert_eq!(rule["metadata"]["labels"]["railbench.io/node"], "fleet-6");
    assert_eq!(rule["metadata"]["labels"]["railbench.io/rail"], "1");
    assert_eq!(
        rule["spec"]["deviceSelector"],
        json!({ "driver": DRIVER, "pool": "fleet-6", "device": "rail1" })
    );
    assert_eq!(rule["spec"]["taint"]["key"], "railbench.io/bad-rail");
    assert_eq!(rule["spec"]["taint"]["value"], "degraded");
    assert_eq!(rule["spec"]["taint"]["effect"], "NoSchedule");
    let evidence: Value = serde_json::from_str(
        rule["metadata"]["annotations"]["railbench.io/rail-evidence"]
            .as_str()
            .expect("the evidence annotation"),
    )
    .expect("JSON");
    assert_eq!(evidence["interface"], "net2");
    assert_eq!(evidence["median_gbps"], 40.0);
    assert_eq!(evidence["fleet_median_gbps"], 96.1);
    // The per-rail verdict: each slow pair on rail 1 blames fleet-6's rail (its partners are fine),
    // in the evidence and in the fleet's rows, and no other row has a verdict.
    assert_eq!(evidence["layers"], json!(["path"]));
    let rows = results::read_path(f.file("run1").join("fleet.csv")).expect("the fleet's rows");
    let mut blamed = 0;
    for r in &rows {
        let with_6 = r.client_node == "fleet-6" || r.server_node == "fleet-6";
        if with_6 && r.rail == 1 {
            assert_eq!(r.layer, Some(results::Layer::Path), "{r:?}");
            assert!(
                r.evidence.as_deref().is_some_and(
                    |e| e.starts_with("node fleet-6 is slow on rail 1 with every partner")
                ),
                "{:?}",
                r.evidence
            );
            blamed += 1;
        } else {
            assert_eq!(r.layer, None, "{r:?}");
        }
    }
    assert!(blamed >= 5, "fleet-6's five pairs on rail 1: {blamed}");
    // And `railsweep report` of the fleet's rows shows them in its Verdicts table.
    let fleet_csv = f.file("run1").join("fleet.csv");
    let report = railsweep(&["report".to_string(), fleet_csv.display().to_string()]).await;
    let md = text(&report.stdout);
    let lines: Vec<&str> = md
        .lines()
        .filter(|l| l.contains(" | path | node fleet-6 is slow on rail 1 with every partner ("))
        .collect();
    // The latest row of each of fleet-6's five pairs on rail 1 (re-measured rows are older).
    assert_eq!(lines.len(), 5, "{md}");
    println!("the fleet's Verdicts table, first line: {}", lines[0]);
    let bad = state(&c, "fleet-6").await;
    assert_eq!(bad.verdict(), Some("degraded"));
    assert!(
        bad.railsweep_taint().is_none(),
        "the node is not tainted for a DRA rail: {:?}",
        bad.taints
    );

    // The scheduler: a claim for fleet-6's rail 0 is allocated, one for its rail 1 is not.
    claim_and_pod(&c, &ns, "rail0", "fleet-6", "net1").await;
    claim_and_pod(&c, &ns, "rail1", "fleet-6", "net2").await;
    let mut seen = (None, None);
    for _ in 0..100 {
        seen = (
            allocated(&c, &ns, "rail0").await,
            scheduled(&c, &ns, "rail1").await,
        );
        if seen.0.is_some() && seen.1.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        seen.0.as_deref(),
        Some(format!("{DRIVER}/fleet-6/rail0").as_str()),
        "rail 0 allocated"
    );
    let (status, reason, message) = seen.1.expect("the scheduler's condition on pod rail1");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "Unschedulable"),
        "{message}"
    );
    eprintln!("the scheduler on pod rail1: {message}");
    assert!(message.contains("cannot allocate all claims"), "{message}");
    assert_eq!(allocated(&c, &ns, "rail1").await, None);

    // Fixed: measured again with --untaint-passed, the rule is removed.
    std::fs::remove_file(f.file("report-fleet-6-net2.json")).expect("fixes the rail");
    let r = railsweep(&args(
        &kc,
        &f,
        &f.file("run2"),
        &NODES,
        18859,
        &["--apply-verdicts", "taints", "--untaint-passed"],
    ))
    .await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "verdicts: removed DeviceTaintRule railbench-fleet-6-rail1 (the rail passes now)"
        ),
        "{stderr}"
    );
    assert!(railsweeps_rules(&c).await.is_empty(), "{stderr}");
    assert_eq!(state(&c, "fleet-6").await.verdict(), Some("ok"));
    // The taint was all that kept rail 1 from its claim: a pod holding it now is scheduled
    // with it (a new pod: the one left unschedulable waits for the scheduler's next retry).
    Api::<Pod>::namespaced(c.client.clone(), &ns)
        .delete("rail1", &DeleteParams::default().grace_period(0))
        .await
        .expect("deletes pod rail1");
    pod_with_claim(&c, &ns, "rail1-again", "rail1", "fleet-6").await;
    let mut got = None;
    for _ in 0..100 {
        got = allocated(&c, &ns, "rail1").await;
        if got.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert_eq!(
        got.as_deref(),
        Some(format!("{DRIVER}/fleet-6/rail1").as_str()),
        "rail 1 allocated once its rule is gone"
    );
    c.delete_namespace(&ns).await;
    clear(&c).await;
}
