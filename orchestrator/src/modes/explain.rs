//! Why a pod does not start, in words a user can act on.
//!
//! Pure functions over what the API server says: the Pod's status (conditions, container
//! states, phase), the Events about it, and the `Status` of a refused create. Each
//! [`Diagnosis`] quotes the cluster's own words (so they can be searched for) and says what to
//! do. [`explain_pod`] answers `None` while nothing says the pod will never start: then
//! railsweep keeps waiting, up to its `--pod-timeout`, and [`explain_timeout`] sums up.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::core::Status;

use super::security::{required_level, Level};
use super::{labels, Mode, DEFAULT_IMAGE};

/// The kinds of failure railsweep recognises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The scheduler found no node: not enough of a resource, a host port in use, no node of
    /// that name, an untolerated taint.
    Unschedulable,
    /// The kubelet's Topology Manager refused the pod (`TopologyAffinityError`).
    TopologyAffinity,
    /// The image cannot be pulled (`ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`).
    ImagePull,
    /// The IP pool of a secondary network has no free address on the node.
    IpamExhausted,
    /// A NetworkAttachmentDefinition named by the pod does not exist in its namespace.
    NetworkMissing,
    /// Another CNI failure while the pod's networks were set up.
    Cni,
    /// Pod Security admission refused the pod: `enforced` is the namespace's level, `needed`
    /// the level the pod needs.
    PodSecurity {
        /// The level the namespace enforces.
        enforced: Level,
        /// The level this pod needs.
        needed: Level,
    },
    /// The pod names a RuntimeClass that does not exist.
    RuntimeClassMissing,
    /// The pod's RuntimeClass names a handler the node's container runtime does not have
    /// (containerd's `no runtime for "H" is configured`, CRI-O's `failed to find runtime
    /// handler H`).
    RuntimeHandlerMissing,
    /// CRI-O refused a device of the `io.kubernetes.cri-o.Devices` annotation.
    DeviceAnnotation,
    /// The container could not be created or started, or ended.
    Container,
    /// The namespace does not exist.
    NamespaceMissing,
    /// The API server refused the pod for another reason.
    Refused,
    /// The pod was not ready in time, with no failure to show.
    Timeout,
    /// A claim names a DeviceClass that does not exist (mode `dra`).
    DeviceClassMissing,
    /// The scheduler cannot allocate the pod's claim on its node (mode `dra`): not enough
    /// devices, a selector that matches none, an alignment that cannot be met.
    ClaimUnallocatable,
    /// The pod's claim was never made from its template, or never allocated (mode `dra`).
    ClaimPending,
    /// The node's DRA driver could not give the pod its allocated devices.
    ClaimPrepare,
}

/// A pod that will not start: what the cluster says, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnosis {
    /// Which failure it is.
    pub problem: Problem,
    /// The pod, `NAMESPACE/NAME`.
    pub pod: String,
    /// What happened, quoting the cluster's words.
    pub what: String,
    /// What to do about it.
    pub todo: String,
}

impl fmt::Display for Diagnosis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pod {} does not start: {}\n  what to do: {}",
            self.pod, self.what, self.todo
        )
    }
}

impl std::error::Error for Diagnosis {}

fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("?")
    )
}

fn namespace(pod: &Pod) -> &str {
    pod.metadata.namespace.as_deref().unwrap_or("default")
}

/// The node the pod was pinned to (`kubernetes.io/hostname`), else the one it was bound to.
fn node_of(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    spec.node_selector
        .as_ref()
        .and_then(|s| s.get("kubernetes.io/hostname"))
        .or(spec.node_name.as_ref())
        .map(String::as_str)
}

fn node_words(pod: &Pod) -> String {
    node_of(pod)
        .map(|n| format!("node {n}"))
        .unwrap_or_else(|| "the node".into())
}

fn mode_of(pod: &Pod) -> Option<Mode> {
    pod.metadata
        .labels
        .as_ref()?
        .get(labels::MODE)?
        .parse()
        .ok()
}

fn image_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.containers.first()?.image.as_deref()
}

fn limit_of(pod: &Pod, resource: &str) -> Option<String> {
    pod.spec.as_ref()?.containers.iter().find_map(|c| {
        c.resources
            .as_ref()?
            .limits
            .as_ref()?
            .get(resource)
            .map(|q| q.0.clone())
    })
}

fn host_ports(pod: &Pod) -> Vec<i32> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| p.host_port)
        .collect()
}

fn make(pod: &Pod, problem: Problem, what: String, todo: String) -> Diagnosis {
    Diagnosis {
        problem,
        pod: pod_ref(pod),
        what,
        todo,
    }
}

