use super::*;
use crate::modes::{pod_pair, Attachment, Placement, PodOptions, ResourceSpec};
use kube::core::Status;
use serde_json::json;

fn pair(mode: Mode, ipc_lock: bool) -> crate::modes::PodPair {
    let opts = PodOptions {
        ipc_lock,
        uverbs: (0..18).collect(),
        resources: ResourceSpec::parse_many("nvidia.com/gpu=4").expect("ok"),
        ipvlan: Attachment {
            networks: crate::modes::pattern::expand_pattern("rdma-ipvlan-{0..15}").expect("ok"),
            resources: ResourceSpec::parse_many("nvidia.com/hostdev=16").expect("ok"),
        },
        sriov: Attachment {
            networks: vec!["rdma-net".into()],
            resources: ResourceSpec::parse_many("openshift.io/mlxrdma=1").expect("ok"),
        },
        namespace: "rdma-hostnet".into(),
        ..PodOptions::default()
    };
    let place = Placement {
        run: "r1".into(),
        client_node: Some("10.140.66.66".into()),
        server_node: Some("10.140.82.106".into()),
    };
    pod_pair(mode, &opts, &place).expect("builds")
}

fn with_status(mut pod: Pod, status: serde_json::Value) -> Pod {
    pod.status = Some(serde_json::from_value(status).expect("status"));
    pod
}

fn event(reason: &str, type_: &str, message: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": { "name": "e" },
        "involvedObject": { "kind": "Pod", "name": "p" },
        "reason": reason, "type": type_, "message": message,
    }))
    .expect("event")
}

/// The diagnosis of `pod` with one warning event.
fn explained_by(pod: &Pod, reason: &str, message: &str) -> Diagnosis {
    explain_pod(pod, &[event(reason, "Warning", message)]).expect("explained")
}

/// The diagnosis of `pod`, pending, that the scheduler could not place, in `message`'s words.
fn scheduling_failed(pod: Pod, message: &str) -> Diagnosis {
    explained_by(
        &with_status(pod, json!({ "phase": "Pending" })),
        "FailedScheduling",
        message,
    )
}

/// The diagnosis of `pod` whose sandbox the kubelet could not create, in `message`'s words.
fn sandbox_failed(pod: &Pod, message: &str) -> Diagnosis {
    explained_by(pod, "FailedCreatePodSandBox", message)
}

// The field report's scheduler message (two hostNetwork jobs on port 2222, GPU nodes full).
const PORTS_AND_GPUS: &str =
    "0/5 nodes are available: 2 node(s) didn't have free ports for the requested \
                                  pod ports, 3 Insufficient nvidia.com/gpu.";

