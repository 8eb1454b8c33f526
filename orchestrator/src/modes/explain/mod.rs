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

use super::security::{required_level, Level};
use super::{labels, Mode, DEFAULT_IMAGE};

mod refusal;
mod runtime;
mod scheduling;

use refusal::tolerates;
pub use refusal::{explain_create_error, explain_template_error, rbac_refusal};
pub use runtime::SANDBOX_ATTEMPTS;
use runtime::{containers, quoted_after, sandbox};
use scheduling::{claim_words, claims, pending_todo, topology, unschedulable};
pub use scheduling::{scheduling_reasons, waits_for_host_port};

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

pub(crate) fn host_ports(pod: &Pod) -> Vec<i32> {
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
mod tests;
