//! `railsweep run --mode M` against the real control plane (`scripts/cluster`): the failures a
//! user meets before any pod starts come from the real components, in their own words, and
//! must come back as explanations a user can act on, with no pod left behind. The scheduler
//! refuses for resources, host ports, node names and taints; Pod Security admission and the
//! RuntimeClass admission refuse at create; the node agent reports an image pull failure in
//! the kubelet's words (no registry exists here). The nodes are the ones scripts/test starts:
//! node-a and node-b, each with 112 nvidia.com/hostdev, 8 nvidia.com/gpu, 8 VFs per rail
//! resource, the nvidia.com/gpu:NoSchedule taint, and registry.invalid/rdma:1 failing to pull.

use crate::support::fake::Fake;
use crate::support::kube::{railsweep, refused, sweep_args, MODE_OPTIONS};
use crate::support::process::text;
use crate::support::testcluster::TestCluster;

/// railsweep's arguments for a run of `mode` between `nodes` with kubeconfig `kc`; its CSV
/// goes to `out`.
fn run_args(
    kc: &std::path::Path,
    f: &Fake,
    out: &std::path::Path,
    nodes: &str,
    mode: &str,
    extra: &[&str],
) -> Vec<String> {
    let extra: Vec<&str> = ["--mode", mode]
        .iter()
        .chain(&MODE_OPTIONS)
        .chain(extra)
        .copied()
        .collect();
    sweep_args("run", kc, f, out, nodes, &extra)
}

/// Run one mode that must not start, in a new namespace with `ns_labels`: exit 2, the
/// explanation in words, no pod left behind, no sweep.
async fn must_not_start(
    ns_labels: &[(&str, &str)],
    nodes: &str,
    mode: &str,
    extra: &[&str],
    expect: &[&str],
) -> String {
    let c = TestCluster::get().await;
    let ns = c.namespace(&format!("refuse-{mode}"), ns_labels).await;
    let f = Fake::new(1);
    // railsweep runs with only what deploy/rbac.yaml grants.
    let kc = c
        .railsweep_kubeconfig(&ns, None, &f.file("kubeconfig"))
        .await;
    let out = f.file("x.csv");
    let a = run_args(&kc, &f, &out, nodes, mode, extra);
    refused(&c, &ns, &a, &out, expect).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_resources_are_explained_from_the_scheduler() {
    must_not_start(
        &[],
        "node-a,node-b",
        "ipvlan",
        &["--rdma-resource", "ipvlan:nvidia.com/hostdev=128"],
        &[
            "Insufficient nvidia.com/hostdev",
            "not enough free nvidia.com/hostdev (the pod asks for 128)",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_used_host_port_is_explained_from_the_scheduler() {
    // Another pod on node-b's host network already declares the port.
    let c = TestCluster::get().await;
    let holder = c.namespace("port-holder", &[]).await;
    c.pod_with_host_port(&holder, "holder", "node-b", 18515, None)
        .await;
    must_not_start(
        &[],
        "node-a,node-b",
        "hostnetwork",
        &[],
        &[
            "didn't have free ports for the requested pod ports",
            "already declares host port 18515",
            "another --port",
        ],
    )
    .await;
    c.delete_namespace(&holder).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_node_and_a_taint_are_explained_from_the_scheduler() {
    must_not_start(
        &[],
        "node-a,node-c",
        "sriov",
        &[],
        &["no node is named node-c"],
    )
    .await;
    must_not_start(
        &[],
        "node-a,node-b",
        "hostnetwork",
        &["--no-gpu-toleration"],
        &[
            "untolerated taint {nvidia.com/gpu: }",
            "--toleration nvidia.com/gpu",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_pull_failure_is_explained_from_the_node() {
    // hostNetwork: the pull comes after the sandbox, and an SR-IOV pod here would need its
    // networks first (modes_run.rs). Its own port: tests share the nodes.
    must_not_start(
        &[],
        "node-a,node-b",
        "hostnetwork",
        &["--image", "registry.invalid/rdma:1", "--port", "18601"],
        &[
            "the image cannot be pulled",
            "registry.invalid/rdma:1",
            "--image-pull-secret NAME",
        ],
    )
    .await;
}

const BASELINE: [(&str, &str); 1] = [("pod-security.kubernetes.io/enforce", "baseline")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_security_admission_names_the_level_each_mode_needs() {
    must_not_start(
        &BASELINE,
        "node-a,node-b",
        "hostnetwork",
        &[],
        &[
            "violates PodSecurity \"baseline:latest\"",
            "host namespaces (hostNetwork=true)",
            "this pod needs privileged",
            "pod-security.kubernetes.io/enforce=privileged",
        ],
    )
    .await;
    must_not_start(
        &BASELINE,
        "node-a,node-b",
        "ipvlan",
        &[],
        &[
            "must not include \"IPC_LOCK\"",
            "--no-ipc-lock",
            "passes baseline",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_runtime_class_is_explained_from_the_api_server() {
    must_not_start(
        &[],
        "node-a,node-b",
        "hostnetwork-crio",
        &["--runtime-class", "runc-nohostdev-absent"],
        &[
            "RuntimeClass \"runc-nohostdev-absent\" not found",
            "--runtime-class",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_grant_names_the_verb_and_the_resource() {
    // deploy/rbac.yaml's Role without its pods rule: the API server's RBAC refuses the create.
    let c = TestCluster::get().await;
    let ns = c.namespace("no-grant", &[]).await;
    let f = Fake::new(1);
    let kc = c
        .railsweep_kubeconfig(&ns, Some("pods"), &f.file("kubeconfig"))
        .await;
    let out = f.file("x.csv");
    let r = railsweep(&run_args(&kc, &f, &out, "node-a,node-b", "sriov", &[])).await;
    let stderr = text(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot create resource \"pods\""),
        "the refusal names the verb and the resource: {stderr}"
    );
    assert!(stderr.contains("deploy/rbac.yaml"), "and the fix: {stderr}");
    assert!(c.pods_left(&ns).await.is_empty(), "{stderr}");
}