/// Why `pod` will not start, if its status or `events` (the Events whose involved object is
/// the pod, oldest first) say so; `None` while it may still start.
pub fn explain_pod(pod: &Pod, events: &[Event]) -> Option<Diagnosis> {
    let status = pod.status.as_ref();
    // The kubelet's admission refusal: the pod is Failed with the reason.
    if let Some(s) = status {
        if s.reason.as_deref() == Some("TopologyAffinityError")
            || events
                .iter()
                .any(|e| e.reason.as_deref() == Some("TopologyAffinityError"))
        {
            return Some(topology(pod, s.message.as_deref(), events));
        }
    }
    if let Some(d) = unschedulable(pod, events) {
        return Some(d);
    }
    if let Some(d) = containers(pod) {
        return Some(d);
    }
    if let Some(d) = sandbox(pod, events) {
        return Some(d);
    }
    if let Some(d) = claims(pod, events) {
        return Some(d);
    }
    if let Some(s) = status {
        if s.phase.as_deref() == Some("Failed") {
            let what = match (&s.reason, &s.message) {
                (Some(r), Some(m)) => format!("{r}: {m}"),
                (Some(r), None) => r.clone(),
                (None, Some(m)) => m.clone(),
                (None, None) => "the pod failed".into(),
            };
            return Some(make(
                pod,
                Problem::Container,
                format!("{} rejected or ended it: {what}", node_words(pod)),
                format!(
                    "see `kubectl describe pod -n {} {}`",
                    namespace(pod),
                    name(pod)
                ),
            ));
        }
        if s.phase.as_deref() == Some("Succeeded") {
            return Some(make(
                pod,
                Problem::Container,
                "the container ended (phase Succeeded) before the sweep".into(),
                "the pods run `sleep infinity`: the image needs a `sleep` that takes `infinity` (coreutils or busybox)".into(),
            ));
        }
    }
    None
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or("?")
}

fn topology(pod: &Pod, status_message: Option<&str>, events: &[Event]) -> Diagnosis {
    let words = events
        .iter()
        .rev()
        .find(|e| e.reason.as_deref() == Some("TopologyAffinityError"))
        .and_then(|e| e.message.clone())
        .or_else(|| status_message.map(str::to_string))
        .unwrap_or_else(|| "Resources cannot be allocated with Topology locality".into());
    make(
        pod,
        Problem::TopologyAffinity,
        format!(
            "the kubelet of {} refused it with TopologyAffinityError: {words}",
            node_words(pod)
        ),
        "the node's Topology Manager (policy restricted or single-numa-node) could not put the pod's \
         devices on the fewest NUMA nodes, as when 4 GPUs (2 NUMA nodes) come with 16 RDMA PFs (4 NUMA \
         nodes): ask for devices that align (e.g. all GPUs with all rails, or as many rails as the GPUs' \
         NUMA nodes hold: fewer --rdma-resource or more --resource nvidia.com/gpu), or use a node whose \
         policy is best-effort (which admits it, but may place GPUs and NICs apart)"
            .into(),
    )
}

/// The reasons of a FailedScheduling message: `0/5 nodes are available: 2 node(s) didn't have
/// free ports for the requested pod ports, 3 Insufficient nvidia.com/gpu. preemption: ...`,
/// each without its node count.
pub fn scheduling_reasons(message: &str) -> Vec<String> {
    let body = message
        .split_once("are available:")
        .map(|(_, b)| b)
        .unwrap_or(message);
    let body = body.split(" preemption:").next().unwrap_or(body);
    body.trim()
        .trim_end_matches('.')
        .split(", ")
        .map(|r| {
            let r = r.trim();
            match r.split_once(' ') {
                Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => rest.to_string(),
                _ => r.to_string(),
            }
        })
        .filter(|r| !r.is_empty())
        .collect()
}