#[test]
fn unschedulable_for_ports_and_gpus() {
    let p = pair(Mode::HostNetwork, true).server;
    let pod = with_status(
        p,
        json!({ "phase": "Pending", "conditions": [{ "type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "message": PORTS_AND_GPUS }] }),
    );
    let d = explain_pod(&pod, &[]).expect("explained");
    assert_eq!(d.problem, Problem::Unschedulable);
    assert!(d.what.contains(PORTS_AND_GPUS), "{d}");
    assert!(
        d.todo.contains("host port 18515") && d.todo.contains("--port"),
        "{d}"
    );
    assert!(
        d.todo
            .contains("not enough free nvidia.com/gpu (the pod asks for 4)"),
        "{d}"
    );
    assert!(d.todo.contains("10.140.82.106"), "{d}");
}

#[test]
fn a_host_port_alone_is_waited_for_and_any_other_reason_is_not() {
    let pending = |message: &str| {
        let pod = with_status(
            pair(Mode::HostNetwork, true).server,
            json!({ "phase": "Pending" }),
        );
        let events = [event("FailedScheduling", "Warning", message)];
        waits_for_host_port(&pod, &events)
    };
    // The real kube-scheduler v1.37.2's words for railsweep's pinned pod, its port in use.
    assert_eq!(
        pending(
            "0/2 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, \
             1 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: \
             1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."
        ),
        Some(("10.140.82.106".to_string(), vec![18515]))
    );
    // A port and a full node: no end of a pod makes room for it.
    assert_eq!(pending(PORTS_AND_GPUS), None);
    assert_eq!(
        pending("0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
        None
    );
    // Placed: nothing to wait for.
    let placed = pair(Mode::HostNetwork, true).server;
    assert_eq!(waits_for_host_port(&placed, &[]), None);
}

#[test]
fn unschedulable_from_the_event_before_the_condition() {
    let d = scheduling_failed(
            pair(Mode::Sriov, true).client,
            "0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes \
             are available: 4 Preemption is not helpful for scheduling.",
        );
    assert_eq!(d.problem, Problem::Unschedulable);
    assert!(d.todo.contains("no node is named 10.140.66.66"), "{d}");
    assert_eq!(
            scheduling_reasons("0/3 nodes are available: 1 Insufficient nvidia.com/sriov_rdma_rail0, 2 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: x"),
            ["Insufficient nvidia.com/sriov_rdma_rail0", "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"]
        );
}

#[test]
fn an_rbac_refusal_names_the_verb_and_resource() {
    // The real kube-apiserver v1.37.2's wording (tests/cluster/modes_cluster.rs meets it).
    let m =
        "pods is forbidden: User \"system:serviceaccount:ns1:railsweep\" cannot create resource \
                 \"pods\" in API group \"\" in the namespace \"ns1\"";
    assert_eq!(rbac_refusal(m), Some(("create", "pods")));
    assert_eq!(
        rbac_refusal("pods \"x\" is forbidden: violates PodSecurity"),
        None
    );
}

#[test]
fn an_unnamed_taint_as_kubernetes_1_37_words_it() {
    // The real kube-scheduler v1.37.2's message (tests/cluster/modes_cluster.rs meets it).
    let d = scheduling_failed(
        pair(Mode::HostNetwork, true).server,
        "0/2 nodes are available: 2 node(s) had untolerated taint(s). preemption: 0/2 nodes are \
             available: 2 Preemption is not helpful for scheduling.",
    );
    assert_eq!(d.problem, Problem::Unschedulable);
    assert!(
        d.todo.contains("has a taint the pod does not tolerate"),
        "{d}"
    );
    assert!(d.todo.contains("--toleration KEY"), "{d}");
    // railsweep's pods tolerate the GPU taint: no guess then.
    assert!(!d.todo.contains("probably"), "{d}");
}

#[test]
fn topology_affinity_error() {
    // The kubelet's refusal from the IPvlan report: 4 GPUs and 16 PFs under policy restricted.
    let pod = with_status(
        pair(Mode::Ipvlan, true).server,
        json!({ "phase": "Failed", "reason": "TopologyAffinityError",
                    "message": "Pod was rejected: Resources cannot be allocated with Topology locality" }),
    );
    let d = explained_by(
        &pod,
        "TopologyAffinityError",
        "Resources cannot be allocated with Topology locality",
    );
    assert_eq!(d.problem, Problem::TopologyAffinity);
    assert!(
        d.what
            .contains("Resources cannot be allocated with Topology locality"),
        "{d}"
    );
    assert!(
        d.todo.contains("NUMA") && d.todo.contains("best-effort"),
        "{d}"
    );
}

#[test]
fn image_pull_failures() {
    let pod = with_status(
        pair(Mode::Ipvlan, true).client,
        json!({ "phase": "Pending", "containerStatuses": [{ "name": "rdmabw", "image": DEFAULT_IMAGE,
                    "imageID": "", "ready": false, "restartCount": 0,
                    "state": { "waiting": { "reason": "ImagePullBackOff",
                    "message": format!("Back-off pulling image \"{DEFAULT_IMAGE}\"") } } }] }),
    );
    let d = explain_pod(&pod, &[]).expect("explained");
    assert_eq!(d.problem, Problem::ImagePull);
    assert!(
        d.what.contains("ImagePullBackOff: Back-off pulling image"),
        "{d}"
    );
    assert!(
        d.todo.contains("registry mirror") && d.todo.contains("RAILSWEEP_IMAGE="),
        "{d}"
    );
}

// The IPvlan report's IPAM error, in the event Multus makes of it.
const IPAM: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create pod network \
        sandbox k8s_railsweep-r1-ipvlan-server_rdma-hostnet(0b6d): error adding pod rdma-hostnet_railsweep-r1-ipvlan-server \
        to CNI network \"multus-cni-network\": plugin type=\"multus\" name=\"multus-cni-network\" failed (add): \
        [rdma-hostnet/railsweep-r1-ipvlan-server/0b6d:rdma-ipvlan-2]: error adding container to network \
        \"rdma-ipvlan-2\": rpc error: code = ResourceExhausted desc = no free addresses in the pool \
        \"rdma-ipvlan-pool\", poolType \"ippool\"";

#[test]
fn ipam_exhausted() {
    let pod = with_status(
        pair(Mode::Ipvlan, true).server,
        json!({ "phase": "Pending", "containerStatuses": [{ "name": "rdmabw", "image": "x", "imageID": "",
                    "ready": false, "restartCount": 0, "state": { "waiting": { "reason": "ContainerCreating" } } }] }),
    );
    assert_eq!(
        explain_pod(&pod, &[]),
        None,
        "ContainerCreating alone is no failure"
    );
    let d = sandbox_failed(&pod, IPAM);
    assert_eq!(d.problem, Problem::IpamExhausted);
    assert!(
        d.what
            .starts_with("the IP pool rdma-ipvlan-pool has no free address on node 10.140.82.106"),
        "{d}"
    );
    assert!(d
        .what
        .contains("no free addresses in the pool \"rdma-ipvlan-pool\", poolType \"ippool\""));
    assert!(
        d.todo.contains("(16 for this pod)") && d.todo.contains("perNodeBlockSize"),
        "{d}"
    );
}

#[test]
fn ipam_exhausted_in_host_local_words() {
    // The node agent's event when host-local's range runs out (scripts/cluster's nodes).
    let d = sandbox_failed(
            &pair(Mode::Ipvlan, true).server,
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox \"0b6d\": \
             plugin type=\"multus\" name=\"multus-cni-network\" failed (add): [rdma-hostnet/railsweep-r1-ipvlan-server/0b6d:pool-a]: \
             error adding container to network \"pool-a\": failed to allocate for range 0: no IP addresses available in range \
             set: 10.58.0.1-10.58.0.8",
        );
    assert_eq!(d.problem, Problem::IpamExhausted);
    assert!(
        d.what
            .starts_with("the IP pool of network pool-a (10.58.0.1-10.58.0.8) has no free address"),
        "{d}"
    );
}

#[test]
fn missing_network_attachment() {
    let d = sandbox_failed(
            &pair(Mode::Ipvlan, true).server,
            "Failed to create pod sandbox: ... Multus: [rdma-hostnet/railsweep-r1-ipvlan-server/1]: error loading \
             k8s delegates k8s args: TryLoadPodDelegates: error in getting k8s network for pod: \
             GetNetworkDelegates: failed getting the delegate: getKubernetesDelegate: cannot find a \
             network-attachment-definition (rdma-ipvlan-0) in namespace (rdma-hostnet): \
             network-attachment-definitions.k8s.cni.cncf.io \"rdma-ipvlan-0\" not found",
        );
    assert_eq!(d.problem, Problem::NetworkMissing);
    assert!(
        d.todo.contains("create rdma-ipvlan-0 in rdma-hostnet"),
        "{d}"
    );
}

#[test]
fn a_passing_sandbox_failure_is_waited_out() {
    // Multus's words when it timed out reading its pod from a busy API server: the kubelet
    // tries again, and the pod may still start.
    const PASSING: &str = "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network \
             for sandbox \"5e1f\": plugin type=\"multus\" name=\"multus-cni-network\" failed (add): Multus: \
             [lab/railsweep-r1-ipvlan-server/5e1f]: error waiting for pod: client rate limiter Wait returned an error: \
             context deadline exceeded";
    let pod = pair(Mode::Ipvlan, true).server;
    let once = [event("FailedCreatePodSandBox", "Warning", PASSING)];
    assert_eq!(explain_pod(&pod, &once), None, "one attempt is no verdict");
    // A missing network after it is one at once, whatever came before.
    let then_missing = [
            once[0].clone(),
            event(
                "FailedCreatePodSandBox",
                "Warning",
                "Multus: cannot find a network-attachment-definition (rdma-ipvlan-9) in namespace (lab): \
                 network-attachment-definitions.k8s.cni.cncf.io \"rdma-ipvlan-9\" not found",
            ),
        ];
    let d = explain_pod(&pod, &then_missing).expect("explained");
    assert_eq!(d.problem, Problem::NetworkMissing, "{d}");
    // The same failure at each of SANDBOX_ATTEMPTS attempts, counted in one event or in several.
    let mut counted = once[0].clone();
    counted.count = Some(SANDBOX_ATTEMPTS);
    let d = explain_pod(&pod, &[counted]).expect("explained");
    assert_eq!(d.problem, Problem::Cni);
    assert!(
        d.what.contains("(3 attempts)") && d.what.contains("error waiting for pod"),
        "{d}"
    );
    let several = vec![once[0].clone(); SANDBOX_ATTEMPTS as usize];
    assert_eq!(
        explain_pod(&pod, &several).map(|d| d.problem),
        Some(Problem::Cni)
    );
    // At the pod timeout the last event is still quoted.
    let d = explain_timeout(Some(&pod), &once, Duration::from_secs(90));
    assert!(d.what.contains("error waiting for pod"), "{d}");
}

/// The diagnosis of `pod`, whose creation the API server refused (403) in `message`'s words.
fn create_refused(pod: &Pod, message: &str) -> Diagnosis {
    let s = Status {
        code: 403,
        reason: "Forbidden".into(),
        message: message.into(),
        ..Status::default()
    };
    explain_create_error(pod, &s)
}

/// What Pod Security admission's refusal of a pod of railsweep's in a baseline namespace is.
const BASELINE_NEEDS_PRIVILEGED: Problem = Problem::PodSecurity {
    enforced: Level::Baseline,
    needed: Level::Privileged,
};

#[test]
fn pod_security_hostnetwork_needs_privileged() {
    let pod = pair(Mode::HostNetwork, true).server;
    let said = "pods \"railsweep-r1-hostnetwork-server\" is forbidden: violates PodSecurity \"baseline:latest\": \
             host namespaces (hostNetwork=true), hostPort (container \"rdmabw\" uses hostPort 18515), privileged \
             (container \"rdmabw\" must not set securityContext.privileged=true)";
    let d = create_refused(&pod, said);
    assert_eq!(d.problem, BASELINE_NEEDS_PRIVILEGED);
    assert!(
        d.todo
            .contains("pod-security.kubernetes.io/enforce=privileged"),
        "{d}"
    );
    assert!(d.todo.contains("always need privileged"), "{d}");
    // Our own reading of the pod gives the same words as the admission plugin.
    let (_, why) = required_level(&pod);
    assert!(said.ends_with(&why.join(", ")), "{why:?}");
}

#[test]
fn pod_security_ipvlan_only_for_ipc_lock() {
    // The IPvlan report's refusal: only IPC_LOCK keeps the pod out of Baseline.
    let pod = pair(Mode::Ipvlan, true).client;
    let d = create_refused(
            &pod,
            "pods \"ipvlan-n1\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities \
             (container \"rdma\" must not include \"IPC_LOCK\" in securityContext.capabilities.add)",
        );
    assert_eq!(d.problem, BASELINE_NEEDS_PRIVILEGED);
    assert!(
        d.todo.contains("--no-ipc-lock") && d.todo.contains("passes baseline"),
        "{d}"
    );
    // The CRI-O fix still needs privileged, for hostNetwork (the report's second refusal).
    let crio = pair(Mode::HostNetworkCrio, true).server;
    let d = create_refused(
            &crio,
            "pods \"gpu4-annot-1\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities \
             (container \"gpu\" must not include \"IPC_LOCK\" in securityContext.capabilities.add), host namespaces \
             (hostNetwork=true)",
        );
    assert!(
        d.todo.contains("always need privileged") && !d.todo.contains("Or add --no-ipc-lock"),
        "{d}"
    );
}

#[test]
fn runtime_class_and_devices() {
    let pod = pair(Mode::HostNetworkCrio, true).server;
    let d = create_refused(
        &pod,
        "pods \"x\" is forbidden: pod rejected: RuntimeClass \"runc-nohostdev\" not found",
    );
    assert_eq!(d.problem, Problem::RuntimeClassMissing);
    assert!(
        d.todo.contains("create the RuntimeClass runc-nohostdev"),
        "{d}"
    );
    let bad = with_status(
        pod,
        json!({ "phase": "Pending", "containerStatuses": [{ "name": "rdmabw", "image": "x", "imageID": "",
                    "ready": false, "restartCount": 0, "state": { "waiting": { "reason": "CreateContainerError",
                    "message": "Error: /dev/infiniband is not a valid device: not a device node" } } }] }),
    );
    let d = explain_pod(&bad, &[]).expect("explained");
    assert_eq!(d.problem, Problem::DeviceAnnotation);
    assert!(d.todo.contains("allowed_devices"), "{d}");
}

#[test]
fn a_runtime_class_whose_handler_the_node_lacks() {
    // containerd's words (pkg/cri/server/sandbox_run.go, getSandboxRuntime), as the
    // kubelet's FailedCreatePodSandBox event carries them.
    let pod = pair(Mode::HostNetworkCrio, true).server;
    let d = sandbox_failed(
            &pod,
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: \
             no runtime for \"runc-nohostdev\" is configured",
        );
    assert_eq!(d.problem, Problem::RuntimeHandlerMissing);
    assert!(
            d.what.starts_with(
                "containerd on node 10.140.82.106 has no runtime handler runc-nohostdev (RuntimeClass runc-nohostdev)"
            ),
            "{d}"
        );
    assert!(
        d.what
            .contains("no runtime for \"runc-nohostdev\" is configured"),
        "{d}"
    );
    assert!(
        d.todo.contains("containerd.runtimes.runc-nohostdev")
            && d.todo.contains("--runtime-class")
            && d.todo.contains("needs CRI-O"),
        "{d}"
    );
    // CRI-O's words (internal/config/runtimehandler.go): its drop-in, and no containerd advice.
    let d = sandbox_failed(
            &pod,
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to find runtime handler \
             runc-nohostdev from runtime list map[crun:0xc0003 runc:0xc0004]",
        );
    assert_eq!(d.problem, Problem::RuntimeHandlerMissing);
    assert!(
        d.todo.contains("[crio.runtime.runtimes.runc-nohostdev]")
            && !d.todo.contains("needs CRI-O"),
        "{d}"
    );
    // Any other sandbox failure is still the network's.
    let d = sandbox_failed(&pod, IPAM);
    assert_eq!(d.problem, Problem::IpamExhausted);
}

#[test]
fn running_pods_and_timeouts() {
    let pod = with_status(
        pair(Mode::Sriov, true).server,
        json!({ "phase": "Running" }),
    );
    assert_eq!(explain_pod(&pod, &[]), None);
    let pending = with_status(
        pair(Mode::Sriov, true).server,
        json!({ "phase": "Pending" }),
    );
    let d = explain_timeout(
        Some(&pending),
        &[event(
            "Pulling",
            "Normal",
            "Pulling image \"railbench/rdmabw:0.1.0\"",
        )],
        Duration::from_secs(300),
    );
    assert_eq!(d.problem, Problem::Timeout);
    assert!(
        d.what.contains("still Pending after 300 s") && d.todo.contains("--pod-timeout"),
        "{d}"
    );
}
