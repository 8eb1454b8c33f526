//! Pods the scheduler cannot place: unschedulable, topology, resource claims.
use k8s_openapi::api::core::v1::{Event, Pod};

use super::*;

pub(super) fn topology(pod: &Pod, status_message: Option<&str>, events: &[Event]) -> Diagnosis {
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

/// The scheduler's words for a pod it cannot place: its `PodScheduled` condition, or before
/// that is written, its latest `FailedScheduling` event.
fn unschedulable_message(pod: &Pod, events: &[Event]) -> Option<String> {
    let cond = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
        .filter(|c| c.reason.as_deref() == Some("Unschedulable"));
    cond.and_then(|c| c.message.clone()).or_else(|| {
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
    })
}

/// The node and host ports `pod` waits for when the only thing that keeps the scheduler from
/// placing it on its node is a host port in use there (the other nodes' reason being that
/// they are not its node): `None` for any other reason.
pub fn waits_for_host_port(pod: &Pod, events: &[Event]) -> Option<(String, Vec<i32>)> {
    let reasons = scheduling_reasons(&unschedulable_message(pod, events)?);
    let ports = reasons.iter().any(|r| r.contains("didn't have free ports"));
    let only = reasons.iter().all(|r| {
        r.contains("didn't have free ports")
            || r.contains("didn't match Pod's node affinity/selector")
    });
    if !(ports && only) {
        return None;
    }
    Some((node_of(pod)?.to_string(), host_ports(pod)))
}

pub(super) fn unschedulable(pod: &Pod, events: &[Event]) -> Option<Diagnosis> {
    let message = unschedulable_message(pod, events)?;
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
pub(super) fn claim_words(pod: &Pod) -> String {
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

pub(super) fn pending_todo(pod: &Pod) -> String {
    format!(
        "the pod's ResourceClaim {} was not made: kube-controller-manager's resourceclaim-controller makes it from the template (is it running, with the resource.k8s.io/v1 API on: Kubernetes 1.34+?), and the template must exist in namespace {} (kubectl get resourceclaimtemplates,resourceclaims -n {})",
        claim_words(pod),
        namespace(pod),
        namespace(pod)
    )
}

/// A `dra` pod whose claim was not made or prepared: the resourceclaim controller's
/// `FailedResourceClaimCreation` event, the kubelet's `FailedPrepareDynamicResources`.
pub(super) fn claims(pod: &Pod, events: &[Event]) -> Option<Diagnosis> {
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