fn unschedulable(pod: &Pod, events: &[Event]) -> Option<Diagnosis> {
    let cond = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
        .filter(|c| c.reason.as_deref() == Some("Unschedulable"));
    let message = cond.and_then(|c| c.message.clone()).or_else(|| {
        // Before the condition is written, the scheduler's event says it.
        let scheduled = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some();
        (!scheduled)
            .then(|| {
                events
                    .iter()
                    .rev()
                    .find(|e| e.reason.as_deref() == Some("FailedScheduling"))
                    .and_then(|e| e.message.clone())
            })
            .flatten()
    })?;
    let reasons = scheduling_reasons(&message);
    let node = node_of(pod).unwrap_or("the node");
    let mut todo = Vec::new();
    let other_than_selector = reasons
        .iter()
        .any(|r| !r.contains("didn't match Pod's node affinity/selector"));
    let mut problem = Problem::Unschedulable;
    for r in &reasons {
        if let Some(class) = r
            .split_once("device class ")
            .and_then(|(_, c)| c.strip_suffix(" does not exist"))
        {
            problem = Problem::DeviceClassMissing;
            todo.push(format!(
                "no DeviceClass {class} exists: install the DRA driver's class (for DRANET: a DeviceClass {class} selecting device.driver == \"dra.net\"), or name an existing one with --device-class (kubectl get deviceclasses)"
            ));
        } else if r.contains("cannot allocate all claims") {
            problem = Problem::ClaimUnallocatable;
            todo.push(format!(
                "the scheduler cannot allocate the pod's claim {} on {node}",
                claim_words(pod)
            ));
        } else if r.contains("resourceclaim") && r.contains("not found") {
            problem = Problem::ClaimPending;
            todo.push(pending_todo(pod));
        } else if let Some(res) = r.strip_prefix("Insufficient ") {
            let asks = limit_of(pod, res)
                .map(|q| format!(" (the pod asks for {q})"))
                .unwrap_or_default();
            todo.push(format!(
                "{node} has not enough free {res}{asks}: free them (its pods: kubectl get pods -A \
                 --field-selector spec.nodeName={node}; leftover railsweep pods: kubectl delete pods -A -l \
                 {}=railsweep) or ask for fewer ({})",
                labels::MANAGED_BY,
                if matches!(res, "cpu" | "memory") || res.contains("gpu") { "--resource" } else { "--rdma-resource" }
            ));
        } else if r.contains("didn't have free ports") {
            let ports = host_ports(pod);
            let port = ports.first().map(|p| format!(" {p}")).unwrap_or_default();
            todo.push(format!(
                "another pod on {node} already declares host port{port} (on the node's network a port is \
                 the node's): pick another --port, or wait for that pod to end"
            ));
        } else if r.contains("didn't match Pod's node affinity/selector") {
            if !other_than_selector {
                todo.push(format!(
                    "no node is named {node}: --nodes takes names as `kubectl get nodes` prints them (the \
                     kubernetes.io/hostname label)"
                ));
            }
        } else if let Some(taint) = r.strip_prefix("node(s) had untolerated taint ") {
            let key = taint
                .trim_start_matches('{')
                .split(':')
                .next()
                .unwrap_or("")
                .trim();
            todo.push(format!(
                "{node} has the taint {taint}: tolerate it with --toleration {key}"
            ));
        } else if r.contains("had untolerated taint(s)") {
            // Kubernetes 1.37's scheduler no longer names the taint: name the GPU nodes' own
            // where the pod does not tolerate it, and say how to see the node's.
            let likely = if tolerates(pod, "nvidia.com/gpu") {
                String::new()
            } else {
                " (probably the untolerated taint {nvidia.com/gpu: } of GPU nodes: tolerate it with \
                 --toleration nvidia.com/gpu)"
                    .to_string()
            };
            todo.push(format!(
                "{node} has a taint the pod does not tolerate{likely}: list them with kubectl get node \
                 {node} -o jsonpath='{{.spec.taints}}' and tolerate each with --toleration KEY"
            ));
        } else if r.contains("were unschedulable") || r.contains("unschedulable:") {
            todo.push(format!(
                "{node} is cordoned: kubectl uncordon {node}, or pick another node"
            ));
        } else {
            todo.push(format!("the scheduler says `{r}`"));
        }
    }
    if todo.is_empty() {
        todo.push(format!(
            "see `kubectl describe pod -n {} {}`",
            namespace(pod),
            name(pod)
        ));
    }
    Some(make(
        pod,
        problem,
        format!("no node can take it: {message}"),
        todo.join("; "),
    ))
}

/// The claim of a `dra` pod, in words: `rails (template T)`.
fn claim_words(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .and_then(|c| c.first())
        .map(|c| match &c.resource_claim_template_name {
            Some(t) => format!("{} (from ResourceClaimTemplate {t})", c.name),
            None => c.name.clone(),
        })
        .unwrap_or_else(|| "?".into())
}

fn pending_todo(pod: &Pod) -> String {
    format!(
        "the pod's ResourceClaim {} was not made: kube-controller-manager's resourceclaim-controller makes it from the template (is it running, with the resource.k8s.io/v1 API on: Kubernetes 1.34+?), and the template must exist in namespace {} (kubectl get resourceclaimtemplates,resourceclaims -n {})",
        claim_words(pod),
        namespace(pod),
        namespace(pod)
    )
}

/// A `dra` pod whose claim was not made or prepared: the resourceclaim controller's
/// `FailedResourceClaimCreation` event, the kubelet's `FailedPrepareDynamicResources`.
fn claims(pod: &Pod, events: &[Event]) -> Option<Diagnosis> {
    if let Some(e) = events
        .iter()
        .rev()
        .find(|e| e.reason.as_deref() == Some("FailedResourceClaimCreation"))
    {
        return Some(make(
            pod,
            Problem::ClaimPending,
            format!(
                "its ResourceClaim cannot be made: {}",
                e.message.as_deref().unwrap_or("")
            ),
            pending_todo(pod),
        ));
    }
    let e = events
        .iter()
        .rev()
        .find(|e| e.reason.as_deref() == Some("FailedPrepareDynamicResources"))?;
    Some(make(
        pod,
        Problem::ClaimPrepare,
        format!(
            "the DRA driver on {} could not give it its devices: {}",
            node_words(pod),
            e.message.as_deref().unwrap_or("")
        ),
        format!(
            "see the DRA driver's log on {} (DRANET: its DaemonSet's pod there) and the claim's devices (kubectl get resourceclaims -n {} -o yaml)",
            node_words(pod),
            namespace(pod)
        ),
    ))
}

fn containers(pod: &Pod) -> Option<Diagnosis> {
    let statuses = pod.status.as_ref()?.container_statuses.as_ref()?;
    for cs in statuses {
        let state = cs.state.as_ref();
        if let Some(w) = state.and_then(|s| s.waiting.as_ref()) {
            let reason = w.reason.as_deref().unwrap_or("");
            let message = w.message.as_deref().unwrap_or("");
            let quoted = if message.is_empty() {
                reason.to_string()
            } else {
                format!("{reason}: {message}")
            };
            match reason {
                "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
                    let image = image_of(pod).unwrap_or(&cs.image);
                    let todo = if image == DEFAULT_IMAGE {
                        format!(
                            "{DEFAULT_IMAGE} is built from deploy/Containerfile and published nowhere, so \
                             railsweep never pulls it: import it into the nodes' runtime (ctr -n k8s.io \
                             images import), or push it to a registry your nodes can pull from and pass \
                             --image (--image-pull-secret for a private one); or pass --inject --image IMAGE \
                             with any image that has libibverbs (such as your NCCL image)"
                        )
                    } else {
                        format!(
                            "check the name of {image} and that {} can pull from its registry (kubectl \
                             describe pod shows the pull error; private registries need --image-pull-secret NAME)",
                            node_words(pod)
                        )
                    };
                    return Some(make(
                        pod,
                        Problem::ImagePull,
                        format!("the image cannot be pulled: {quoted}"),
                        todo,
                    ));
                }
                "CreateContainerError"
                | "RunContainerError"
                | "CreateContainerConfigError"
                | "StartError" => {
                    if message.contains("not a valid device")
                        || message.contains("not a device node")
                    {
                        return Some(make(
                            pod,
                            Problem::DeviceAnnotation,
                            format!("CRI-O refused the io.kubernetes.cri-o.Devices annotation: {quoted}"),
                            format!(
                                "the annotation takes device nodes one by one, not directories: --uverbs must \
                                 list uverbs devices that exist on {} (ls /dev/infiniband there), and CRI-O's \
                                 allowed_devices must list each of them and /dev/infiniband/rdma_cm",
                                node_words(pod)
                            ),
                        ));
                    }
                    return Some(make(
                        pod,
                        Problem::Container,
                        format!("the container cannot start: {quoted}"),
                        "the pods run `sleep infinity` in the image: check that it has `sleep` and that the \
                         image's entry point is not required"
                            .into(),
                    ));
                }
                "CrashLoopBackOff" => {
                    return Some(make(
                        pod,
                        Problem::Container,
                        format!("the container keeps ending: {quoted}"),
                        format!(
                            "see `kubectl logs -n {} {} --previous`",
                            namespace(pod),
                            name(pod)
                        ),
                    ));
                }
                _ => {}
            }
        }
        if let Some(t) = state.and_then(|s| s.terminated.as_ref()) {
            return Some(make(
                pod,
                Problem::Container,
                format!(
                    "the container ended with exit code {}{}",
                    t.exit_code,
                    t.reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                "the pods run `sleep infinity`: the image needs a `sleep` that takes `infinity`"
                    .into(),
            ));
        }
    }
    None
}

/// Pull the name out of `pool "NAME"` (NVIDIA IPAM's words).
fn quoted_after<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    let start = message.find(key)? + key.len();
    let rest = &message[start..];
    let end = rest.find('"')?;
    Some(&rest[..end])
}

/// The sandbox attempts after which a failure whose words name no lasting cause ends the wait.
/// The kubelet tries again after each (seconds apart), and a CNI plugin's passing failure (Multus
/// timing out reading its pod from a busy API server) is gone at the next attempt.
pub const SANDBOX_ATTEMPTS: i32 = 3;

fn sandbox(pod: &Pod, events: &[Event]) -> Option<Diagnosis> {
    let failed = |e: &&Event| e.reason.as_deref() == Some("FailedCreatePodSandBox");
    let e = events.iter().rev().find(failed)?;
    let message = e.message.as_deref().unwrap_or("");
    let node = node_words(pod);
    if let Some(d) = runtime_handler(pod, message) {
        return Some(d);
    }
    let exhausted = [
        "no free addresses",
        "ResourceExhausted",
        "no IP addresses available",
        "Could not allocate IP",
    ];
    if exhausted.iter().any(|k| message.contains(k)) {
        // NVIDIA IPAM names its pool; host-local names the range set of the network.
        let pool = quoted_after(message, "pool \"")
            .map(|p| format!("the IP pool {p}"))
            .or_else(|| {
                let net = quoted_after(message, "error adding container to network \"")?;
                Some(match message.split_once("range set: ") {
                    Some((_, r)) => format!(
                        "the IP pool of network {net} ({})",
                        r.split([' ', ';', '"']).next().unwrap_or(r)
                    ),
                    None => format!("the IP pool of network {net}"),
                })
            })
            .unwrap_or_else(|| "the IP pool".into());
        let rails = pod
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(super::NETWORKS_ANNOTATION))
            .map(|n| n.split(',').count())
            .unwrap_or(0);
        return Some(make(
            pod,
            Problem::IpamExhausted,
            format!("{pool} has no free address on {node} (CNI): {message}"),
            format!(
                "each pod takes one address on every rail network ({rails} for this pod), from the block its node \
                 got: delete pods that hold addresses on {node} (leftover railsweep pods: kubectl delete pods -A \
                 -l {}=railsweep), or give the pool a larger block per node (NVIDIA IPAM: perNodeBlockSize)",
                labels::MANAGED_BY
            ),
        ));
    }
    if message.contains("cannot find a network-attachment-definition")
        || message.contains("network-attachment-definitions.k8s.cni.cncf.io")
    {
        let nad = quoted_after(message, "network-attachment-definitions.k8s.cni.cncf.io \"")
            .map(str::to_string)
            .or_else(|| {
                message
                    .split_once("network-attachment-definition (")
                    .and_then(|(_, r)| r.split_once(')'))
                    .map(|(n, _)| n.to_string())
            })
            .unwrap_or_else(|| "a network".into());
        let ns = namespace(pod);
        return Some(make(
            pod,
            Problem::NetworkMissing,
            format!("Multus cannot find the NetworkAttachmentDefinition {nad} in namespace {ns}: {message}"),
            format!(
                "NetworkAttachmentDefinitions are namespaced: create {nad} in {ns}, or name it as NAMESPACE/{nad} in \
                 --networks (kubectl get network-attachment-definitions -A lists them)"
            ),
        ));
    }
    // The kubelet counts repeats of one message in the event; each attempt names its own
    // sandbox, so attempts are also events of their own.
    let attempts: i32 = events
        .iter()
        .filter(failed)
        .map(|e| e.count.unwrap_or(1).max(1))
        .sum();
    if attempts < SANDBOX_ATTEMPTS {
        return None;
    }
    Some(make(
        pod,
        Problem::Cni,
        format!("the pod's network could not be set up on {node} ({attempts} attempts): {message}"),
        format!(
            "the message names the network and CNI plugin that failed: check that network's \
             NetworkAttachmentDefinition and the CNI pods (Multus, IPAM) on {node}"
        ),
    ))
}

/// The runtime handler of a sandbox that failed for want of it: containerd says
/// `failed to get sandbox runtime: no runtime for "H" is configured`, CRI-O `failed to find
/// runtime handler H from runtime list map[...]`.
fn missing_handler(message: &str) -> Option<(&str, &'static str)> {
    if let Some(h) = quoted_after(message, "no runtime for \"") {
        return Some((h, "containerd"));
    }
    let rest = message.split_once("failed to find runtime handler ")?.1;
    let h = rest.split_whitespace().next()?;
    Some((h, "CRI-O"))
}

/// A sandbox that the node's container runtime cannot make: the RuntimeClass's handler is
/// not one it has.
fn runtime_handler(pod: &Pod, message: &str) -> Option<Diagnosis> {
    let (handler, runtime) = missing_handler(message)?;
    let node = node_words(pod);
    let class = pod
        .spec
        .as_ref()
        .and_then(|s| s.runtime_class_name.as_deref())
        .unwrap_or(handler);
    let config = if runtime == "containerd" {
        format!(
            "a [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.{handler}] table in \
             /etc/containerd/config.toml (config version 2; version 3: plugins.\"io.containerd.cri.v1.runtime\"), \
             then restart containerd"
        )
    } else {
        format!(
            "a [crio.runtime.runtimes.{handler}] drop-in under /etc/crio/crio.conf.d \
             (deploy/examples/runtimeclass-runc-nohostdev.yaml has the one mode hostnetwork-crio needs), then \
             restart CRI-O"
        )
    };
    let mut todo = format!(
        "the RuntimeClass {class} names the handler {handler}, which {runtime} on {node} does not \
         have: give the node that runtime ({config}), or name a RuntimeClass whose handler every node has \
         with --runtime-class (kubectl get runtimeclasses shows each one's handler)"
    );
    if runtime == "containerd" && mode_of(pod) == Some(Mode::HostNetworkCrio) {
        todo.push_str(&format!(
            ". Mode hostnetwork-crio needs CRI-O: containerd ignores the {} annotation, so the pod \
             would get no RDMA device; on containerd nodes use --mode hostnetwork (privileged), ipvlan or dra",
            super::CRIO_DEVICES_ANNOTATION
        ));
    }
    Some(make(
        pod,
        Problem::RuntimeHandlerMissing,
        format!("{runtime} on {node} has no runtime handler {handler} (RuntimeClass {class}): {message}"),
        todo,
    ))
}

/// Why the API server refused to create `pod` (`status` from the create call).
pub fn explain_create_error(pod: &Pod, status: &Status) -> Diagnosis {
    let message = status.message.as_str();
    let ns = namespace(pod);
    if let Some(rest) = message
        .split_once("violates PodSecurity \"")
        .map(|(_, r)| r)
    {
        let enforced = rest
            .split(['"', ':'])
            .next()
            .and_then(Level::parse)
            .unwrap_or(Level::Baseline);
        let (needed, why) = required_level(pod);
        let mode = mode_of(pod);
        let mut todo = format!(
            "namespace {ns} enforces Pod Security level {enforced}; this pod needs {needed} ({}). Run in a \
             namespace that allows {needed} (-n), or label this one: kubectl label namespace {ns} \
             pod-security.kubernetes.io/enforce={needed} --overwrite",
            if why.is_empty() { "nothing above Baseline".to_string() } else { why.join(", ") }
        );
        match mode {
            Some(m) if m.host_network() => todo.push_str(
                ". The hostNetwork modes always need privileged (host namespaces); ipvlan with --no-ipc-lock \
                 passes baseline",
            ),
            Some(Mode::Ipvlan | Mode::Sriov) if why.iter().all(|w| w.starts_with("non-default capabilities")) => {
                todo.push_str(
                    ". Or add --no-ipc-lock: without IPC_LOCK this pod passes baseline, on nodes whose container \
                     runtime sets an unlimited memlock limit (a CRI-O drop-in, in the field report)",
                )
            }
            _ => {}
        }
        return Diagnosis {
            problem: Problem::PodSecurity { enforced, needed },
            pod: pod_ref(pod),
            what: format!("the API server refused it: {message}"),
            todo,
        };
    }
    if message.contains("RuntimeClass") && message.contains("not found") {
        let rc = quoted_after(message, "RuntimeClass \"").unwrap_or("?");
        return Diagnosis {
            problem: Problem::RuntimeClassMissing,
            pod: pod_ref(pod),
            what: format!("the API server refused it: {message}"),
            todo: format!(
                "create the RuntimeClass {rc}, whose CRI-O handler accepts the io.kubernetes.cri-o.Devices \
                 annotation (deploy/examples/runtimeclass-runc-nohostdev.yaml and its CRI-O drop-in), or name \
                 yours with --runtime-class"
            ),
        };
    }
    if status.code == 404 && message.contains("namespaces") {
        return Diagnosis {
            problem: Problem::NamespaceMissing,
            pod: pod_ref(pod),
            what: format!("the API server refused it: {message}"),
            todo: format!(
                "create namespace {ns} (kubectl create namespace {ns}) or pick another with -n"
            ),
        };
    }
    Diagnosis {
        problem: Problem::Refused,
        pod: pod_ref(pod),
        what: format!(
            "the API server refused it ({} {}): {message}",
            status.code,
            if status.reason.is_empty() {
                "error"
            } else {
                status.reason.as_str()
            }
        ),
        todo: if status.code == 409 {
            format!(
                "a pod of that name exists: delete it (kubectl delete pod -n {ns} {}) or wait for it to go",
                name(pod)
            )
        } else if let Some((verb, resource)) = rbac_refusal(message) {
            format!(
                "your account lacks `{verb}` on {resource} in namespace {ns}: grant it what deploy/rbac.yaml's \
                 Role holds (kubectl apply -f deploy/rbac.yaml, or bind that Role to your user or group)"
            )
        } else if status.code == 403 {
            "your account may not create pods there, or a policy refused the pod: the message says which".into()
        } else {
            "the message above says what the API server objects to".into()
        },
    }
}

/// Why the API server refused to create the ResourceClaimTemplate `name` of `pod`'s mode.
pub fn explain_template_error(pod: &Pod, name: &str, status: &Status) -> Diagnosis {
    let message = status.message.as_str();
    let ns = namespace(pod);
    let (problem, todo) = if status.code == 404 && message.contains("namespaces") {
        (
            Problem::NamespaceMissing,
            format!(
                "create namespace {ns} (kubectl create namespace {ns}) or pick another with -n"
            ),
        )
    } else if status.code == 404 {
        (
            Problem::Refused,
            "the API server does not serve resource.k8s.io/v1 ResourceClaimTemplates: mode dra needs Kubernetes 1.34 or later (DRA is GA there)"
                .to_string(),
        )
    } else if let Some((verb, resource)) = rbac_refusal(message) {
        (
            Problem::Refused,
            format!(
                "your account lacks `{verb}` on {resource} in namespace {ns}: grant it what deploy/rbac.yaml's Role holds (kubectl apply -f deploy/rbac.yaml)"
            ),
        )
    } else if status.code == 409 {
        (
            Problem::Refused,
            format!("a ResourceClaimTemplate {name} exists: delete it (kubectl delete resourceclaimtemplate -n {ns} {name}) or use another --run-id"),
        )
    } else {
        (
            Problem::Refused,
            "the message says what the API server objects to in the claim (a --device-selector that is not valid CEL, for one)"
                .to_string(),
        )
    };
    Diagnosis {
        problem,
        pod: pod_ref(pod),
        what: format!(
            "the API server refused its ResourceClaimTemplate {name} ({} {}): {message}",
            status.code, status.reason
        ),
        todo,
    }
}

/// Whether `pod` tolerates taints with `key` (or every taint).
fn tolerates(pod: &Pod, key: &str) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.tolerations.as_ref())
        .is_some_and(|ts| {
            ts.iter().any(|t| match t.key.as_deref() {
                None | Some("") => t.operator.as_deref() == Some("Exists"),
                Some(k) => k == key,
            })
        })
}

/// The verb and resource of an RBAC refusal: `User "U" cannot VERB resource "RES" in API group ...`.
pub fn rbac_refusal(message: &str) -> Option<(&str, &str)> {
    let rest = message.split_once(" cannot ")?.1;
    let (verb, rest) = rest.split_once(" resource \"")?;
    let resource = rest.split('"').next()?;
    Some((verb, resource))
}

/// The summary when `pod` (as last seen, if it was) was not ready after `waited`.
pub fn explain_timeout(pod: Option<&Pod>, events: &[Event], waited: Duration) -> Diagnosis {
    let Some(pod) = pod else {
        return Diagnosis {
            problem: Problem::Timeout,
            pod: "?".into(),
            what: format!("it was not seen in {} s", waited.as_secs()),
            todo: "check the API server's health and that the pod was created".into(),
        };
    };
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let waiting = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find_map(|c| c.state.as_ref()?.waiting.as_ref()))
        .map(|w| {
            format!(
                ", container waiting: {}{}",
                w.reason.as_deref().unwrap_or("?"),
                w.message
                    .as_ref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_default();
    let last = events
        .last()
        .map(|e| {
            format!(
                ", last event: {} {}",
                e.reason.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("")
            )
        })
        .unwrap_or_default();
    let pulling = events.last().and_then(|e| e.reason.as_deref()) == Some("Pulling");
    let claim_missing = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
        && status
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .is_none_or(|c| c.is_empty());
    if claim_missing {
        return make(
            pod,
            Problem::ClaimPending,
            format!(
                "still {phase} after {} s, and its ResourceClaim {} was never made{last}",
                waited.as_secs(),
                claim_words(pod)
            ),
            pending_todo(pod),
        );
    }
    make(
        pod,
        Problem::Timeout,
        format!("still {phase} after {} s{waiting}{last}", waited.as_secs()),
        if pulling {
            "the image is still being pulled: give a larger --pod-timeout (large CUDA images take minutes), or \
             pre-pull it on the nodes"
                .into()
        } else {
            format!(
                "give a larger --pod-timeout, or see `kubectl describe pod -n {} {}`",
                namespace(pod),
                name(pod)
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::modes::{pod_pair, Attachment, Placement, PodOptions, ResourceSpec};
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
    fn unschedulable_from_the_event_before_the_condition() {
        let pod = with_status(
            pair(Mode::Sriov, true).client,
            json!({ "phase": "Pending" }),
        );
        let d = explained_by(
            &pod,
            "FailedScheduling",
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
        let m = "pods is forbidden: User \"system:serviceaccount:ns1:railsweep\" cannot create resource \
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
        let pod = with_status(
            pair(Mode::HostNetwork, true).server,
            json!({ "phase": "Pending" }),
        );
        let d = explained_by(
            &pod,
            "FailedScheduling",
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
            d.todo.contains("deploy/Containerfile") && d.todo.contains("--inject --image"),
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
        let d = explain_pod(&pod, &[event("FailedCreatePodSandBox", "Warning", IPAM)])
            .expect("explained");
        assert_eq!(d.problem, Problem::IpamExhausted);
        assert!(
            d.what.starts_with(
                "the IP pool rdma-ipvlan-pool has no free address on node 10.140.82.106"
            ),
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
        let d = explained_by(
            &pair(Mode::Ipvlan, true).server,
            "FailedCreatePodSandBox",
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox \"0b6d\": \
             plugin type=\"multus\" name=\"multus-cni-network\" failed (add): [rdma-hostnet/railsweep-r1-ipvlan-server/0b6d:pool-a]: \
             error adding container to network \"pool-a\": failed to allocate for range 0: no IP addresses available in range \
             set: 10.58.0.1-10.58.0.8",
        );
        assert_eq!(d.problem, Problem::IpamExhausted);
        assert!(
            d.what.starts_with(
                "the IP pool of network pool-a (10.58.0.1-10.58.0.8) has no free address"
            ),
            "{d}"
        );
    }

    #[test]
    fn missing_network_attachment() {
        let d = explained_by(
            &pair(Mode::Ipvlan, true).server,
            "FailedCreatePodSandBox",
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

    fn forbidden(message: &str) -> Status {
        Status {
            code: 403,
            reason: "Forbidden".into(),
            message: message.into(),
            ..Status::default()
        }
    }

    #[test]
    fn pod_security_hostnetwork_needs_privileged() {
        let pod = pair(Mode::HostNetwork, true).server;
        let s = forbidden(
            "pods \"railsweep-r1-hostnetwork-server\" is forbidden: violates PodSecurity \"baseline:latest\": \
             host namespaces (hostNetwork=true), hostPort (container \"rdmabw\" uses hostPort 18515), privileged \
             (container \"rdmabw\" must not set securityContext.privileged=true)",
        );
        let d = explain_create_error(&pod, &s);
        assert_eq!(
            d.problem,
            Problem::PodSecurity {
                enforced: Level::Baseline,
                needed: Level::Privileged
            }
        );
        assert!(
            d.todo
                .contains("pod-security.kubernetes.io/enforce=privileged"),
            "{d}"
        );
        assert!(d.todo.contains("always need privileged"), "{d}");
        // Our own reading of the pod gives the same words as the admission plugin.
        let (_, why) = required_level(&pod);
        assert!(s.message.ends_with(&why.join(", ")), "{why:?}");
    }

    #[test]
    fn pod_security_ipvlan_only_for_ipc_lock() {
        // The IPvlan report's refusal: only IPC_LOCK keeps the pod out of Baseline.
        let pod = pair(Mode::Ipvlan, true).client;
        let s = forbidden(
            "pods \"ipvlan-n1\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities \
             (container \"rdma\" must not include \"IPC_LOCK\" in securityContext.capabilities.add)",
        );
        let d = explain_create_error(&pod, &s);
        assert_eq!(
            d.problem,
            Problem::PodSecurity {
                enforced: Level::Baseline,
                needed: Level::Privileged
            }
        );
        assert!(
            d.todo.contains("--no-ipc-lock") && d.todo.contains("passes baseline"),
            "{d}"
        );
        // The CRI-O fix still needs privileged, for hostNetwork (the report's second refusal).
        let crio = pair(Mode::HostNetworkCrio, true).server;
        let s = forbidden(
            "pods \"gpu4-annot-1\" is forbidden: violates PodSecurity \"baseline:latest\": non-default capabilities \
             (container \"gpu\" must not include \"IPC_LOCK\" in securityContext.capabilities.add), host namespaces \
             (hostNetwork=true)",
        );
        let d = explain_create_error(&crio, &s);
        assert!(
            d.todo.contains("always need privileged") && !d.todo.contains("Or add --no-ipc-lock"),
            "{d}"
        );
    }

    #[test]
    fn runtime_class_and_devices() {
        let pod = pair(Mode::HostNetworkCrio, true).server;
        let s = forbidden(
            "pods \"x\" is forbidden: pod rejected: RuntimeClass \"runc-nohostdev\" not found",
        );
        let d = explain_create_error(&pod, &s);
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
        let d = explained_by(
            &pod,
            "FailedCreatePodSandBox",
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
        let d = explained_by(
            &pod,
            "FailedCreatePodSandBox",
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
        let d = explained_by(&pod, "FailedCreatePodSandBox", IPAM);
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
}
